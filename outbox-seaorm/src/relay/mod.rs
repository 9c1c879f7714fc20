//! The relay: publishes every committed outbox row at least once, in `seq` order per
//! aggregate, from any number of processes, and never gets stuck on one bad row.
//!
//! ```
//! use std::time::Duration;
//!
//! use outbox_core::in_process::InProcessBroker;
//! use outbox_seaorm::relay::Relay;
//! use outbox_seaorm::{Outbox, schema};
//! use sea_orm::{ConnectOptions, Database};
//! use tokio_util::sync::CancellationToken;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let mut options = ConnectOptions::new("sqlite::memory:");
//! # options.max_connections(1).min_connections(1).idle_timeout(None::<Duration>).max_lifetime(None::<Duration>);
//! let db = Database::connect(options).await?;
//! let outbox = Outbox::default();
//! schema::install(&db, &outbox).await?; // outbox, inbox and relay tables
//!
//! let broker = InProcessBroker::new();
//! let mut relay = Relay::builder(db.clone(), outbox.clone(), broker.clone())
//!     .batch_size(500)
//!     .poll_interval(Duration::from_millis(200))
//!     .max_attempts(5)
//!     .build()?;
//!
//! // Tests and demos: publish whatever is claimable now.
//! let report = relay.drain().await?;
//! assert_eq!(report.published, 0);
//!
//! // Services: run until shut down; the batch in flight finishes and is marked.
//! let shutdown = CancellationToken::new();
//! let running = tokio::spawn(relay.run(shutdown.clone()));
//! shutdown.cancel();
//! running.await??;
//! # Ok(())
//! # }
//! ```
//!
//! # Progress lives on the row
//!
//! A row is `pending` until the broker acknowledged it, then `published`; a row that failed
//! too often (or was refused for good) is `dead`, and an operator may `skip` it. Nothing
//! else remembers "where the relay stopped": no counter, no timestamp watermark — those
//! lose rows whose transaction commits after a later `seq` was published (seeds/000,
//! scenario 5).
//!
//! # One batch
//!
//! On PostgreSQL and MariaDB a batch is one `READ COMMITTED` transaction:
//!
//! 1. (leased modes) `SELECT name FROM <leases> WHERE owner = :me AND expires_at > :now
//!    FOR SHARE` (MariaDB `LOCK IN SHARE MODE`): the partitions this relay owns, share-locked
//!    so that no other relay can take them over while the batch is in flight (a takeover is
//!    an `UPDATE` of the lease row, which waits for this transaction). A pipelined relay's
//!    claim ahead adds `NOWAIT` and, when a takeover is waiting, claims nothing this time:
//!    InnoDB would queue its share lock behind the takeover, which waits for the batch in
//!    flight, which the relay marks only once the claim ahead returns;
//! 2. the claim: due pending rows in `seq` order, `FOR UPDATE SKIP LOCKED`. In
//!    [`Ordering::PerAggregate`] mode it skips every row that has an earlier row of its
//!    aggregate in backoff, or dead under [`DeadLetterPolicy::Block`]: a poisoned aggregate
//!    holds back only itself, and never fills a batch with rows that cannot go;
//!
//!    ```sql
//!    SELECT <every column> FROM outbox o
//!    WHERE o.status = 'pending' AND (o.attempts = 0 OR o.next_attempt_at <= :now)
//!      AND o.partition IN (<owned partitions>)                       -- leased modes
//!      AND NOT EXISTS (SELECT 1 FROM outbox b WHERE b.status = 'pending'
//!            AND b.aggregate_type = o.aggregate_type AND b.aggregate_id = o.aggregate_id
//!            AND b.seq < o.seq AND b.attempts > 0
//!            AND b.next_attempt_at > :now)                          -- PerAggregate
//!      AND NOT EXISTS (SELECT 1 FROM outbox d WHERE d.status IN ('dead', 'failed')
//!            AND <same aggregate> AND d.seq < o.seq)                 -- PerAggregate + Block
//!      AND o.worker_key IN (<keys>)                                  -- keyed relays
//!    ORDER BY o.seq LIMIT :batch_size
//!    FOR UPDATE SKIP LOCKED                                          -- PostgreSQL, MariaDB
//!    ```
//!
//!    A row that never failed (`attempts = 0`) is due at once, whatever the producer's
//!    clock said; a row in backoff is one that failed (`attempts > 0`) and whose
//!    `next_attempt_at` is ahead. Every condition is served by a partial index — pending
//!    rows by `seq` / partition, pending rows that failed and dead rows by aggregate — so
//!    the cost follows the number of pending rows, not the number of published rows kept;
//! 3. one [`Publisher::publish`] call with the batch (bounded by the publish timeout);
//! 4. marks: `published` in one `UPDATE … WHERE seq IN (…)`; each failure with its own
//!    `attempts`, `next_attempt_at` (backoff with jitter) and `last_error`, or `dead`;
//! 5. `COMMIT`. A crash anywhere before it rolls the marks back: the rows are published
//!    again later with the **same** message ids (at least once).
//!
//! On SQLite (which ignores `SKIP LOCKED` and has one writer) a single relay runs at a
//! time, through the `relay` lease; it claims with a plain read, publishes outside any
//! transaction (so producers are not blocked by the broker) and marks in a short write
//! transaction. It starts a batch only while its lease has more than the publish timeout
//! left.
//!
//! Within a batch, per aggregate: once a message of an aggregate failed, the aggregate's
//! later messages are left untouched (no attempt counted) and wait for the next batch,
//! after the failed one; a publisher that reports them published anyway is believed (they
//! are at the broker) and a warning is logged.
//!
//! # Leases (`PerAggregate` on PostgreSQL / MariaDB, every mode on SQLite)
//!
//! Every relay instance heartbeats a row in `<outbox>_relay_instances` (`expires_at =
//! now + lease TTL`) every heartbeat interval. On each heartbeat it:
//!
//! 1. reads the live instances (`expires_at > now`);
//! 2. computes the partitions it should own: those whose rendezvous hash (FNV-1a +
//!    SplitMix64 of partition and instance id) is highest for it among the live instances
//!    — every instance computes the same assignment, and an instance joining or leaving
//!    moves only the partitions it wins or held;
//! 3. releases the partition leases it holds but should not (`owner = NULL`) — between
//!    batches, so nothing of them is in flight;
//! 4. takes or renews the ones it should hold: `UPDATE … SET owner = :me, expires_at =
//!    :now + ttl, token = token + 1 (on a change of owner) WHERE name IN (…) AND (owner =
//!    :me OR owner IS NULL OR expires_at <= :now)`.
//!
//! A newcomer therefore gets its share within two heartbeats (the current owner releases,
//! the newcomer takes); a dead instance's partitions are taken over once its leases expire
//! (one lease TTL). Times come from the outbox's clock: relays' clocks must agree within a
//! small fraction of the lease TTL (NTP). A graceful shutdown releases the leases and
//! removes the instance at once.
//!
//! [`Ordering::Unordered`] on PostgreSQL / MariaDB uses no leases: any number of relays
//! claim disjoint batches with `SKIP LOCKED`.
//!
//! # Wake-up
//!
//! The relay polls every poll interval when the last batch was not full (at once when it
//! was). On PostgreSQL it also `LISTEN`s on the outbox's `NOTIFY` channel and polls as soon
//! as a commit notifies; the listener reconnects with backoff when its connection drops and
//! polls right after reconnecting (notifications sent meanwhile are lost: polling stays the
//! authority). [`Relay::waker`] wakes it from the same process on any backend.
//!
//! # Job-queue mode
//!
//! With a [`JobDispatcher`](crate::job::JobDispatcher) as its publisher the relay runs
//! each row as a local job. [`RelayBuilder::worker_keys`] restricts a relay to the rows of
//! some worker keys (each key a lease held by one relay at a time); a row whose `retryable`
//! flag is off goes `failed` on its first failed attempt and raises the
//! [`RelayBuilder::alert_hook`] once. See [`crate::job`].
//!
//! [`Publisher::publish`]: outbox_core::Publisher::publish

