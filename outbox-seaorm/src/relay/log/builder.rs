//! [`LogRelayBuilder`]: the only way to a [`LogRelay`]; every setting is validated by
//! [`build`](LogRelayBuilder::build).

use std::time::Duration;

use outbox_core::policy::{Backoff, DeadLetterPolicy};
use outbox_core::publish::Publisher;
use sea_orm::{DatabaseConnection, DbBackend};

use super::LogRelay;
use super::config::LogRelayConfig;
use super::error::LogRelayError;
use crate::config::Outbox;
use crate::table::MAX_IDENTIFIER_LEN;

/// Builds a [`LogRelay`]; see [`LogRelay::builder`].
#[must_use = "a builder does nothing until `build` is called"]
pub struct LogRelayBuilder<P> {
    pub(super) db: DatabaseConnection,
    pub(super) outbox: Outbox,
    pub(super) publisher: P,
    pub(super) slot: Option<String>,
    pub(super) publication: Option<String>,
    pub(super) batch_size: Option<usize>,
    pub(super) max_attempts: Option<u32>,
    pub(super) backoff: Option<Backoff>,
    pub(super) dead_letter_policy: Option<DeadLetterPolicy>,
    pub(super) heartbeat_interval: Option<Duration>,
    pub(super) feedback_interval: Option<Duration>,
    pub(super) publish_timeout: Option<Duration>,
    pub(super) connect_timeout: Option<Duration>,
    pub(super) connection_url: Option<String>,
    pub(super) lease_ttl: Option<Duration>,
    pub(super) instance_id: Option<String>,
    pub(super) retention: Option<Option<Duration>>,
    pub(super) purge_interval: Option<Duration>,
}

impl<P> std::fmt::Debug for LogRelayBuilder<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogRelayBuilder")
            .field("slot", &self.slot)
            .field("publication", &self.publication)
            .finish_non_exhaustive()
    }
}

/// Checks a replication slot name as [`LogRelayBuilder::slot`] needs it: lower-case
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

