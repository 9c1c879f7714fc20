//! The relay: publishes every committed outbox row at least once, in `seq` order per
//! aggregate, from any number of processes, and never gets stuck on one bad row.
//!
// The example runs on in-memory SQLite: without the `sqlite` feature it only compiles.
#![cfg_attr(feature = "sqlite", doc = "```")]
#![cfg_attr(not(feature = "sqlite"), doc = "```no_run")]
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
//! lose rows whose transaction commits after a later `seq` was published: two producers take
//! `seq` 7 and 8, the second commits first, a relay publishes 8 and records "up to 8", and
//! row 7, committed a moment later, is never published.
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

mod batch;
mod builder;
pub mod config;
mod core;
mod decide;
pub mod fast_path;
mod jobs;
mod leases;
#[cfg(feature = "postgres")]
mod listener;
#[cfg(log_relay)]
pub mod log;
#[cfg(all(test, feature = "mysql"))]
mod mark_index_tests;
mod outage;
mod pipeline;
mod report;
pub mod tables;

use std::sync::Arc;

#[cfg(doc)]
use outbox_core::policy::{DeadLetterPolicy, Ordering};
use std::time::{Duration, Instant};

use outbox_core::publish::Publisher;
use sea_orm::{DatabaseConnection, DbBackend};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

pub use builder::RelayBuilder;
pub use config::{RelayConfig, RelayConfigError};
pub use fast_path::{FastPath, FastPathReport};
pub use report::{BatchReport, LeaseReport, RelayError, RelayReport};
pub use tables::RelayTables;

use self::core::Core;
use self::leases::Leases;
use crate::config::Outbox;
use crate::outage::DatabaseOutage;
use crate::periodic;
use crate::retention::{self, Purge};
use crate::schedule;
use crate::status_report::{self, RelayPolicy};

/// The steps of [`Relay::run`]'s loop, as [`DatabaseOutage`] names them.
const BATCH: &str = "batch";
const RETENTION: &str = "retention cleanup";
const GAUGES: &str = "status gauges";
const SCHEDULE: &str = "scheduled rows";

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

/// A relay for one outbox; see the [module documentation](self).
pub struct Relay<P> {
    core: Core<P>,
    outage: DatabaseOutage,
    leases: Leases,
    wake: Arc<Notify>,
    /// When the retention cleanup runs next (`None`: at once).
    next_purge: Option<Instant>,
    /// When the status gauges are read next (`None`: at once).
    next_gauges: Option<Instant>,
    /// When the scheduled table is looked at next (`None`: at once).
    next_schedule: Option<Instant>,
}

impl<P> std::fmt::Debug for Relay<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relay")
            .field("outbox", &self.core.outbox.outbox_table().to_string())
            .field("instance_id", &self.core.config.instance_id)
            .field("owned", &self.leases.owned)
            .finish_non_exhaustive()
    }
}