pub mod config;
pub mod fast_path;
mod jobs;
mod listener;
mod outage;
mod pipeline;
pub mod tables;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeDelta, Utc};
use outbox_core::Envelope;
use outbox_core::metric;
use outbox_core::policy::{Backoff, DeadLetterPolicy, Ordering};
use outbox_core::publish::{MessageOutcome, PublishError, PublishErrorKind, Publisher};
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, DbErr, IsolationLevel};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

pub use config::{RelayConfig, RelayConfigError};
pub use fast_path::{FastPath, FastPathReport};
pub use tables::RelayTables;

use crate::config::Outbox;
use crate::job::{AlertHook, SharedAlertHook};
use crate::lease::{RELAY_LEASE, lease_partition, owner_of, partition_lease};
use crate::ops::Operations;
use crate::retention::{self, Purge};
use crate::sql::{AfterFailure, Claim, ClaimedRow, LeaseLock, PastInFlight, Store};

/// Why a relay operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RelayError {
    /// The database failed; nothing of the batch was marked (it is retried later).
    #[error("relay database error: {0}")]
    Database(#[from] DbErr),
}

/// What one batch did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BatchReport {
    /// Rows claimed.
    pub claimed: usize,
    /// Rows marked published.
    pub published: usize,
    /// Rows that failed transiently and wait for their next attempt.
    pub retried: usize,
    /// Rows moved to `dead`.
    pub dead_lettered: usize,
    /// Rows moved to `failed` (not retryable, see [`crate::job`]).
    pub failed: usize,
    /// Claimed rows left untouched (behind a failed row of their aggregate, or not at the
    /// head of their aggregate).
    pub deferred: usize,
}

impl BatchReport {
    /// Whether the batch changed any row.
    pub fn made_progress(&self) -> bool {
        self.published + self.retried + self.dead_lettered + self.failed > 0
    }
}

/// What a relay did over several batches ([`Relay::drain`], [`Relay::run`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RelayReport {
    /// Batches run (including empty ones).
    pub batches: usize,
    /// Rows published.
    pub published: usize,
    /// Transient failures (each followed by a retry later).
    pub retried: usize,
    /// Rows dead-lettered.
    pub dead_lettered: usize,
    /// Rows marked `failed` (not retryable, see [`crate::job`]).
    pub failed: usize,
    /// Batches that failed on a database error (run only; they are retried).
    pub errors: usize,
}

impl RelayReport {
    fn add(&mut self, batch: &BatchReport) {
        self.batches += 1;
        self.published += batch.published;
        self.retried += batch.retried;
        self.dead_lettered += batch.dead_lettered;
        self.failed += batch.failed;
    }

    fn merge(&mut self, other: &RelayReport) {
        self.batches += other.batches;
        self.published += other.published;
        self.retried += other.retried;
        self.dead_lettered += other.dead_lettered;
        self.failed += other.failed;
        self.errors += other.errors;
    }
}

