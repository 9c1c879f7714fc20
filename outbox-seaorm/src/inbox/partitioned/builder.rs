//! [`PartitionedConsumerBuilder`]: the configuration of a [`PartitionedConsumer`].

use std::time::Duration;

use super::PartitionedConsumer;
use crate::inbox::Consumer;
use crate::lease::consumer_partition_lease;
use crate::status::MAX_KEY_CHARS;

/// Default lease TTL of a consumer's partition leases: 10 s. A partition whose owner was
/// killed is taken over within this time.
pub const DEFAULT_CONSUMER_LEASE_TTL: Duration = Duration::from_secs(10);
/// Default interval between a consumer instance's heartbeats (and lease renewals): 2 s. A
/// joining instance gets its partitions within about two intervals.
pub const DEFAULT_CONSUMER_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(2);
/// Most partitions a consumer may have.
pub const MAX_CONSUMER_PARTITIONS: u32 = 4096;

/// Why a [`PartitionedConsumerBuilder`] refused its configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PartitionedConfigError {
    /// The partition count is 0 or over [`MAX_CONSUMER_PARTITIONS`].
    #[error("a partitioned consumer needs 1 to {MAX_CONSUMER_PARTITIONS} partitions, not {0}")]
    Partitions(u32),
    /// The heartbeat interval is zero or more than half the lease TTL (a lease would expire
    /// between two renewals).
    #[error(
        "the heartbeat interval ({heartbeat:?}) must be positive and at most half the lease \
         TTL ({ttl:?})"
    )]
    Timing {
        /// The heartbeat interval.
        heartbeat: Duration,
        /// The lease TTL.
        ttl: Duration,
    },
    /// The instance id is empty, or `<consumer>/<instance id>` (the lease owner) is longer
    /// than [`MAX_KEY_CHARS`](crate::schema::MAX_KEY_CHARS) characters.
    #[error(
        "the instance id must be non-empty and `<consumer>/<instance id>` at most \
         {MAX_KEY_CHARS} characters; the id has {0}"
    )]
    InstanceId(usize),
    /// The lease names (`<consumer>/partition/<p>`) would be longer than
    /// [`MAX_KEY_CHARS`](crate::schema::MAX_KEY_CHARS) characters.
    #[error(
        "the consumer name `{0}` is too long for partition lease names \
         (`<consumer>/partition/<p>`, at most {MAX_KEY_CHARS} characters)"
    )]
    ConsumerName(String),
}

/// Configures a [`PartitionedConsumer`]; see [`PartitionedConsumer::builder`].
///
/// | setting | default |
/// |---|---|
/// | instance id | `consumer-<UUIDv7>`, new per process |
/// | lease TTL | 10 s ([`DEFAULT_CONSUMER_LEASE_TTL`]) |
/// | heartbeat interval | 2 s ([`DEFAULT_CONSUMER_HEARTBEAT_INTERVAL`]) |
#[derive(Debug)]
#[must_use]
pub struct PartitionedConsumerBuilder {
    pub(super) consumer: Consumer,
    pub(super) partitions: u32,
    pub(super) instance_id: Option<String>,
    pub(super) lease_ttl: Duration,
    pub(super) heartbeat_interval: Duration,
}

impl PartitionedConsumerBuilder {
    /// This instance's id, unique among the consumer's live instances (default:
    /// `consumer-<UUIDv7>`; leases and the instance row carry `<consumer>/<id>`). A stable id (a pod name) lets a restarted instance find the
    /// partitions it held; two live instances with one id would share its leases.
    pub fn instance_id(mut self, id: impl Into<String>) -> Self {
        self.instance_id = Some(id.into());
        self
    }

    /// How long a partition lease lasts without renewal: the time within which a killed
    /// instance's partitions are taken over.
    pub fn lease_ttl(mut self, ttl: Duration) -> Self {
        self.lease_ttl = ttl;
        self
    }

    /// How often the instance heartbeats, renews its leases and rebalances.
    pub fn heartbeat_interval(mut self, interval: Duration) -> Self {
        self.heartbeat_interval = interval;
        self
    }

    /// Checks the configuration.
    ///
    /// # Errors
    /// [`PartitionedConfigError`].
    pub fn build(self) -> Result<PartitionedConsumer, PartitionedConfigError> {
        if self.partitions == 0 || self.partitions > MAX_CONSUMER_PARTITIONS {
            return Err(PartitionedConfigError::Partitions(self.partitions));
        }
        if self.heartbeat_interval.is_zero() || self.heartbeat_interval * 2 > self.lease_ttl {
            return Err(PartitionedConfigError::Timing {
                heartbeat: self.heartbeat_interval,
                ttl: self.lease_ttl,
            });
        }
        let instance_id = self
            .instance_id
            .unwrap_or_else(|| format!("consumer-{}", uuid::Uuid::now_v7()));
        let length = instance_id.chars().count();
        let owner = format!("{}/{instance_id}", self.consumer.name());
        if length == 0 || owner.chars().count() > MAX_KEY_CHARS {
            return Err(PartitionedConfigError::InstanceId(length));
        }
        let longest = consumer_partition_lease(self.consumer.name(), self.partitions - 1);
        if longest.chars().count() > MAX_KEY_CHARS {
            return Err(PartitionedConfigError::ConsumerName(
                self.consumer.name().to_owned(),
            ));
        }
        Ok(PartitionedConsumer {
            leases: (0..self.partitions)
                .map(|p| consumer_partition_lease(self.consumer.name(), p))
                .collect(),
            consumer: self.consumer,
            instance_id,
            owner,
            lease_ttl: self.lease_ttl,
            heartbeat_interval: self.heartbeat_interval,
        })
    }
}