impl<P> Relay<P> {
    /// A relay around `core`, holding no lease yet.
    fn new(core: Core<P>) -> Self {
        let outage = DatabaseOutage::new(
            "relay",
            core.config.instance_id.clone(),
            core.labels.clone(),
        );
        Self {
            core,
            outage,
            leases: Leases::default(),
            wake: Arc::new(Notify::new()),
            next_purge: None,
            next_gauges: None,
            next_schedule: None,
        }
    }
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
            seat: None,
        }
    }

    /// The settings.
    pub fn config(&self) -> &RelayConfig {
        &self.core.config
    }

    /// This relay's instance id.
    pub fn instance_id(&self) -> &str {
        &self.core.config.instance_id
    }

    /// The publisher.
    pub fn publisher(&self) -> &P {
        &self.core.publisher
    }

    /// A handle that wakes this relay's [`run`](Self::run) loop.
    pub fn waker(&self) -> RelayWaker {
        RelayWaker(Arc::clone(&self.wake))
    }

    /// The database this relay reads.
    pub(crate) fn database(&self) -> &DatabaseConnection {
        self.core.db.connection()
    }

    /// The outbox this relay publishes.
    pub(crate) fn outbox(&self) -> &Outbox {
        &self.core.outbox
    }

    /// A fast path that publishes right after commit, sharing this relay's publisher and
    /// settings. Turn on [`RelayBuilder::check_head`] on the relays when using it.
    pub fn fast_path(&self) -> FastPath<P> {
        FastPath::new(
            self.core.db.connection().clone(),
            self.core.outbox.clone(),
            Arc::clone(&self.core.publisher),
            self.core.config.clone(),
        )
    }

    /// This relay's database health (shared with [`run`](Self::run)'s loop): what fails
    /// now, for a readiness check. See [`crate::outage`].
    pub fn database_outage(&self) -> DatabaseOutage {
        self.outage.clone()
    }

    /// The leases held after the last refresh.
    pub fn owned_leases(&self) -> &[String] {
        &self.leases.owned
    }

    /// Heartbeats, then releases and takes leases as described in the
    /// [module documentation](self). [`run`](Self::run) and [`drain`](Self::drain) do it
    /// every heartbeat interval; tests call it to rebalance at once.
    ///
    /// # Errors
    /// [`RelayError::Database`].
    pub async fn refresh_leases(&mut self) -> Result<LeaseReport, RelayError> {
        self.leases.refresh(&self.core).await
    }

    /// Runs one batch: refreshes the leases when a heartbeat is due, claims, publishes,
    /// marks. See the [module documentation](self).
    ///
    /// # Errors
    /// [`RelayError::Database`]: nothing of the batch was marked.
    pub async fn run_batch(&mut self) -> Result<BatchReport, RelayError> {
        if self.leases.refresh_due(&self.core) {
            self.refresh_leases().await?;
        }
        let span = self.core.batch_span();
        let started = Instant::now();
        let report = self.core.batch().instrument(span.clone()).await?;
        self.core.record_batch(&span, &report, started);
        Ok(report)
    }

    /// Moves the scheduled rows that are due into the outbox table (see
    /// [`crate::schedule`]); [`run`](Self::run) does it every
    /// [`schedule_interval`](RelayConfig::schedule_interval), [`drain`](Self::drain) first.
    /// Returns how many moved.
    ///
    /// # Errors
    /// [`RelayError::Database`]: the rows of the failed transaction stay scheduled.
    pub async fn promote_scheduled(&mut self) -> Result<u64, RelayError> {
        let now = self.core.now();
        let moved = schedule::promote_due(
            &self.core.db,
            &self.core.store,
            now,
            self.core.config.batch_size,
        )
        .await?;
        Ok(moved)
    }

    /// Enqueues the runs of the outbox's periodic jobs that are due (see
    /// [`crate::periodic`]): once per period across every relay; [`run`](Self::run) looks
    /// every [`schedule_interval`](RelayConfig::schedule_interval), [`drain`](Self::drain)
    /// first. Returns how many runs were enqueued.
    ///
    /// # Errors
    /// [`RelayError::Database`]: nothing of the failed job's look was written.
    pub async fn enqueue_periodic(&mut self) -> Result<u64, RelayError> {
        let now = self.core.now();
        Ok(periodic::enqueue_due(&self.core.db, &self.core.store, now).await?)
    }

    /// What comes due with time: periodic runs enqueued, scheduled rows moved.
    async fn take_due(&mut self) -> Result<(), RelayError> {
        self.enqueue_periodic().await?;
        self.promote_scheduled().await?;
        Ok(())
    }

    /// Publishes until nothing is claimable (or a batch makes no progress) and returns what
    /// it did. Rows waiting for a retry are not waited for, but a row whose retry falls due
    /// while the drain still runs is tried again (with a short backoff and a broker that is
    /// down, one drain can record several attempts). For tests, demos and one-shot jobs.
    ///
    /// # Errors
    /// [`RelayError::Database`] of the first batch that fails.
    pub async fn drain(&mut self) -> Result<RelayReport, RelayError> {
        self.refresh_leases().await?;
        self.take_due().await?;
        let mut total = RelayReport::default();
        if self.core.pipelined() {
            loop {
                let run = self
                    .core
                    .run_pipelined(&mut self.leases, pipeline::Until::Drained, None)
                    .await?;
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
    /// [`waker`](Self::waker)), heartbeats, retention cleanup. A database error (of the
    /// batch, its lease refresh, the status gauges or the cleanup) is retried with backoff
    /// and logged once, then every 30 s, then at its recovery: see [`crate::outage`] and
    /// [`database_outage`](Self::database_outage).
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
            relay = %self.core.config.instance_id,
            outbox = %self.core.outbox.outbox_table(),
            ordering = self.core.config.ordering.as_str(),
            "relay started"
        );
        let pipelined = self.core.pipelined();
        while !shutdown.is_cancelled() {
            // With a connection budget, the connections are held for this turn only.
            let turn = tokio::select! {
                () = shutdown.cancelled() => break,
                turn = self.core.db.enter() => turn,
            };
            if self.next_schedule.is_none_or(|at| Instant::now() >= at) {
                let interval = self.core.config.schedule_interval;
                let wait = match self.take_due().await {
                    Ok(_) => {
                        self.outage.succeeded(SCHEDULE);
                        interval
                    }
                    Err(RelayError::Database(error)) => {
                        interval.max(self.outage.failed(SCHEDULE, &error))
                    }
                };
                self.next_schedule = Some(Instant::now() + wait);
            }
            let batches = if pipelined {
                self.core
                    .run_pipelined(&mut self.leases, pipeline::Until::NotFull, Some(&shutdown))
                    .await
                    .map(|run| {
                        total.merge(&run.total);
                        run.more
                    })
            } else {
                self.run_batch().await.map(|report| {
                    total.add(&report);
                    report.claimed >= self.core.config.batch_size && report.made_progress()
                })
            };
            let again = match batches {
                Ok(again) => {
                    self.outage.succeeded(BATCH);
                    again
                }
                Err(RelayError::Database(error)) => {
                    total.errors += 1;
                    // Nothing else runs until the batch works again: no gauges, no
                    // cleanup, and no early wake-up by commits or the waker.
                    let pause = self.outage.failed(BATCH, &error);
                    self.leases.refresh_next();
                    drop(turn);
                    tokio::select! {
                        () = shutdown.cancelled() => {}
                        () = tokio::time::sleep(pause) => {}
                    }
                    continue;
                }
            };
            if self.core.config.retention.is_some()
                && self.next_purge.is_none_or(|at| Instant::now() >= at)
            {
                let interval = self.core.config.purge_interval;
                let wait = match self.purge().await {
                    Ok(()) => {
                        self.outage.succeeded(RETENTION);
                        interval
                    }
                    Err(RelayError::Database(error)) => {
                        interval.max(self.outage.failed(RETENTION, &error))
                    }
                };
                self.next_purge = Some(Instant::now() + wait);
            }
            if self.next_gauges.is_none_or(|at| Instant::now() >= at) {
                // Sets the pending / lag / dead gauges.
                let policy = RelayPolicy {
                    ordering: self.core.config.ordering,
                    dead_letters: self.core.config.dead_letter_policy,
                };
                let report =
                    status_report::read(&self.core.db, &self.core.outbox, &self.core.store, policy);
                let interval = self.core.config.heartbeat_interval;
                let wait = match report.await {
                    Ok(_) => {
                        self.outage.succeeded(GAUGES);
                        interval
                    }
                    Err(error) => interval.max(self.outage.failed(GAUGES, &error)),
                };
                self.next_gauges = Some(Instant::now() + wait);
            }
            drop(turn);
            if again {
                continue;
            }
            let until_heartbeat = self.leases.last_refresh.map_or(Duration::ZERO, |at| {
                self.core
                    .config
                    .heartbeat_interval
                    .saturating_sub(at.elapsed())
            });
            let until_schedule = self.next_schedule.map_or(Duration::ZERO, |at| {
                at.saturating_duration_since(Instant::now())
            });
            let pause = self
                .core
                .config
                .poll_interval
                .min(until_heartbeat)
                .min(until_schedule);
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
            relay = %self.core.config.instance_id,
            published = total.published,
            "relay stopped"
        );
        Ok(total)
    }

    /// Gives up the leases and removes the instance row (best effort).
    async fn shutdown(&mut self) {
        let _turn = self.core.db.enter().await;
        let now = self.core.now();
        let me = self.core.config.instance_id.clone();
        if let Err(error) = self.core.store.release(&self.core.db, &me, None, now).await {
            tracing::warn!(%error, "relay could not release its leases; they expire");
        }
        if let Err(error) = self
            .core
            .store
            .remove_instances(&self.core.db, Some(&me), now)
            .await
        {
            tracing::warn!(%error, "relay could not remove its instance row; it expires");
        }
        self.leases.owned.clear();
    }

    fn start_listener(&self, shutdown: &CancellationToken) -> Option<tokio::task::JoinHandle<()>> {
        // Behind a transaction pooler a LISTEN would hold no session: the relay polls.
        if !self.core.config.listen
            || self.core.store.backend() != DbBackend::Postgres
            || self.core.db.transaction_pooling()
            || self.core.db.budgeted()
        {
            return None;
        }
        #[cfg(feature = "postgres")]
        {
            let channel = self.core.outbox.notify_channel()?.to_owned();
            let pool = self
                .core
                .db
                .connection()
                .get_postgres_connection_pool()
                .clone();
            Some(tokio::spawn(listener::listen(
                pool,
                channel,
                Arc::clone(&self.wake),
                shutdown.child_token(),
                self.core.labels.clone(),
            )))
        }
        // A PostgreSQL connection needs the `postgres` feature.
        #[cfg(not(feature = "postgres"))]
        {
            let _ = shutdown;
            None
        }
    }

    /// Deletes published rows past the retention (when one is set), in batches, one
    /// relay at a time.
    async fn purge(&mut self) -> Result<(), RelayError> {
        let Some(retention) = self.core.config.retention else {
            return Ok(());
        };
        let purged = retention::purge(
            &self.core.db,
            &self.core.outbox,
            &self.core.store,
            Purge {
                table: retention::Table::Outbox,
                owner: &self.core.config.instance_id,
                retention,
                batch: self.core.config.purge_batch,
                lease_ttl: self.core.config.lease_ttl,
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