/// Wakes a relay of the same process before its next poll (e.g. right after a commit on
/// backends without `NOTIFY`). Cheap to clone.
#[derive(Debug, Clone)]
pub struct RelayWaker(Arc<Notify>);

impl RelayWaker {
    /// Makes the relay poll now (or right after its current batch).
    pub fn wake(&self) {
        self.0.notify_one();
    }
}

/// Builds a [`Relay`]; every setting has a documented default (see [`RelayConfig`]).
#[must_use]
pub struct RelayBuilder<P> {
    db: DatabaseConnection,
    outbox: Outbox,
    publisher: P,
    config: RelayConfig,
    alert_hook: Option<SharedAlertHook>,
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

    /// Retention of published rows, deleted by the running relay (default 7 days; `None`
    /// keeps them).
    pub fn retention(mut self, retention: Option<Duration>) -> Self {
        self.config.retention = retention;
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
        let labels = vec![metrics::Label::new(
            "outbox",
            self.outbox.outbox_table().to_string(),
        )];
        Ok(Relay {
            db: self.db,
            outbox: self.outbox,
            publisher: Arc::new(self.publisher),
            config: self.config,
            alert_hook: self.alert_hook,
            store,
            leases: LeaseState {
                keys: leases,
                owned: Vec::new(),
                last_refresh: None,
                ensured: false,
            },
            wake: Arc::new(Notify::new()),
            last_purge: None,
            last_gauges: None,
            labels,
            health: Arc::new(outage::PublishHealth::of::<P>()),
        })
    }
}

#[derive(Debug)]
struct LeaseState {
    /// Every lease this relay competes for (empty: no leases).
    keys: Vec<String>,
    /// The leases held after the last refresh.
    owned: Vec<String>,
    last_refresh: Option<Instant>,
    ensured: bool,
}

/// What a lease refresh found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaseReport {
    /// Live relay instances, this one included: those without worker keys for a relay
    /// without worker keys (they share partitions), every live instance for a keyed relay.
    pub live_instances: Vec<String>,
    /// The leases this relay holds now (`partition/N`, `relay` on SQLite, `worker/<key>`
    /// for a relay with worker keys).
    pub owned: Vec<String>,
}

/// A relay for one outbox; see the [module documentation](self).
pub struct Relay<P> {
    db: DatabaseConnection,
    outbox: Outbox,
    publisher: Arc<P>,
    config: RelayConfig,
    alert_hook: Option<SharedAlertHook>,
    store: Store,
    leases: LeaseState,
    wake: Arc<Notify>,
    last_purge: Option<Instant>,
    last_gauges: Option<Instant>,
    labels: Vec<metrics::Label>,
    /// What the relay logs while its broker fails ([`outage`]).
    health: Arc<outage::PublishHealth>,
}

impl<P> std::fmt::Debug for Relay<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relay")
            .field("outbox", &self.outbox.outbox_table().to_string())
            .field("instance_id", &self.config.instance_id)
            .field("owned", &self.leases.owned)
            .finish_non_exhaustive()
    }
}

/// A claimed batch on PostgreSQL / MariaDB: the transaction that holds its row locks.
pub(crate) struct LockedBatch {
    txn: sea_orm::DatabaseTransaction,
    rows: Vec<ClaimedRow>,
}

/// A decision about one claimed row.
#[derive(Debug)]
pub(crate) enum Mark {
    Published,
    Retry {
        attempts: i32,
        at: DateTime<Utc>,
        error: String,
    },
    Dead {
        attempts: i32,
        error: String,
    },
    /// Not retryable and failed: `failed`, alert raised after the commit.
    Failed {
        attempts: i32,
        error: PublishError,
    },
    Untouched,
}

fn to_delta(duration: Duration) -> TimeDelta {
    TimeDelta::from_std(duration).unwrap_or(TimeDelta::MAX)
}

