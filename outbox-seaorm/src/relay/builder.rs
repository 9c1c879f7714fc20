//! [`RelayBuilder`]: the settings of a relay, validated by [`build`](RelayBuilder::build).

use std::sync::Arc;
use std::time::Duration;

use outbox_core::policy::{Backoff, DeadLetterPolicy, Ordering};
use outbox_core::publish::Publisher;
use sea_orm::{DatabaseConnection, DbBackend};

#[cfg(doc)]
use super::FastPath;
use super::config::{RelayConfig, RelayConfigError};
use super::core::Core;
use super::{Relay, jobs, outage};
use crate::config::Outbox;
use crate::job::{AlertHook, SharedAlertHook};
use crate::lease::{RELAY_LEASE, partition_lease};
use crate::sql::Store;
use crate::transaction::Pool;

/// Builds a [`Relay`]; every setting has a documented default (see [`RelayConfig`]).
#[must_use]
pub struct RelayBuilder<P> {
    pub(super) db: DatabaseConnection,
    pub(super) outbox: Outbox,
    pub(super) publisher: P,
    pub(super) config: RelayConfig,
    pub(super) alert_hook: Option<SharedAlertHook>,
    pub(super) seat: Option<crate::budget::BudgetSeat>,
}

impl<P> std::fmt::Debug for RelayBuilder<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RelayBuilder")
            .field("outbox", &self.outbox.outbox_table().to_string())
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<P: Publisher + 'static> RelayBuilder<P> {
    /// Rows claimed per batch (default 100).
    pub fn batch_size(mut self, rows: usize) -> Self {
        self.config.batch_size = rows;
        self
    }

    /// Sleep between polls when there was nothing (or not a full batch) to publish
    /// (default 1 s).
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.config.poll_interval = interval;
        self
    }

    /// Failed attempts before a row is dead-lettered (default 10).
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.config.max_attempts = attempts;
        self
    }

    /// Delay before the next attempt of a failed row (default [`Backoff::default`]).
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.config.backoff = backoff;
        self
    }

    /// Publication order (default [`Ordering::PerAggregate`]).
    pub fn ordering(mut self, ordering: Ordering) -> Self {
        self.config.ordering = ordering;
        self
    }

    /// What a dead row does to its aggregate (default [`DeadLetterPolicy::Block`]).
    pub fn dead_letter_policy(mut self, policy: DeadLetterPolicy) -> Self {
        self.config.dead_letter_policy = policy;
        self
    }

    /// How long published rows are kept (see [`RelayConfig::retention`]): by default
    /// (`Some(Duration::ZERO)`) the mark deletes a row once it is published, the fastest
    /// layout; a longer retention keeps published rows for operators, deleted by the running
    /// relay's cleanup once older; `None` keeps them for good.
    pub fn retention(mut self, retention: Option<Duration>) -> Self {
        self.config.retention = retention;
        self
    }

    /// Time between two looks for scheduled rows that are due (default 1 s): a scheduled
    /// event goes out within this of its due time (see [`crate::schedule`]).
    pub fn schedule_interval(mut self, interval: Duration) -> Self {
        self.config.schedule_interval = interval;
        self
    }

    /// Time between two retention cleanups (default 10 minutes).
    pub fn purge_interval(mut self, interval: Duration) -> Self {
        self.config.purge_interval = interval;
        self
    }

    /// Rows deleted per cleanup statement (default 1 000).
    pub fn purge_batch(mut self, rows: usize) -> Self {
        self.config.purge_batch = rows;
        self
    }

    /// Lease time to live (default 30 s). The heartbeat interval and publish timeout must
    /// stay under half of it.
    pub fn lease_ttl(mut self, ttl: Duration) -> Self {
        self.config.lease_ttl = ttl;
        self
    }

    /// Time between heartbeats (default 10 s).
    pub fn heartbeat_interval(mut self, interval: Duration) -> Self {
        self.config.heartbeat_interval = interval;
        self
    }

    /// Limit of one publish call (default 10 s).
    pub fn publish_timeout(mut self, timeout: Duration) -> Self {
        self.config.publish_timeout = timeout;
        self
    }

    /// Whether to `LISTEN` for the outbox's PostgreSQL notifications (default `true`).
    pub fn listen(mut self, listen: bool) -> Self {
        self.config.listen = listen;
        self
    }

    /// This relay's id in the instance and lease tables (default `relay-<UUIDv7>`).
    pub fn instance_id(mut self, id: impl Into<String>) -> Self {
        self.config.instance_id = id.into();
        self
    }

    /// Checks that claimed rows are at the head of their aggregate before publishing them
    /// (default off): needed when a [`FastPath`] publishes concurrently.
    pub fn check_head(mut self, check: bool) -> Self {
        self.config.check_head = check;
        self
    }

    /// Whether batches are pipelined (default: on). On PostgreSQL and MariaDB a pipelined
    /// relay publishes batch *n* while, on other connections, it marks and commits batch
    /// *n − 1* and claims batch *n + 1*, so a batch costs about the longer of the database
    /// work and the publishing, not their sum. With a third connection the mark and the
    /// claim run side by side; with two, one after the other. Order per aggregate is
    /// kept: batch *n + 1* is published only after batches *n* and *n − 1*
    /// were acknowledged, and its rows whose aggregate did not get through in either wait.
    /// A crash can leave two batches published but unmarked (both are published again,
    /// with the same message ids), against one without pipelining. On PostgreSQL the claim
    /// ahead starts past the rows of the batches in flight instead of trying each locked
    /// row, as long as it counts no other claimable row below them (a row committed late,
    /// a row a batch left pending); otherwise it claims from the start.
    ///
    /// Claiming ahead pays only when publishing takes time: the relay measures each batch
    /// and claims ahead while a batch's publishing takes at least an eighth of the database
    /// work of a batch (its mark and the next claim); with a broker faster than that it runs
    /// its batches one after the other, which costs the database less (a second open
    /// transaction and a claim beside the batch in flight cost about 5–8 % of the drain
    /// throughput with a no-op publisher), and it goes back to claiming ahead as soon as
    /// the broker slows down.
    ///
    /// It is used only when the connection pool has room for it (`max_connections` at
    /// least 2, 3 for the mark beside the claim, plus 1 for the `LISTEN` connection), and
    /// never with
    /// [`check_head`](Self::check_head) or on SQLite.
    pub fn pipeline(mut self, pipeline: bool) -> Self {
        self.config.pipeline = pipeline;
        self
    }

    /// Job-queue mode: claim only rows whose worker key is one of `keys` (default: every
    /// row, keyed or not). Rows without a worker key are never claimed by such a relay.
    /// Each key is a lease held by one relay at a time (see [`crate::job`]). Validated by
    /// [`build`](Self::build).
    pub fn worker_keys<I, K>(mut self, keys: I) -> Self
    where
        I: IntoIterator<Item = K>,
        K: Into<String>,
    {
        self.config.worker_keys = Some(keys.into_iter().map(Into::into).collect());
        self
    }

    /// Called once per row marked `failed` (its `retryable` flag is off and an attempt
    /// failed), after the mark is committed (default: none; the failure is still logged and
    /// counted). See [`crate::job`].
    pub fn alert_hook(mut self, hook: impl AlertHook) -> Self {
        self.alert_hook = Some(SharedAlertHook(Arc::new(hook)));
        self
    }

    /// A seat in a server's [`ConnectionBudget`](crate::budget::ConnectionBudget): the
    /// relay holds connections only while it is open (each turn of its loop), and polls
    /// instead of `LISTEN` (default: none, the pool as it is).
    pub fn budget_seat(mut self, seat: crate::budget::BudgetSeat) -> Self {
        self.seat = Some(seat);
        self
    }

    /// Replaces every setting.
    pub fn config(mut self, config: RelayConfig) -> Self {
        self.config = config;
        self
    }

    /// Validates the settings and builds the relay.
    ///
    /// # Errors
    /// [`RelayConfigError`] naming the first rejected setting.
    pub fn build(self) -> Result<Relay<P>, RelayConfigError> {
        self.config.validate()?;
        if !self.outbox.write_mode().keeps_rows() {
            return Err(RelayConfigError::WriteMode {
                mode: self.outbox.write_mode().as_str(),
            });
        }
        let backend = self.db.get_database_backend();
        let store = Store::new(&self.outbox, backend);
        let leases = match (backend, self.config.ordering, &self.config.worker_keys) {
            (DbBackend::Sqlite, _, Some(keys)) | (_, Ordering::PerAggregate, Some(keys)) => {
                jobs::worker_leases(keys)
            }
            (DbBackend::Sqlite, _, None) => vec![RELAY_LEASE.to_owned()],
            (_, Ordering::PerAggregate, None) => {
                (0..self.outbox.partitions()).map(partition_lease).collect()
            }
            _ => Vec::new(),
        };
        let labels = self.outbox.metric_labels().to_vec();
        let db = Pool::new(self.db, self.outbox.transaction_pooling()).with_seat(self.seat);
        Ok(Relay::new(Core {
            db,
            outbox: self.outbox,
            publisher: Arc::new(self.publisher),
            config: self.config,
            alert_hook: self.alert_hook,
            store,
            lease_keys: leases,
            labels,
            health: Arc::new(outage::PublishHealth::of::<P>()),
            worker_slots: tokio::sync::OnceCell::new(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::relay::RelayConfigError;
    use outbox_core::in_process::InProcessBroker;

    #[test]
    fn rejects_bad_settings() {
        let config = RelayConfig {
            heartbeat_interval: Duration::from_secs(20),
            ..RelayConfig::default()
        };
        assert!(matches!(
            config.validate(),
            Err(RelayConfigError::Heartbeat { .. })
        ));
        let config = RelayConfig {
            batch_size: 0,
            ..RelayConfig::default()
        };
        assert!(matches!(
            config.validate(),
            Err(RelayConfigError::Zero {
                setting: "batch_size"
            })
        ));
        let config = RelayConfig {
            publish_timeout: Duration::from_secs(20),
            ..RelayConfig::default()
        };
        assert!(matches!(
            config.validate(),
            Err(RelayConfigError::PublishTimeout { .. })
        ));
        assert!(RelayConfig::default().validate().is_ok());
        let _ = InProcessBroker::new();
    }
}
