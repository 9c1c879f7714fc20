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

/// Builds a [`LogRelay`]; see [`LogRelay::builder`].
#[must_use = "a builder does nothing until `build` is called"]
pub struct LogRelayBuilder<P> {
    pub(super) db: DatabaseConnection,
    pub(super) outbox: Outbox,
    pub(super) publisher: P,
    /// The settings given whole ([`config`](LogRelayBuilder::config)); the setters below
    /// override them.
    pub(super) config: Option<LogRelayConfig>,
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
    pub(super) schedule_interval: Option<Duration>,
    pub(super) replica_server_id: Option<u32>,
}

impl<P> std::fmt::Debug for LogRelayBuilder<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogRelayBuilder")
            .field("slot", &self.slot)
            .field("publication", &self.publication)
            .finish_non_exhaustive()
    }
}

impl<P: Publisher + 'static> LogRelayBuilder<P> {
    pub(super) fn new(db: DatabaseConnection, outbox: Outbox, publisher: P) -> Self {
        Self {
            db,
            outbox,
            publisher,
            config: None,
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
            schedule_interval: None,
            replica_server_id: None,
        }
    }

    /// MariaDB: the server id the binlog dump registers with (not 0, unique among the
    /// server's replicas and not the server's own; default derived from the slot name, see
    /// [`LogRelayConfig::replica_server_id`]).
    pub fn replica_server_id(mut self, id: u32) -> Self {
        self.replica_server_id = Some(id);
        self
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

    /// Time between two looks for scheduled rows that are due (default 1 s): a scheduled
    /// event goes out within this of its due time (see [`crate::schedule`]).
    pub fn schedule_interval(mut self, interval: Duration) -> Self {
        self.schedule_interval = Some(interval);
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

    /// Replaces every setting, as [`RelayBuilder::config`](crate::relay::RelayBuilder::config)
    /// does for the polling relay; the setters of this builder still override single
    /// settings. Validated by [`build`](Self::build).
    pub fn config(mut self, config: LogRelayConfig) -> Self {
        self.config = Some(config);
        self
    }

    /// Validates the settings ([`LogRelayConfig::validate`]) and builds the relay.
    ///
    /// # Errors
    /// [`LogRelayError::NotPostgres`] on another backend (PostgreSQL needs the feature
    /// `log-relay`, MariaDB `log-relay-mariadb`; message mode needs PostgreSQL); [`LogRelayError::Config`] for a
    /// missing or invalid slot name, an invalid publication name, a zero batch size, zero
    /// attempts or a zero interval.
    pub fn build(self) -> Result<LogRelay<P>, LogRelayError> {
        let backend = self.db.get_database_backend();
        let supported = (cfg!(feature = "log-relay") && backend == DbBackend::Postgres)
            || (cfg!(feature = "log-relay-mariadb") && backend == DbBackend::MySql);
        if !supported {
            return Err(LogRelayError::NotPostgres {
                backend: crate::sql::dialect::name(backend).to_owned(),
            });
        }
        if backend == DbBackend::MySql && self.outbox.write_mode().message_prefix().is_some() {
            // Logical messages are PostgreSQL's; MariaDB's binlog carries table rows.
            return Err(LogRelayError::NotPostgres {
                backend: "MariaDB with a message-mode outbox (use table mode)".to_owned(),
            });
        }
        let mut config = match (self.config, self.slot) {
            (Some(mut config), slot) => {
                if let Some(slot) = slot {
                    config.slot = slot;
                }
                config
            }
            (None, Some(slot)) => LogRelayConfig::for_slot(slot),
            (None, None) => {
                return Err(LogRelayError::Config {
                    setting: "slot",
                    reason: "required: the replication slot to stream from".into(),
                });
            }
        };
        if let Some(publication) = self.publication {
            config.publication = publication;
        }
        if let Some(batch_size) = self.batch_size {
            config.batch_size = batch_size;
        }
        if let Some(attempts) = self.max_attempts {
            config.max_attempts = attempts;
        }
        if let Some(backoff) = self.backoff {
            config.backoff = backoff;
        }
        if let Some(policy) = self.dead_letter_policy {
            config.dead_letter_policy = policy;
        }
        if let Some(interval) = self.heartbeat_interval {
            config.heartbeat_interval = interval;
        }
        if let Some(interval) = self.feedback_interval {
            config.feedback_interval = interval;
        }
        if let Some(timeout) = self.publish_timeout {
            config.publish_timeout = timeout;
        }
        if let Some(timeout) = self.connect_timeout {
            config.connect_timeout = timeout;
        }
        if self.connection_url.is_some() {
            config.connection_url = self.connection_url;
        }
        if let Some(ttl) = self.lease_ttl {
            config.lease_ttl = ttl;
        }
        if let Some(retention) = self.retention {
            config.retention = retention;
        }
        if let Some(interval) = self.purge_interval {
            config.purge_interval = interval;
        }
        if let Some(interval) = self.schedule_interval {
            config.schedule_interval = interval;
        }
        if let Some(id) = self.instance_id {
            config.instance_id = id;
        }
        if self.replica_server_id.is_some() {
            config.replica_server_id = self.replica_server_id;
        }
        config.validate()?;
        Ok(LogRelay::new(self.db, self.outbox, self.publisher, config))
    }
}

#[cfg(test)]
mod tests {
    use super::super::config::{identifier_problem, slot_name_problem};

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