impl<P: Publisher + 'static> Relay<P> {
    /// A builder for a relay publishing `outbox`'s rows from `db` to `publisher`.
    pub fn builder(db: DatabaseConnection, outbox: Outbox, publisher: P) -> RelayBuilder<P> {
        RelayBuilder {
            db,
            outbox,
            publisher,
            config: RelayConfig::default(),
            alert_hook: None,
        }
    }

    /// The settings.
    pub fn config(&self) -> &RelayConfig {
        &self.config
    }

    /// This relay's instance id.
    pub fn instance_id(&self) -> &str {
        &self.config.instance_id
    }

    /// The publisher.
    pub fn publisher(&self) -> &P {
        &self.publisher
    }

    /// A handle that wakes this relay's [`run`](Self::run) loop.
    pub fn waker(&self) -> RelayWaker {
        RelayWaker(Arc::clone(&self.wake))
    }

    /// The operations API on the same database and outbox.
    pub fn operations(&self) -> Operations {
        Operations::new(self.db.clone(), self.outbox.clone())
            .with_relay_policy(self.config.ordering, self.config.dead_letter_policy)
    }

    /// A fast path that publishes right after commit, sharing this relay's publisher and
    /// settings. Turn on [`RelayBuilder::check_head`] on the relays when using it.
    pub fn fast_path(&self) -> FastPath<P> {
        FastPath::new(
            self.db.clone(),
            self.outbox.clone(),
            Arc::clone(&self.publisher),
            self.config.clone(),
        )
    }

    /// The leases held after the last refresh.
    pub fn owned_leases(&self) -> &[String] {
        &self.leases.owned
    }

    fn leased(&self) -> bool {
        !self.leases.keys.is_empty()
    }

    fn now(&self) -> DateTime<Utc> {
        self.outbox.clock().now()
    }

    fn description(&self) -> String {
        format!(
            "pid {} ordering {} outbox {}",
            std::process::id(),
            self.config.ordering.as_str(),
            self.outbox.outbox_table()
        )
    }

    /// Heartbeats, then releases and takes leases as described in the
    /// [module documentation](self). [`run`](Self::run) and [`drain`](Self::drain) do it
    /// every heartbeat interval; tests call it to rebalance at once.
    ///
    /// # Errors
    /// [`RelayError::Database`].
    pub async fn refresh_leases(&mut self) -> Result<LeaseReport, RelayError> {
        let now = self.now();
        let ttl = to_delta(self.config.lease_ttl);
        let me = self.config.instance_id.clone();
        let worker_keys = self.worker_keys_label();
        self.store
            .heartbeat(
                &self.db,
                &me,
                &self.description(),
                worker_keys.as_deref(),
                now,
                now + ttl,
            )
            .await?;
        metrics::gauge!(metric::RELAY_HEARTBEAT, self.labels.clone())
            .set(now.timestamp_millis() as f64 / 1000.0);
        let mut live = self
            .store
            .live_instances(&self.db, now, !self.keyed())
            .await?;
        if !live.contains(&me) {
            live.push(me.clone());
            live.sort();
        }
        if self.leased() {
            if !self.leases.ensured {
                self.store
                    .ensure_leases(&self.db, &self.leases.keys)
                    .await?;
                self.leases.ensured = true;
            }
            let (desired, undesired): (Vec<String>, Vec<String>) = self
                .leases
                .keys
                .iter()
                .cloned()
                // Worker-key leases are taken by whoever is first (a standby waits);
                // partitions are spread by rendezvous hashing.
                .partition(|key| self.keyed() || owner_of(key, &live) == Some(me.as_str()));
            self.store
                .release(&self.db, &me, Some(&undesired), now)
                .await?;
            self.store
                .acquire(&self.db, &me, &desired, now, now + ttl)
                .await?;
            self.leases.owned = self
                .store
                .owned(&self.db, &me, now, LeaseLock::None)
                .await?;
            self.leases.owned.sort();
            metrics::gauge!(metric::LEASES_OWNED, self.labels.clone())
                .set(self.leases.owned.len() as f64);
        }
        // Forget instances dead for ten lease lifetimes.
        self.store
            .remove_instances(&self.db, None, now - ttl * 10)
            .await?;
        self.leases.last_refresh = Some(Instant::now());
        tracing::debug!(
            instance = %me,
            live = live.len(),
            owned = self.leases.owned.len(),
            "relay leases refreshed"
        );
        Ok(LeaseReport {
            live_instances: live,
            owned: self.leases.owned.clone(),
        })
    }

    fn refresh_due(&self) -> bool {
        self.leases
            .last_refresh
            .is_none_or(|at| at.elapsed() >= self.config.heartbeat_interval)
    }

    /// Runs one batch: refreshes the leases when a heartbeat is due, claims, publishes,
    /// marks. See the [module documentation](self).
    ///
    /// # Errors
    /// [`RelayError::Database`]: nothing of the batch was marked.
    pub async fn run_batch(&mut self) -> Result<BatchReport, RelayError> {
        if self.refresh_due() {
            self.refresh_leases().await?;
        }
        let span = self.batch_span();
        let started = Instant::now();
        let result = async {
            if self.store.backend() == DbBackend::Sqlite {
                self.batch_sqlite().await
            } else {
                self.batch_locked().await
            }
        }
        .instrument(span.clone())
        .await;
        let report = result?;
        self.record_batch(&span, &report, started);
        Ok(report)
    }

    /// The span of one batch; its counts are recorded by [`record_batch`](Self::record_batch).
    fn batch_span(&self) -> tracing::Span {
        tracing::info_span!(
            "outbox.relay.batch",
            outbox = %self.outbox.outbox_table(),
            relay = %self.config.instance_id,
            claimed = tracing::field::Empty,
            published = tracing::field::Empty,
            retried = tracing::field::Empty,
            dead_lettered = tracing::field::Empty,
        )
    }

    /// Records a finished batch in its span and in the batch metrics.
    fn record_batch(&self, span: &tracing::Span, report: &BatchReport, started: Instant) {
        span.record("claimed", report.claimed);
        span.record("published", report.published);
        span.record("retried", report.retried);
        span.record("dead_lettered", report.dead_lettered);
        if report.claimed > 0 {
            metrics::histogram!(metric::BATCH_DURATION, self.labels.clone())
                .record(started.elapsed().as_secs_f64());
            metrics::histogram!(metric::BATCH_SIZE, self.labels.clone())
                .record(report.claimed as f64);
        }
    }

    /// A batch on PostgreSQL / MariaDB: one transaction holding the row locks (and the
    /// lease share locks) while publishing.
    async fn batch_locked(&self) -> Result<BatchReport, RelayError> {
        let Some(mut batch) = self.claim_locked(false, None).await? else {
            return Ok(BatchReport::default());
        };
        let held = self.held_rows(&batch.txn, &batch.rows).await?;
        let marks = self.publish(&mut batch.rows, &held).await;
        self.finish_locked(batch, &marks).await
    }

    /// Opens a batch's transaction, share-locks the leases and claims; `None` (and the
    /// transaction committed) when there is nothing to claim.
    ///
    /// `ahead`: the claim of a pipelined relay while its previous batch is in flight. The
    /// lease share lock is then taken with `NOWAIT` (see [`LeaseLock::ShareNoWait`]), and
    /// when another relay is taking a lease over meanwhile the claim gives way: `None`,
    /// the transaction rolled back; the relay marks its batch in flight, which lets the
    /// takeover through, and claims again afterwards.
    ///
    /// `past`: on PostgreSQL, for a relay that holds leases (partitions or worker keys of
    /// its own), the claim starts past the batches in flight (see
    /// [`PastInFlight`]). When it finds less than a full batch (nothing left past them, or
    /// a row below them that it must not pass over), the same transaction claims again
    /// from the start: rows the first claim locked and the second does not return stay
    /// pending, and are released with the transaction.
    async fn claim_locked(
        &self,
        ahead: bool,
        past: Option<PastInFlight>,
    ) -> Result<Option<LockedBatch>, RelayError> {
        // Unordered relays hold no leases and share every row: the batches of the others
        // would count below `last`, and the claim would nearly always start over.
        let past = past.filter(|_| self.store.backend() == DbBackend::Postgres && self.leased());
        let isolation =
            (self.store.backend() == DbBackend::MySql).then_some(IsolationLevel::ReadCommitted);
        let txn = crate::transaction::begin_whole(&self.db, isolation).await?;
        if self.store.backend() == DbBackend::Postgres {
            // The claim and the mark bind the current time; with such parameters
            // PostgreSQL keeps planning them afresh at every execution (a custom plan: about
            // 0.3–0.7 ms per statement, measured in the server log, for a plan that never
            // changes). For this transaction only: plan once per connection.
            txn.execute_unprepared("SET LOCAL plan_cache_mode = force_generic_plan")
                .await?;
        }
        let now = self.now();
        let owned = if self.leased() {
            let lock = if ahead {
                LeaseLock::ShareNoWait
            } else {
                LeaseLock::Share
            };
            match self
                .store
                .owned(&txn, &self.config.instance_id, now, lock)
                .await
            {
                Ok(owned) => owned,
                Err(error) if ahead && crate::sql::is_lock_not_available(&error) => {
                    tracing::debug!(
                        relay = %self.config.instance_id,
                        "a lease is being taken over: no claim ahead of the batch in flight"
                    );
                    txn.rollback().await?;
                    return Ok(None);
                }
                Err(error) => return Err(error.into()),
            }
        } else {
            Vec::new()
        };
        let keys = self.claimable_keys(&owned);
        let partitions = if self.leased() && !self.keyed() {
            let partitions: Vec<i32> = owned.iter().filter_map(|n| lease_partition(n)).collect();
            Some(partitions)
        } else {
            None
        };
        if partitions.as_ref().is_some_and(Vec::is_empty)
            || keys.as_ref().is_some_and(Vec::is_empty)
        {
            txn.commit().await?;
            return Ok(None);
        }
        let claim = self.claim(now, partitions.as_deref(), keys.as_deref());
        let mut rows = self.store.claim(&txn, Claim { past, ..claim }).await?;
        if past.is_some() && rows.len() < claim.limit {
            rows = self.store.claim(&txn, claim).await?;
        }
        if rows.is_empty() {
            txn.commit().await?;
            return Ok(None);
        }
        Ok(Some(LockedBatch { txn, rows }))
    }

    /// Marks a published batch and commits its transaction.
    async fn finish_locked(
        &self,
        batch: LockedBatch,
        marks: &[Mark],
    ) -> Result<BatchReport, RelayError> {
        let report = self.apply(&batch.txn, &batch.rows, marks).await?;
        batch.txn.commit().await?;
        self.count(&batch.rows, marks);
        if report.failed > 0 {
            self.raise_alerts(&batch.rows, marks).await;
        }
        Ok(report)
    }

    /// A batch on SQLite: read, publish outside any transaction, mark in a short one.
    async fn batch_sqlite(&self) -> Result<BatchReport, RelayError> {
        let now = self.now();
        // Only with enough lease left to finish the batch before anyone could take over.
        let margin = to_delta(self.config.publish_timeout);
        let owned = self
            .store
            .owned(
                &self.db,
                &self.config.instance_id,
                now + margin,
                LeaseLock::None,
            )
            .await?;
        let keys = self.claimable_keys(&owned);
        let may_claim = match &keys {
            Some(keys) => !keys.is_empty(),
            None => owned.iter().any(|name| name == RELAY_LEASE),
        };
        if !may_claim {
            return Ok(BatchReport::default());
        }
        let mut rows = self
            .store
            .claim(&self.db, self.claim(now, None, keys.as_deref()))
            .await?;
        if rows.is_empty() {
            return Ok(BatchReport::default());
        }
        let held = self.held_rows(&self.db, &rows).await?;
        let marks = self.publish(&mut rows, &held).await;
        let txn = crate::transaction::begin_whole(&self.db, None).await?;
        let report = self.apply(&txn, &rows, &marks).await?;
        txn.commit().await?;
        self.count(&rows, &marks);
        if report.failed > 0 {
            self.raise_alerts(&rows, &marks).await;
        }
        Ok(report)
    }

    fn claim<'a>(
        &self,
        now: DateTime<Utc>,
        partitions: Option<&'a [i32]>,
        worker_keys: Option<&'a [String]>,
    ) -> Claim<'a> {
        Claim {
            now,
            partitions,
            limit: self.config.batch_size,
            ordered: self.config.ordering == Ordering::PerAggregate,
            dead_letters: self.config.dead_letter_policy,
            lock: true,
            worker_keys,
            past: None,
        }
    }

    async fn held_rows<C: ConnectionTrait>(
        &self,
        conn: &C,
        rows: &[ClaimedRow],
    ) -> Result<HashSet<i64>, DbErr> {
        if !self.config.check_head || self.config.ordering != Ordering::PerAggregate {
            return Ok(HashSet::new());
        }
        let seqs: Vec<i64> = rows.iter().map(|row| row.seq).collect();
        Ok(self
            .store
            .not_at_head(conn, &seqs, self.config.dead_letter_policy, self.keyed())
            .await?
            .into_iter()
            .collect())
    }

    /// Publishes the rows that may go and decides the mark of every claimed row.
    async fn publish(&self, rows: &mut [ClaimedRow], held: &HashSet<i64>) -> Vec<Mark> {
        decide(
            rows,
            held,
            &self.config,
            self.now(),
            &*self.publisher,
            Some(&self.health),
        )
        .await
    }

    async fn apply<C: ConnectionTrait>(
        &self,
        conn: &C,
        rows: &[ClaimedRow],
        marks: &[Mark],
    ) -> Result<BatchReport, DbErr> {
        apply_marks(&self.store, conn, rows, marks, self.now()).await
    }

    fn count(&self, rows: &[ClaimedRow], marks: &[Mark]) {
        count_marks(&self.labels, rows, marks);
    }

    /// Publishes until nothing is claimable (or a batch makes no progress) and returns what
    /// it did. Rows waiting for a retry are not waited for. For tests, demos and one-shot
    /// jobs.
    ///
    /// # Errors
    /// [`RelayError::Database`] of the first batch that fails.
    pub async fn drain(&mut self) -> Result<RelayReport, RelayError> {
        self.refresh_leases().await?;
        let mut total = RelayReport::default();
        if self.pipelined() {
            loop {
                let run = self.run_pipelined(pipeline::Until::Drained, None).await?;
                total.merge(&run.total);
                if run.total.published
                    + run.total.retried
                    + run.total.dead_lettered
                    + run.total.failed
                    == 0
                {
                    return Ok(total);
                }
            }
        }
        loop {
            let report = self.run_batch().await?;
            total.add(&report);
            if report.claimed == 0 || !report.made_progress() {
                return Ok(total);
            }
        }
    }

    /// Runs until `shutdown` is cancelled: batches, waits (poll interval, `NOTIFY`,
    /// [`waker`](Self::waker)), heartbeats, retention cleanup. A database error is logged
    /// and the loop goes on after the poll interval.
    ///
    /// Graceful shutdown: the cancellation is looked at between batches only, so the batch
    /// in flight finishes and is marked; then the relay gives up its leases and removes its
    /// instance row, so that the others take over at once.
    ///
    /// Stop a relay through `shutdown` rather than by aborting its task: an aborted relay
    /// loses nothing (its batch rolls back, its rows are published again), but it keeps
    /// its leases until they expire, so its partitions wait for the lease TTL. Its
    /// transactions are opened on tasks of their own, so an abort never leaves one open on
    /// a pooled connection.
    ///
    /// # Errors
    /// None today: database errors are retried. The `Result` leaves room for fatal errors.
    pub async fn run(mut self, shutdown: CancellationToken) -> Result<RelayReport, RelayError> {
        let listener = self.start_listener(&shutdown);
        let mut total = RelayReport::default();
        tracing::info!(
            relay = %self.config.instance_id,
            outbox = %self.outbox.outbox_table(),
            ordering = self.config.ordering.as_str(),
            "relay started"
        );
        let pipelined = self.pipelined();
        while !shutdown.is_cancelled() {
            let batches = if pipelined {
                self.run_pipelined(pipeline::Until::NotFull, Some(&shutdown))
                    .await
                    .map(|run| {
                        total.merge(&run.total);
                        run.more
                    })
            } else {
                self.run_batch().await.map(|report| {
                    total.add(&report);
                    report.claimed >= self.config.batch_size && report.made_progress()
                })
            };
            let again = match batches {
                Ok(again) => again,
                Err(error) => {
                    total.errors += 1;
                    tracing::warn!(%error, relay = %self.config.instance_id, "relay batch failed");
                    false
                }
            };
            if let Err(error) = self.purge_if_due().await {
                tracing::warn!(%error, "outbox retention cleanup failed");
            }
            if self
                .last_gauges
                .is_none_or(|at| at.elapsed() >= self.config.heartbeat_interval)
            {
                self.last_gauges = Some(Instant::now());
                // Sets the pending / lag / dead gauges.
                if let Err(error) = self.operations().status().await {
                    tracing::warn!(%error, "reading the outbox status for the metrics failed");
                }
            }
            if again {
                continue;
            }
            let until_heartbeat = self.leases.last_refresh.map_or(Duration::ZERO, |at| {
                self.config.heartbeat_interval.saturating_sub(at.elapsed())
            });
            let pause = self.config.poll_interval.min(until_heartbeat);
            tokio::select! {
                () = shutdown.cancelled() => {}
                () = self.wake.notified() => {}
                () = tokio::time::sleep(pause) => {}
            }
        }
        if let Some(listener) = listener {
            listener.abort();
        }
        self.shutdown().await;
        tracing::info!(
            relay = %self.config.instance_id,
            published = total.published,
            "relay stopped"
        );
        Ok(total)
    }

    /// Gives up the leases and removes the instance row (best effort).
    async fn shutdown(&mut self) {
        let now = self.now();
        let me = self.config.instance_id.clone();
        if let Err(error) = self.store.release(&self.db, &me, None, now).await {
            tracing::warn!(%error, "relay could not release its leases; they expire");
        }
        if let Err(error) = self.store.remove_instances(&self.db, Some(&me), now).await {
            tracing::warn!(%error, "relay could not remove its instance row; it expires");
        }
        self.leases.owned.clear();
    }

    fn start_listener(&self, shutdown: &CancellationToken) -> Option<tokio::task::JoinHandle<()>> {
        if !self.config.listen || self.store.backend() != DbBackend::Postgres {
            return None;
        }
        let channel = self.outbox.notify_channel()?.to_owned();
        let pool = self.db.get_postgres_connection_pool().clone();
        Some(tokio::spawn(listener::listen(
            pool,
            channel,
            Arc::clone(&self.wake),
            shutdown.child_token(),
            self.labels.clone(),
        )))
    }

    async fn purge_if_due(&mut self) -> Result<(), RelayError> {
        let Some(retention) = self.config.retention else {
            return Ok(());
        };
        if self
            .last_purge
            .is_some_and(|at| at.elapsed() < self.config.purge_interval)
        {
            return Ok(());
        }
        self.last_purge = Some(Instant::now());
        let purged = retention::purge(
            &self.db,
            &self.outbox,
            &self.store,
            Purge {
                table: retention::Table::Outbox,
                owner: &self.config.instance_id,
                retention,
                batch: self.config.purge_batch,
                lease_ttl: self.config.lease_ttl,
            },
        )
        .await?;
        if let Some(rows) = purged
            && rows > 0
        {
            tracing::info!(rows, "published outbox rows purged");
        }
        Ok(())
    }
}

