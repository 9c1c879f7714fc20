//! [`RelayConfig`]: every setting of a relay, with its documented default.

use std::collections::BTreeSet;
use std::time::Duration;

use outbox_core::name::{WorkerKeyError, check_worker_key};
use outbox_core::policy::{Backoff, DeadLetterPolicy, Ordering};

/// Default rows per batch.
pub const DEFAULT_BATCH_SIZE: usize = 100;
/// Default time between polls when there is nothing to publish.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(1);
/// Default number of failed attempts after which a row is dead-lettered.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 10;
/// Default lease (and instance) time to live.
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(30);
/// Default time between heartbeats (lease renewal, rebalancing).
pub const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(10);
/// Default limit of one `publish` call.
pub const DEFAULT_PUBLISH_TIMEOUT: Duration = Duration::from_secs(10);
/// Default retention of published rows: none, the mark deletes a row once it is published
/// (see [`RelayConfig::retention`]).
pub const DEFAULT_RETENTION: Duration = Duration::ZERO;
/// Default time between retention cleanups.
pub const DEFAULT_PURGE_INTERVAL: Duration = Duration::from_secs(600);
/// Default rows deleted per cleanup statement.
pub const DEFAULT_PURGE_BATCH: usize = 1_000;
/// Default time between two looks for scheduled rows that are due (see [`crate::schedule`]).
pub const DEFAULT_SCHEDULE_INTERVAL: Duration = Duration::from_secs(1);

/// The settings of a relay, built by [`RelayBuilder`](super::RelayBuilder):
///
/// | setting | default |
/// |---|---|
/// | batch size | 100 rows ([`DEFAULT_BATCH_SIZE`]) |
/// | poll interval | 1 s ([`DEFAULT_POLL_INTERVAL`]); PostgreSQL `NOTIFY` wakes the relay earlier |
/// | max attempts | 10 ([`DEFAULT_MAX_ATTEMPTS`]): the 10th failed attempt dead-letters the row |
/// | backoff | [`Backoff::default`]: 1 s · 2ⁿ⁻¹, at most 5 min, plus jitter |
/// | ordering | [`Ordering::PerAggregate`] |
/// | dead-letter policy | [`DeadLetterPolicy::Block`] |
/// | retention of published rows | none ([`DEFAULT_RETENTION`]): the mark deletes a published row; a longer retention keeps it, purged every 10 min in batches of 1 000 |
/// | lease TTL | 30 s ([`DEFAULT_LEASE_TTL`]), heartbeat every 10 s |
/// | publish timeout | 10 s ([`DEFAULT_PUBLISH_TIMEOUT`]) |
/// | `LISTEN` wake-up | on (PostgreSQL, when the outbox has a `NOTIFY` channel) |
/// | instance id | `relay-<UUIDv7>` |
/// | pipelining | on (PostgreSQL and MariaDB, when the pool allows 2 connections more than the listener): the database work of one batch overlaps the publishing of the next |
/// | head-of-aggregate check | off; on with the fast path |
/// | worker keys | none: every row is claimable, keyed or not (see [`crate::job`]) |
/// | schedule interval | 1 s ([`DEFAULT_SCHEDULE_INTERVAL`]): scheduled rows are moved into the outbox table within this of their due time (see [`crate::schedule`]) |
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RelayConfig {
    /// Rows claimed per batch.
    pub batch_size: usize,
    /// Sleep between polls when the last batch was not full.
    pub poll_interval: Duration,
    /// Failed attempts (transient errors) before a row is dead-lettered; a permanent error
    /// dead-letters at once.
    pub max_attempts: u32,
    /// Delay before the next attempt of a row that failed.
    pub backoff: Backoff,
    /// Publication order.
    pub ordering: Ordering,
    /// What a dead row does to its aggregate's later rows.
    pub dead_letter_policy: DeadLetterPolicy,
    /// How long published rows are kept: `Some(Duration::ZERO)` (the default) deletes a
    /// row in the same transaction that marks it published; a longer retention keeps it
    /// with `status = 'published'` until the running relay's cleanup deletes it; `None`
    /// keeps it for good.
    ///
    /// Keeping published rows costs throughput: the mark is then an `UPDATE` that can never
    /// be a HOT update (`status` is in the predicates of the partial indexes), a new row
    /// version with an entry in the primary key and the message-id index, where a `DELETE`
    /// writes neither (see `BENCHMARKS.md`). What is kept in any case: pending, dead,
    /// failed and skipped rows, the operator log, and the published counts in the metrics.
    pub retention: Option<Duration>,
    /// Time between two retention cleanups.
    pub purge_interval: Duration,
    /// Rows deleted per cleanup statement.
    pub purge_batch: usize,
    /// How long a lease (and an instance's liveness) lasts without a heartbeat.
    pub lease_ttl: Duration,
    /// Time between heartbeats.
    pub heartbeat_interval: Duration,
    /// Limit of one `publish` call; a batch that takes longer fails with a transient
    /// timeout.
    pub publish_timeout: Duration,
    /// Whether the relay listens for the outbox's PostgreSQL `NOTIFY`.
    pub listen: bool,
    /// This relay's id in the instance and lease tables.
    pub instance_id: String,
    /// Whether each batch checks that its rows are at the head of their aggregate (see
    /// [`crate::relay::fast_path`]).
    pub check_head: bool,
    /// Whether batches are pipelined on PostgreSQL and MariaDB: while one batch is being
    /// published, the previous one is marked and committed and the next one is claimed, on
    /// a second connection (see [`RelayBuilder::pipeline`](super::RelayBuilder::pipeline)).
    pub pipeline: bool,
    /// Job-queue mode: claim only rows whose `worker_key` is one of these (`None`: every
    /// row). See [`crate::job`].
    pub worker_keys: Option<BTreeSet<String>>,
    /// Time between two looks for scheduled rows that are due, which the relay then moves
    /// into the outbox table (see [`crate::schedule`]).
    pub schedule_interval: Duration,
}

