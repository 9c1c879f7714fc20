//! [`LogRelayConfig`]: every setting of a log relay, with its documented default.

use std::time::Duration;

use outbox_core::policy::{Backoff, DeadLetterPolicy};

/// Default events per published batch (a batch may span many transactions).
pub const DEFAULT_BATCH_SIZE: usize = 1_000;
/// Default number of failed attempts after which an event is dead-lettered.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 10;
/// Default time between idle-database heartbeats.
pub const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(10);
/// Default shortest time between two status updates to the server while changes arrive.
pub const DEFAULT_FEEDBACK_INTERVAL: Duration = Duration::from_secs(1);
/// Default limit of one `publish` call.
pub const DEFAULT_PUBLISH_TIMEOUT: Duration = Duration::from_secs(10);
/// Default limit of connecting the replication connection.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default time to live of a slot's lease: a standby takes over within it after the active
/// relay died.
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(10);
/// Default retention of streamed table rows: a day (the window in which a lost slot can be
/// recovered from the table, see the module documentation).
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(24 * 3600);
/// Default time between two retention cleanups.
pub const DEFAULT_PURGE_INTERVAL: Duration = Duration::from_secs(60);
/// Default rows deleted per cleanup statement.
pub const DEFAULT_PURGE_BATCH: usize = 1_000;
/// Prefix of the heartbeat messages (`pg_logical_emit_message`).
pub const HEARTBEAT_PREFIX: &str = "outbox.heartbeat";

/// The settings of a log relay, built by [`LogRelayBuilder`](super::LogRelayBuilder):
///
/// | setting | default |
/// |---|---|
/// | slot | required: a replication slot name, `[a-z0-9_]`, at most 63 characters |
/// | publication | the slot's name |
/// | batch size | 1 000 events ([`DEFAULT_BATCH_SIZE`]) |
/// | max attempts | 10 ([`DEFAULT_MAX_ATTEMPTS`]) |
/// | dead-letter policy | [`DeadLetterPolicy::Block`]: an aggregate's later events are parked behind its dead one |
/// | backoff | [`Backoff::default`], also between reconnections |
/// | heartbeat | every 10 s ([`DEFAULT_HEARTBEAT_INTERVAL`]) |
/// | status updates | at most every 1 s while changes arrive ([`DEFAULT_FEEDBACK_INTERVAL`]), and at shutdown |
/// | publish timeout | 10 s ([`DEFAULT_PUBLISH_TIMEOUT`]) |
/// | connect timeout | 10 s ([`DEFAULT_CONNECT_TIMEOUT`]) |
/// | retention of streamed table rows | 24 h ([`DEFAULT_RETENTION`]) after their transaction's acknowledgement, purged every 60 s in batches of 1 000 |
/// | lease TTL | 10 s ([`DEFAULT_LEASE_TTL`]), renewed every third of it |
/// | instance id | `log-relay-<UUIDv7>` |
/// | replication connection | the pool's host, port, user and database (a password comes from `PGPASSWORD` or `~/.pgpass`), or [`connection_url`](super::LogRelayBuilder::connection_url) |
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LogRelayConfig {
    /// The replication slot.
    pub slot: String,
    /// The publication the slot streams.
    pub publication: String,
    /// Events per published batch.
    pub batch_size: usize,
    /// Failed attempts (transient errors) before an event is dead-lettered; a permanent
    /// error dead-letters at once.
    pub max_attempts: u32,
    /// Delay before the next attempt of an event that failed, and between reconnections.
    pub backoff: Backoff,
    /// What a dead event does to its aggregate's later events.
    pub dead_letter_policy: DeadLetterPolicy,
    /// Time between idle-database heartbeats.
    pub heartbeat_interval: Duration,
    /// Shortest time between two status updates while changes arrive.
    pub feedback_interval: Duration,
    /// Limit of one `publish` call: past it the call counts as a timeout (transient).
    pub publish_timeout: Duration,
    /// Limit of connecting the replication connection.
    pub connect_timeout: Duration,
    /// The replication connection's URL, when not derived from the pool.
    pub connection_url: Option<String>,
    /// How long rows the relay streamed stay in the table (table mode; they stay `pending`):
    /// rows written more than this before the last acknowledged commit are deleted. `None`
    /// keeps them for good. At least a minute: the cutoff relies on a row being written
    /// well within it of its transaction's commit.
    pub retention: Option<Duration>,
    /// Time between two retention cleanups.
    pub purge_interval: Duration,
    /// Rows deleted per cleanup statement.
    pub purge_batch: usize,
    /// How long the slot's lease lasts without renewal.
    pub lease_ttl: Duration,
    /// This relay's name in the slot's lease (status output, logs).
    pub instance_id: String,
}

impl LogRelayConfig {
    /// The defaults, for slot `slot`.
    pub(super) fn new(slot: String) -> Self {
        Self {
            publication: slot.clone(),
            slot,
            batch_size: DEFAULT_BATCH_SIZE,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            backoff: Backoff::default(),
            dead_letter_policy: DeadLetterPolicy::Block,
            heartbeat_interval: DEFAULT_HEARTBEAT_INTERVAL,
            feedback_interval: DEFAULT_FEEDBACK_INTERVAL,
            publish_timeout: DEFAULT_PUBLISH_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            connection_url: None,
            retention: Some(DEFAULT_RETENTION),
            purge_interval: DEFAULT_PURGE_INTERVAL,
            purge_batch: DEFAULT_PURGE_BATCH,
            lease_ttl: DEFAULT_LEASE_TTL,
            instance_id: format!("log-relay-{}", uuid::Uuid::now_v7()),
        }
    }
}