/// Decides what happens to each claimed row: publishes those that may go and reads the
/// outcomes. Shared by the relay and the fast path; the relay's batches report to `health`
/// (the fast path leaves failures to the relay and passes `None`).
pub(crate) async fn decide<P: Publisher + ?Sized>(
    rows: &mut [ClaimedRow],
    held: &HashSet<i64>,
    config: &RelayConfig,
    now: DateTime<Utc>,
    publisher: &P,
    health: Option<&outage::PublishHealth>,
) -> Vec<Mark> {
    let ordered = config.ordering == Ordering::PerAggregate;
    let block = config.dead_letter_policy == DeadLetterPolicy::Block;
    let mut marks: Vec<Mark> = Vec::with_capacity(rows.len());
    let mut to_send: Vec<usize> = Vec::with_capacity(rows.len());
    {
        // Rows behind a held or unreadable row of their aggregate wait; a row that cannot be
        // read is dead at once. (Nothing is stopped in the common case: no lookups then.)
        let mut stopped: HashSet<(&str, &str)> = HashSet::new();
        for (index, row) in rows.iter().enumerate() {
            let behind = ordered && !stopped.is_empty() && stopped.contains(&row.key());
            if behind || (!held.is_empty() && held.contains(&row.seq)) {
                if ordered {
                    stopped.insert(row.key());
                }
                marks.push(Mark::Untouched);
                continue;
            }
            match &row.envelope {
                Ok(_) => {
                    to_send.push(index);
                    marks.push(Mark::Untouched);
                }
                Err(unreadable) => {
                    let error = &unreadable.error;
                    tracing::error!(seq = row.seq, %error, "outbox row cannot be read: dead-lettered");
                    if ordered && block {
                        stopped.insert(row.key());
                    }
                    marks.push(Mark::Dead {
                        attempts: row.attempts.saturating_add(1),
                        error: format!("unreadable row: {error}"),
                    });
                }
            }
        }
    }
    // Lend the envelopes to the publisher (moved, not copied) and take them back after.
    let mut envelopes: Vec<Envelope> = Vec::with_capacity(to_send.len());
    for &index in &to_send {
        if let Ok(envelope) = std::mem::replace(
            &mut rows[index].envelope,
            Err(crate::sql::Unreadable::lent()),
        ) {
            envelopes.push(envelope);
        }
    }
    if envelopes.is_empty() {
        return marks;
    }
    let outcomes: Vec<MessageOutcome> =
        match tokio::time::timeout(config.publish_timeout, publisher.publish(&envelopes)).await {
            Err(_) => {
                let error = PublishError::timeout(format!(
                    "no answer within the publish timeout of {:?}",
                    config.publish_timeout
                ));
                vec![Err(error); envelopes.len()]
            }
            Ok(Err(error)) => vec![Err(error); envelopes.len()],
            Ok(Ok(mut outcomes)) => {
                if outcomes.len() != envelopes.len() {
                    tracing::warn!(
                        expected = envelopes.len(),
                        got = outcomes.len(),
                        "publisher returned the wrong number of outcomes"
                    );
                    outcomes.resize_with(envelopes.len(), || {
                        Err(PublishError::unavailable("no outcome from the publisher"))
                    });
                }
                outcomes
            }
        };
    for (&index, envelope) in to_send.iter().zip(envelopes) {
        rows[index].envelope = Ok(envelope);
    }
    if let Some(health) = health {
        let published = outcomes.iter().filter(|outcome| outcome.is_ok()).count();
        let mut transient = outcomes
            .iter()
            .filter_map(|outcome| outcome.as_ref().err())
            .filter(|error| !error.is_permanent());
        let first = transient.next();
        health.observe(published, first.map_or(0, |_| 1 + transient.count()), first);
    }
    let mut stopped: HashSet<(&str, &str)> = HashSet::new();
    for (&index, outcome) in to_send.iter().zip(outcomes) {
        let row = &rows[index];
        let key = row.key();
        let message_id = row
            .envelope
            .as_ref()
            .map(|envelope| envelope.message_id)
            .unwrap_or_default();
        let span = tracing::info_span!(
            "outbox.relay.message",
            seq = row.seq,
            %message_id,
            event_type = %row.event_type(),
            outcome = tracing::field::Empty,
        );
        let _entered = span.enter();
        let behind_failure = ordered && !stopped.is_empty() && stopped.contains(&key);
        let mark = match outcome {
            // A row that must not run twice automatically: any attempted failure is final,
            // whatever its class (a timeout may mean it happened).
            Err(error) if !row.retryable && error.kind() != PublishErrorKind::NotAttempted => {
                let attempts = row.attempts.saturating_add(1);
                tracing::error!(
                    seq = row.seq,
                    %message_id,
                    attempts,
                    %error,
                    "non-retryable outbox row failed: marked failed, never retried"
                );
                if ordered && block {
                    stopped.insert(key);
                }
                Mark::Failed { attempts, error }
            }
            Ok(()) => {
                if behind_failure {
                    tracing::warn!(
                        seq = row.seq,
                        "published after an earlier message of its aggregate failed: the \
                         publisher does not stop an aggregate after a failure"
                    );
                }
                Mark::Published
            }
            Err(_) if behind_failure => Mark::Untouched,
            Err(error) if error.kind() == PublishErrorKind::NotAttempted => {
                if ordered {
                    stopped.insert(key);
                }
                Mark::Untouched
            }
            Err(error) => {
                let attempts = row.attempts.saturating_add(1);
                let exhausted = u32::try_from(attempts).unwrap_or(u32::MAX) >= config.max_attempts;
                if error.is_permanent() || exhausted {
                    tracing::error!(
                        seq = row.seq,
                        attempts,
                        %error,
                        "outbox row dead-lettered"
                    );
                    if ordered && block {
                        stopped.insert(key);
                    }
                    Mark::Dead {
                        attempts,
                        error: error.to_string(),
                    }
                } else {
                    let delay = config.backoff.delay(u32::try_from(attempts).unwrap_or(1));
                    tracing::debug!(seq = row.seq, attempts, %error, ?delay, "publish failed, retry later");
                    if ordered {
                        stopped.insert(key);
                    }
                    Mark::Retry {
                        attempts,
                        at: now + to_delta(delay),
                        error: error.to_string(),
                    }
                }
            }
        };
        span.record(
            "outcome",
            match &mark {
                Mark::Published => "published",
                Mark::Retry { .. } => "retry",
                Mark::Dead { .. } => "dead",
                Mark::Failed { .. } => "failed",
                Mark::Untouched => "deferred",
            },
        );
        marks[index] = mark;
    }
    marks
}