impl Default for RelayConfig {
    fn default() -> Self {
        Self {
            batch_size: DEFAULT_BATCH_SIZE,
            poll_interval: DEFAULT_POLL_INTERVAL,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            backoff: Backoff::default(),
            ordering: Ordering::PerAggregate,
            dead_letter_policy: DeadLetterPolicy::Block,
            retention: Some(DEFAULT_RETENTION),
            purge_interval: DEFAULT_PURGE_INTERVAL,
            purge_batch: DEFAULT_PURGE_BATCH,
            lease_ttl: DEFAULT_LEASE_TTL,
            heartbeat_interval: DEFAULT_HEARTBEAT_INTERVAL,
            publish_timeout: DEFAULT_PUBLISH_TIMEOUT,
            listen: true,
            instance_id: format!("relay-{}", uuid::Uuid::now_v7()),
            check_head: false,
            pipeline: true,
            worker_keys: None,
            schedule_interval: DEFAULT_SCHEDULE_INTERVAL,
        }
    }
}

/// A relay setting was rejected by [`RelayBuilder::build`](super::RelayBuilder::build).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RelayConfigError {
    /// The outbox's write mode leaves nothing in the table for a polling relay.
    #[error(
        "the outbox writes in mode `{mode}`: its envelopes do not stay in the outbox table, so a \
         polling relay would never see them; run the log relay (relay::log::LogRelay) instead"
    )]
    WriteMode {
        /// The write mode.
        mode: &'static str,
    },
    /// A count is 0.
    #[error("`{setting}` must be at least 1")]
    Zero {
        /// The setting.
        setting: &'static str,
    },
    /// The heartbeat does not come often enough to keep leases alive.
    #[error("heartbeat interval {heartbeat:?} must be shorter than half the lease TTL {ttl:?}")]
    Heartbeat {
        /// The heartbeat interval.
        heartbeat: Duration,
        /// The lease TTL.
        ttl: Duration,
    },
    /// A publish call could outlive the lease (SQLite's relay relies on it).
    #[error(
        "publish timeout {timeout:?} must be shorter than half the lease TTL {ttl:?}, and \
         with the heartbeat interval shorter than the whole TTL"
    )]
    PublishTimeout {
        /// The publish timeout.
        timeout: Duration,
        /// The lease TTL.
        ttl: Duration,
    },
    /// The instance id is empty or longer than 255 characters.
    #[error("the instance id must have 1 to 255 characters, got {length}")]
    InstanceId {
        /// Its length.
        length: usize,
    },
    /// A worker key breaks the worker-key grammar.
    #[error("invalid worker key {key:?}: {reason}")]
    WorkerKey {
        /// The rejected key.
        key: String,
        /// Which rule it breaks.
        reason: WorkerKeyError,
    },
    /// An empty set of worker keys: the relay would never claim anything.
    #[error("a relay restricted to worker keys needs at least one key")]
    NoWorkerKeys,
}

impl RelayConfig {
    /// Checks the settings as [`RelayBuilder::build`](super::RelayBuilder::build) does,
    /// without a database: what a configuration file checker can tell before it connects.
    ///
    /// # Errors
    /// [`RelayConfigError`] naming the first rejected setting.
    pub fn validate(&self) -> Result<(), RelayConfigError> {
        for (setting, value) in [
            ("batch_size", self.batch_size),
            ("max_attempts", self.max_attempts as usize),
            ("purge_batch", self.purge_batch),
        ] {
            if value == 0 {
                return Err(RelayConfigError::Zero { setting });
            }
        }
        if self.heartbeat_interval.is_zero() || self.heartbeat_interval * 2 > self.lease_ttl {
            return Err(RelayConfigError::Heartbeat {
                heartbeat: self.heartbeat_interval,
                ttl: self.lease_ttl,
            });
        }
        if self.publish_timeout * 2 > self.lease_ttl
            || self.publish_timeout + self.heartbeat_interval >= self.lease_ttl
        {
            return Err(RelayConfigError::PublishTimeout {
                timeout: self.publish_timeout,
                ttl: self.lease_ttl,
            });
        }
        let length = self.instance_id.chars().count();
        if length == 0 || length > 255 {
            return Err(RelayConfigError::InstanceId { length });
        }
        if let Some(keys) = &self.worker_keys {
            if keys.is_empty() {
                return Err(RelayConfigError::NoWorkerKeys);
            }
            for key in keys {
                check_worker_key(key).map_err(|reason| RelayConfigError::WorkerKey {
                    key: key.clone(),
                    reason,
                })?;
            }
        }
        Ok(())
    }
}
