//! [`LogRelayConfig`]: every setting of a log relay, with its documented default.

use std::time::Duration;

use outbox_core::policy::{Backoff, DeadLetterPolicy};

use super::error::LogRelayError;
use crate::table::MAX_IDENTIFIER_LEN;

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

/// How long a stopping reader goes on reading to the commit of the transaction it is in the
/// middle of: its rows may be published already, and only its commit lets them be
/// acknowledged.
pub(crate) const FINISH_TRANSACTION: Duration = Duration::from_secs(2);

/// The settings of a log relay: plain data, given whole to
/// [`LogRelayBuilder::config`](super::LogRelayBuilder::config) (as a polling relay takes a
/// [`RelayConfig`](crate::relay::RelayConfig)) or set one by one through the builder, and
/// validated once by [`build`](super::LogRelayBuilder::build):
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
/// | replication connection | the pool's host, port, user and database (a password comes from `PGPASSWORD` or `~/.pgpass`; on MariaDB give a URL when the user has one), or [`connection_url`](super::LogRelayBuilder::connection_url) |
/// | replica server id (MariaDB) | derived from the slot name (`0x8000_0000` and up), so that a successor's registration ends a stale dump of the same slot |
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
    /// Time between two looks for scheduled rows that are due, which the relay moves into
    /// the outbox table, where the log sees their insert (see [`crate::schedule`]).
    pub schedule_interval: Duration,
    /// How long the slot's lease lasts without renewal.
    pub lease_ttl: Duration,
    /// This relay's name in the slot's lease (status output, logs).
    pub instance_id: String,
    /// MariaDB: the server id the relay registers its binlog dump with (unique among the
    /// server's replicas, not the server's own); `None` derives it from the slot name
    /// ([`LogRelayConfig::replica_server_id`]). Ignored on PostgreSQL.
    pub replica_server_id: Option<u32>,
}

impl LogRelayConfig {
    /// The defaults, for replication slot `slot` (checked by [`validate`](Self::validate)).
    pub fn for_slot(slot: impl Into<String>) -> Self {
        let slot = slot.into();
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
            schedule_interval: crate::relay::config::DEFAULT_SCHEDULE_INTERVAL,
            lease_ttl: DEFAULT_LEASE_TTL,
            instance_id: format!("log-relay-{}", uuid::Uuid::now_v7()),
            replica_server_id: None,
        }
    }

    /// The server id of the binlog dump (MariaDB): the configured one, or one derived from
    /// the slot name (FNV-1a, in `0x8000_0000..=0xFFFF_FFFF`, away from the small ids
    /// servers are usually given). The same slot always registers the same id, so a
    /// relay that takes the slot over ends a stale relay's dump.
    pub fn replica_server_id(&self) -> u32 {
        self.replica_server_id.unwrap_or_else(|| {
            let hash = self.slot.bytes().fold(0x811c_9dc5_u32, |hash, byte| {
                (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193)
            });
            0x8000_0000 | hash
        })
    }

    /// Checks every setting: the slot and publication names, no zero batch size, attempt
    /// count or interval, a lease of at least 1 s, a retention of at least a minute, an
    /// instance id of 1 to 255 characters.
    ///
    /// # Errors
    /// [`LogRelayError::Config`] naming the first rejected setting ([`problems`](Self::problems)
    /// lists them all).
    pub fn validate(&self) -> Result<(), LogRelayError> {
        match self.problems().into_iter().next() {
            Some(problem) => Err(problem),
            None => Ok(()),
        }
    }

    /// Every rejected setting, each as a [`LogRelayError::Config`], in the order of the
    /// fields; empty when [`validate`](Self::validate) passes. A configuration checker
    /// (the relay service's `check-config`) reports them all in one run.
    pub fn problems(&self) -> Vec<LogRelayError> {
        let mut problems = Vec::new();
        let mut reject = |setting: &'static str, reason: String| {
            problems.push(LogRelayError::Config { setting, reason });
        };
        if let Some(reason) = slot_name_problem(&self.slot) {
            reject("slot", reason);
        }
        if let Some(reason) = identifier_problem(&self.publication) {
            reject("publication", reason);
        }
        if self.batch_size == 0 {
            reject("batch_size", "must be at least 1".into());
        }
        if self.max_attempts == 0 {
            reject("max_attempts", "must be at least 1".into());
        }
        for (setting, value) in [
            ("heartbeat_interval", self.heartbeat_interval),
            ("feedback_interval", self.feedback_interval),
            ("publish_timeout", self.publish_timeout),
            ("connect_timeout", self.connect_timeout),
            ("purge_interval", self.purge_interval),
        ] {
            if value.is_zero() {
                reject(setting, "must be longer than zero".into());
            }
        }
        if self.lease_ttl < Duration::from_secs(1) {
            reject(
                "lease_ttl",
                format!("{:?} is shorter than 1 s", self.lease_ttl),
            );
        }
        if let Some(retention) = self.retention
            && retention < Duration::from_secs(60)
        {
            reject(
                "retention",
                format!("{retention:?} is shorter than a minute"),
            );
        }
        if self.purge_batch == 0 {
            reject("purge_batch", "must be at least 1".into());
        }
        if self.instance_id.is_empty() || self.instance_id.chars().count() > 255 {
            reject("instance_id", "must have 1 to 255 characters".into());
        }
        if self.replica_server_id == Some(0) {
            reject(
                "replica_server_id",
                "0 is not a replica server id (MariaDB refuses it)".into(),
            );
        }
        problems
    }
}