/// Writes the marks; returns the batch report.
pub(crate) async fn apply_marks<C: ConnectionTrait>(
    store: &Store,
    conn: &C,
    rows: &[ClaimedRow],
    marks: &[Mark],
    now: DateTime<Utc>,
) -> Result<BatchReport, DbErr> {
    let mut report = BatchReport {
        claimed: rows.len(),
        ..BatchReport::default()
    };
    let mut published = Vec::new();
    for (row, mark) in rows.iter().zip(marks) {
        match mark {
            Mark::Published => published.push(row.seq),
            Mark::Retry {
                attempts,
                at,
                error,
            } => {
                store
                    .mark_failed(conn, row.seq, *attempts, AfterFailure::RetryAt(*at), error)
                    .await?;
                report.retried += 1;
            }
            Mark::Dead { attempts, error } => {
                store
                    .mark_failed(conn, row.seq, *attempts, AfterFailure::Dead, error)
                    .await?;
                report.dead_lettered += 1;
            }
            Mark::Failed { attempts, error } => {
                store
                    .mark_failed(
                        conn,
                        row.seq,
                        *attempts,
                        AfterFailure::Failed,
                        &error.to_string(),
                    )
                    .await?;
                report.failed += 1;
            }
            Mark::Untouched => report.deferred += 1,
        }
    }
    store.mark_published(conn, &published, now).await?;
    report.published = published.len();
    Ok(report)
}