/// Checks a publication name as [`LogRelayBuilder::publication`] needs it: an identifier
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
fn slot_name_problem(name: &str) -> Option<String> {
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
fn identifier_problem(name: &str) -> Option<String> {
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

fn positive(setting: &'static str, value: Duration) -> Result<Duration, LogRelayError> {
    if value.is_zero() {
        return Err(LogRelayError::Config {
            setting,
            reason: "must be longer than zero".into(),
        });
    }
    Ok(value)
}

impl<P: Publisher + 'static> LogRelayBuilder<P> {
    pub(super) fn new(db: DatabaseConnection, outbox: Outbox, publisher: P) -> Self {
        Self {
            db,
            outbox,
            publisher,
            slot: None,
            publication: None,
            batch_size: None,
            max_attempts: None,
            backoff: None,
            dead_letter_policy: None,
            heartbeat_interval: None,
            feedback_interval: None,
            publish_timeout: None,
            connect_timeout: None,
            connection_url: None,
            lease_ttl: None,
            instance_id: None,
            retention: None,
            purge_interval: None,
        }
    }

    /// How long the slot's lease lasts without renewal (at least 1 s): after the active
    /// relay dies, a standby takes over within it.
    pub fn lease_ttl(mut self, ttl: Duration) -> Self {
        self.lease_ttl = Some(ttl);
        self
    }

    /// How long streamed rows stay in the table (table mode), counted back from the last
    /// acknowledged commit (default 24 h; at least 1 minute); `None` keeps them for good.
    /// Keep it longer than the longest outage you want to recover from the table after a
    /// lost slot.
    pub fn retention(mut self, retention: Option<Duration>) -> Self {
        self.retention = Some(retention);
        self
    }

    /// Time between two retention cleanups (default 60 s).
    pub fn purge_interval(mut self, interval: Duration) -> Self {
        self.purge_interval = Some(interval);
        self
    }

    /// This relay's name in the slot's lease (1 to 255 characters; default
    /// `log-relay-<UUIDv7>`). Give each process its own: a relay takes a lease its own name
    /// holds back at once (a restart as itself needs no TTL to pass), so two live relays
    /// of one name would both believe they hold it (the slot's one-consumer rule still keeps
    /// them from streaming together).
    pub fn instance_id(mut self, id: impl Into<String>) -> Self {
        self.instance_id = Some(id.into());
        self
    }
    /// The replication slot to stream from, created on first start (required).
    pub fn slot(mut self, name: impl Into<String>) -> Self {
        self.slot = Some(name.into());
        self
    }

    /// The publication the slot streams, created on first start (default: the slot's
    /// name).
    pub fn publication(mut self, name: impl Into<String>) -> Self {
        self.publication = Some(name.into());
        self
    }

    /// Events per published batch (at least 1).
    pub fn batch_size(mut self, events: usize) -> Self {
        self.batch_size = Some(events);
        self
    }

    /// Failed attempts before an event is dead-lettered (at least 1).
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = Some(attempts);
        self
    }

    /// Delay before the next attempt of a failed event, and between reconnections.
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = Some(backoff);
        self
    }

    /// What a dead event does to its aggregate's later events (default
    /// [`DeadLetterPolicy::Block`]: parked in order until an operator requeues or skips it).
    pub fn dead_letter_policy(mut self, policy: DeadLetterPolicy) -> Self {
        self.dead_letter_policy = Some(policy);
        self
    }

    /// Time between idle-database heartbeats.
    pub fn heartbeat_interval(mut self, interval: Duration) -> Self {
        self.heartbeat_interval = Some(interval);
        self
    }

    /// Shortest time between two status updates to the server while changes arrive.
    pub fn feedback_interval(mut self, interval: Duration) -> Self {
        self.feedback_interval = Some(interval);
        self
    }

    /// Limit of one `publish` call.
    pub fn publish_timeout(mut self, timeout: Duration) -> Self {
        self.publish_timeout = Some(timeout);
        self
    }

    /// Limit of connecting the replication connection.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = Some(timeout);
        self
    }

    /// The replication connection's URL (`postgres://user:password@host:port/database`),
    /// when the pool's settings are not enough (a password, TLS settings). It must name the
    /// pool's database.
    pub fn connection_url(mut self, url: impl Into<String>) -> Self {
        self.connection_url = Some(url.into());
        self
    }

    /// Validates the settings.
    ///
    /// # Errors
    /// [`LogRelayError::NotPostgres`] on another backend; [`LogRelayError::Config`] for a
    /// missing or invalid slot name, an invalid publication name, a zero batch size, zero
    /// attempts or a zero interval.
    pub fn build(self) -> Result<LogRelay<P>, LogRelayError> {
        let backend = self.db.get_database_backend();
        if backend != DbBackend::Postgres {
            let backend = match backend {
                DbBackend::MySql => "MySQL / MariaDB",
                DbBackend::Sqlite => "SQLite",
                _ => "another database",
            };
            return Err(LogRelayError::NotPostgres {
                backend: backend.to_owned(),
            });
        }
        let slot = self.slot.ok_or_else(|| LogRelayError::Config {
            setting: "slot",
            reason: "required: the replication slot to stream from".into(),
        })?;
        if let Some(reason) = slot_name_problem(&slot) {
            return Err(LogRelayError::Config {
                setting: "slot",
                reason,
            });
        }
        let mut config = LogRelayConfig::new(slot);
        if let Some(publication) = self.publication {
            if let Some(reason) = identifier_problem(&publication) {
                return Err(LogRelayError::Config {
                    setting: "publication",
                    reason,
                });
            }
            config.publication = publication;
        }
        if let Some(batch_size) = self.batch_size {
            if batch_size == 0 {
                return Err(LogRelayError::Config {
                    setting: "batch_size",
                    reason: "must be at least 1".into(),
                });
            }
            config.batch_size = batch_size;
        }
        if let Some(attempts) = self.max_attempts {
            if attempts == 0 {
                return Err(LogRelayError::Config {
                    setting: "max_attempts",
                    reason: "must be at least 1".into(),
                });
            }
            config.max_attempts = attempts;
        }
        if let Some(backoff) = self.backoff {
            config.backoff = backoff;
        }
        if let Some(policy) = self.dead_letter_policy {
            config.dead_letter_policy = policy;
        }
        if let Some(interval) = self.heartbeat_interval {
            config.heartbeat_interval = positive("heartbeat_interval", interval)?;
        }
        if let Some(interval) = self.feedback_interval {
            config.feedback_interval = positive("feedback_interval", interval)?;
        }
        if let Some(timeout) = self.publish_timeout {
            config.publish_timeout = positive("publish_timeout", timeout)?;
        }
        if let Some(timeout) = self.connect_timeout {
            config.connect_timeout = positive("connect_timeout", timeout)?;
        }
        config.connection_url = self.connection_url;
        if let Some(ttl) = self.lease_ttl {
            if ttl < Duration::from_secs(1) {
                return Err(LogRelayError::Config {
                    setting: "lease_ttl",
                    reason: format!("{ttl:?} is shorter than 1 s"),
                });
            }
            config.lease_ttl = ttl;
        }
        if let Some(retention) = self.retention {
            if retention.is_some_and(|r| r < Duration::from_secs(60)) {
                return Err(LogRelayError::Config {
                    setting: "retention",
                    reason: format!("{retention:?} is shorter than a minute"),
                });
            }
            config.retention = retention;
        }
        if let Some(interval) = self.purge_interval {
            config.purge_interval = positive("purge_interval", interval)?;
        }
        if let Some(id) = self.instance_id {
            if id.is_empty() || id.chars().count() > 255 {
                return Err(LogRelayError::Config {
                    setting: "instance_id",
                    reason: "must have 1 to 255 characters".into(),
                });
            }
            config.instance_id = id;
        }
        Ok(LogRelay::new(self.db, self.outbox, self.publisher, config))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_names_follow_postgres_rules() {
        assert_eq!(slot_name_problem("orders_outbox"), None);
        assert!(slot_name_problem("Orders").is_some());
        assert!(slot_name_problem("a-b").is_some());
        assert!(slot_name_problem("").is_some());
        assert!(slot_name_problem(&"a".repeat(64)).is_some());
        assert_eq!(identifier_problem("Orders_pub"), None);
        assert!(identifier_problem("1pub").is_some());
        assert!(identifier_problem("pub; DROP").is_some());
    }
}