/// Checks a replication slot name as [`LogRelayBuilder::slot`](super::LogRelayBuilder::slot) needs it: lower-case
/// letters, digits and `_`, 1 to 63 characters.
///
/// # Errors
/// [`LogRelayError::Config`] saying what is wrong with it.
pub fn validate_slot_name(name: &str) -> Result<(), LogRelayError> {
    match slot_name_problem(name) {
        Some(reason) => Err(LogRelayError::Config {
            setting: "slot",
            reason,
        }),
        None => Ok(()),
    }
}

/// Checks a publication name as [`LogRelayBuilder::publication`](super::LogRelayBuilder::publication) needs it: an identifier
/// (`[A-Za-z_][A-Za-z0-9_]*`, at most 63 characters).
///
/// # Errors
/// [`LogRelayError::Config`] saying what is wrong with it.
pub fn validate_publication_name(name: &str) -> Result<(), LogRelayError> {
    match identifier_problem(name) {
        Some(reason) => Err(LogRelayError::Config {
            setting: "publication",
            reason,
        }),
        None => Ok(()),
    }
}

/// Why `name` is not a replication slot name (`[a-z0-9_]`, 1 to 63 characters).
pub(super) fn slot_name_problem(name: &str) -> Option<String> {
    if name.is_empty() || name.len() > MAX_IDENTIFIER_LEN {
        return Some(format!(
            "`{name}` must have 1 to {MAX_IDENTIFIER_LEN} characters"
        ));
    }
    name.chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_'))
        .map(|c| {
            format!("`{name}` has `{c}`: a slot name has lower-case letters, digits and `_` only")
        })
}

/// Why `name` is not a plain identifier (`[A-Za-z_][A-Za-z0-9_]*`, at most 63 characters).
pub(super) fn identifier_problem(name: &str) -> Option<String> {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !first_ok || !rest_ok || name.len() > MAX_IDENTIFIER_LEN {
        return Some(format!(
            "`{name}` is not an identifier ([A-Za-z_][A-Za-z0-9_]*, at most \
             {MAX_IDENTIFIER_LEN} characters)"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_valid_and_each_bad_setting_is_named() {
        assert!(LogRelayConfig::for_slot("orders_outbox").validate().is_ok());
        let rejected = |change: fn(&mut LogRelayConfig)| {
            let mut config = LogRelayConfig::for_slot("orders_outbox");
            change(&mut config);
            match config.validate() {
                Err(LogRelayError::Config { setting, .. }) => setting,
                other => panic!("not rejected: {other:?}"),
            }
        };
        assert_eq!(rejected(|c| c.slot = "Orders".into()), "slot");
        assert_eq!(rejected(|c| c.publication = "1pub".into()), "publication");
        assert_eq!(rejected(|c| c.batch_size = 0), "batch_size");
        assert_eq!(rejected(|c| c.max_attempts = 0), "max_attempts");
        assert_eq!(
            rejected(|c| c.feedback_interval = Duration::ZERO),
            "feedback_interval"
        );
        assert_eq!(
            rejected(|c| c.lease_ttl = Duration::from_millis(500)),
            "lease_ttl"
        );
        assert_eq!(
            rejected(|c| c.retention = Some(Duration::from_secs(5))),
            "retention"
        );
        assert_eq!(rejected(|c| c.instance_id = String::new()), "instance_id");
        let mut config = LogRelayConfig::for_slot("Orders");
        config.batch_size = 0;
        config.retention = Some(Duration::from_secs(5));
        let settings: Vec<_> = config
            .problems()
            .into_iter()
            .map(|problem| match problem {
                LogRelayError::Config { setting, .. } => setting,
                other => panic!("not a setting: {other:?}"),
            })
            .collect();
        assert_eq!(settings, ["slot", "batch_size", "retention"]);
    }
}