/// Counts the marks in the metrics (after the commit).
pub(crate) fn count_marks(labels: &[metrics::Label], rows: &[ClaimedRow], marks: &[Mark]) {
    let mut published = 0u64;
    for (row, mark) in rows.iter().zip(marks) {
        match mark {
            Mark::Published => published += 1,
            Mark::Retry { .. } => {
                let mut labels = labels.to_vec();
                labels.push(metrics::Label::new("class", "transient"));
                metrics::counter!(metric::PUBLISH_FAILURES, labels).increment(1);
            }
            Mark::Dead { .. } => {
                let mut failure = labels.to_vec();
                failure.push(metrics::Label::new("class", "permanent"));
                metrics::counter!(metric::PUBLISH_FAILURES, failure).increment(1);
                let mut dead = labels.to_vec();
                dead.push(metrics::Label::new(
                    "event_type",
                    row.event_type().to_owned(),
                ));
                metrics::counter!(metric::DEAD_LETTERED, dead).increment(1);
            }
            Mark::Failed { error, .. } => {
                let mut failure = labels.to_vec();
                failure.push(metrics::Label::new("class", error.class().as_str()));
                metrics::counter!(metric::PUBLISH_FAILURES, failure).increment(1);
                let mut failed = labels.to_vec();
                failed.push(metrics::Label::new(
                    "event_type",
                    row.event_type().to_owned(),
                ));
                metrics::counter!(metric::FAILED, failed).increment(1);
            }
            Mark::Untouched => {}
        }
    }
    if published > 0 {
        metrics::counter!(metric::PUBLISHED, labels.to_vec()).increment(published);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
