//! [`PartitionedConsumer`]: several processes of one consumer, each applying the messages
//! of the partitions it holds a lease for, so that each aggregate's messages are applied
//! in order by one process at a time, and a killed process's partitions are taken over.
//!
//! The publisher puts each message in a partition — a NATS subject, a RabbitMQ queue, a
//! Redis stream — chosen by `fnv1a_64(aggregate_id) % partitions`
//! ([`partition_of`](crate::partition::partition_of), the function the outbox uses; see
//! `outbox_brokers::route::Route::partitioned`). A partitioned consumer knows the same count. Each
//! instance heartbeats in the consumer's database (`<inbox>_consumer_instances`) and takes
//! the leases (`<inbox>_consumer_leases`, one row per partition, named
//! `<consumer>/partition/<p>`) that rendezvous hashing over the live instances gives it —
//! the relay's lease machinery ([`crate::relay`]), per consumer name. For every lease it
//! holds it starts one partition runner, a task of the broker adapter's (it consumes that
//! partition's subject, queue or stream in order), and it stops the runner when the lease
//! goes:
//!
//! - **joining**: a new instance appears in the live list; every instance computes the
//!   new assignment; the instance that loses a partition stops its runner (after the
//!   message in progress), then releases the lease; the newcomer takes it at its next
//!   heartbeat (default every 2 s);
//! - **leaving** (shutdown): runners stop, leases are released, the instance row is
//!   removed; the others take the partitions at their next heartbeat;
//! - **killed**: its leases expire after the lease TTL (default 10 s), then the others take
//!   them.
//!
//! **Fencing.** A runner applies messages through a copy of the [`Consumer`] fenced by its
//! lease: every handler transaction reads the lease row share-locked right after inserting
//! the inbox row and rolls back with [`InboxError::LeaseLost`](super::InboxError) (the
//! runner gets [`ConsumerError::LeaseLost`](super::ConsumerError) and stops, the message
//! unacknowledged) unless the lease is still this instance's with the fencing token it was
//! taken with, unexpired. A new owner's takeover waits for such a transaction to end. So a
//! process that lost its lease — paused past the TTL, cut from the database — cannot commit
//! an effect behind the new owner's: no partition is applied by two processes at once.
//! Parking a message and dead-lettering it are not fenced (they keep each aggregate's
//! order in the database themselves, see [`Consumer`]).
//!
//! ```no_run
//! use outbox_seaorm::Outbox;
//! use outbox_seaorm::inbox::Consumer;
//! use outbox_seaorm::inbox::partitioned::{Partition, PartitionedConsumer};
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn demo(db: sea_orm::DatabaseConnection) -> Result<(), Box<dyn std::error::Error>> {
//! let inbox = Consumer::builder(db, Outbox::default(), "inventory.reserve-stock").build()?;
//! let partitioned = PartitionedConsumer::builder(inbox, 16).build()?;
//! let shutdown = CancellationToken::new();
//! let report = partitioned
//!     .run(shutdown, |partition: Partition| async move {
//!         // Consume partition `partition.number()` until `partition.stop()` is cancelled,
//!         // settling each message with `partition.consumer()` (fenced by the lease).
//!         partition.stop().cancelled().await;
//!     })
//!     .await;
//! # let _ = report;
//! # Ok(())
//! # }
//! ```
//!
//! The broker adapters of `outbox-brokers` run this for you (their `partitioned` runners).

mod builder;
mod fence;
mod supervisor;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

pub use builder::{
    DEFAULT_CONSUMER_HEARTBEAT_INTERVAL, DEFAULT_CONSUMER_LEASE_TTL, MAX_CONSUMER_PARTITIONS,
    PartitionedConfigError, PartitionedConsumerBuilder,
};
pub(crate) use fence::Fence;
pub use supervisor::PartitionedReport;

use super::Consumer;

/// One consumer's instance in a group of instances that share its partitions through
/// leases; see the [module documentation](self).
#[derive(Debug)]
pub struct PartitionedConsumer {
    consumer: Consumer,
    instance_id: String,
    /// The lease owner and instance row id: `<consumer>/<instance id>`, so that two
    /// consumers of one process may share an instance id.
    owner: String,
    /// The lease name of every partition, by partition.
    leases: Vec<String>,
    lease_ttl: Duration,
    heartbeat_interval: Duration,
}

impl PartitionedConsumer {
    /// Starts configuring an instance of `consumer` whose messages are spread over
    /// `partitions` partitions (the count the publisher's route uses).
    pub fn builder(consumer: Consumer, partitions: u32) -> PartitionedConsumerBuilder {
        PartitionedConsumerBuilder {
            consumer,
            partitions,
            instance_id: None,
            lease_ttl: DEFAULT_CONSUMER_LEASE_TTL,
            heartbeat_interval: DEFAULT_CONSUMER_HEARTBEAT_INTERVAL,
        }
    }

    /// The consumer (unfenced: for the redelivery loop and operations).
    pub fn consumer(&self) -> &Consumer {
        &self.consumer
    }

    /// This instance's id.
    pub fn instance_id(&self) -> &str {
        &self.instance_id
    }

    /// The owner this instance's leases and instance row carry:
    /// `<consumer>/<instance id>`.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// The partition count.
    pub fn partitions(&self) -> u32 {
        u32::try_from(self.leases.len()).unwrap_or(u32::MAX)
    }

    /// The lease TTL.
    pub fn lease_ttl(&self) -> Duration {
        self.lease_ttl
    }
}

/// A partition this instance holds the lease of, handed to the partition runner.
#[derive(Debug)]
pub struct Partition {
    number: u32,
    token: i64,
    consumer: Consumer,
    stop: CancellationToken,
    held: LeaseHeld,
}

/// Whether a partition runner may still read its partition: its stop token is not
/// cancelled and the instance's last lease renewal is recent enough (started less than the
/// lease TTL minus one heartbeat interval ago, on this process's monotonic clock). A runner
/// checks it before each read from the broker, so that a process that was paused past its
/// leases' expiry (and may have been replaced meanwhile) does not take deliveries from the
/// new owner's partition on resuming, before its supervisor noticed. Cheap to clone.
#[derive(Debug, Clone)]
pub struct LeaseHeld {
    valid_until: Arc<Mutex<Option<Instant>>>,
    stop: CancellationToken,
}

impl LeaseHeld {
    /// Whether the lease is still held (see the [type documentation](Self)).
    pub fn holds(&self) -> bool {
        let valid_until = *self
            .valid_until
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        !self.stop.is_cancelled() && valid_until.is_some_and(|until| Instant::now() < until)
    }
}

impl Partition {
    /// The partition number, `0..partitions`.
    pub fn number(&self) -> u32 {
        self.number
    }

    /// The lease's fencing token (incremented on every change of owner).
    pub fn token(&self) -> i64 {
        self.token
    }

    /// The consumer to settle this partition's messages with: fenced by the lease (see the
    /// [module documentation](self)).
    pub fn consumer(&self) -> &Consumer {
        &self.consumer
    }

    /// Cancelled when the runner must stop: the lease is given up (rebalancing, shutdown)
    /// or lost. Stop after the message in progress; leave the rest unacknowledged.
    pub fn stop(&self) -> &CancellationToken {
        &self.stop
    }

    /// Whether the runner may still read the partition; check before each read.
    pub fn held(&self) -> &LeaseHeld {
        &self.held
    }
}
