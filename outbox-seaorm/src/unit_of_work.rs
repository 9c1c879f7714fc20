//! [`UnitOfWork`]: a business transaction that aggregates raise domain events into, and whose
//! commit writes the resulting integration events to the outbox in the same transaction.
//!
//! A unit of work wraps a SeaORM [`DatabaseTransaction`] and implements
//! [`ConnectionTrait`], [`StreamTrait`] and [`TransactionTrait`], so business code runs its
//! queries on it exactly as on a transaction: `Entity::insert(..).exec(&uow)`,
//! `Entity::find().all(&uow)`, raw statements, streams, nested transactions (savepoints).
//! Aggregates receive it as `&impl Raise<E>` and never see SeaORM.
//!
//! [`UnitOfWork::commit`] is the before-commit hook SeaORM lacks:
//!
//! 1. drain the raised events, in order;
//! 2. map each through the [`ContractMapper`] into envelopes (encoded with the configured
//!    [`EnvelopeConfig`](outbox_core::EnvelopeConfig); `occurred_at` is the configured
//!    clock's time when the event was *raised*, `created_at` its time at commit);
//! 3. stamp every envelope with the unit of work's correlation id, causation id, trace
//!    context and headers;
//! 4. insert the rows in chunks, one multi-row `INSERT` per chunk (with
//!    [`PostgresWakeup::InTransaction`](crate::PostgresWakeup::InTransaction), the last one
//!    also runs `pg_notify`, in the same statement);
//! 5. `COMMIT`;
//! 6. on PostgreSQL with the default [`PostgresWakeup::AfterCommit`](crate::PostgresWakeup),
//!    signal the outbox's notifier, which sends a coalesced `NOTIFY` in the background (see
//!    [`crate::wakeup`]).
//!
//! Any failure before `COMMIT` rolls everything back — business rows included — and returns
//! a [`CommitError`].
//!
//! A unit of work remembers a statement run through it that failed: [`UnitOfWork::commit`]
//! then rolls back and returns [`CommitError::StatementFailed`], even when the caller caught
//! the error and carried on. PostgreSQL refuses to commit such a transaction anyway; MariaDB
//! and SQLite would commit the statements that succeeded, with their events, which breaks
//! "together or not at all". To recover from an expected failure (say, a unique violation
//! meaning "already there"), run the statement in a nested transaction — a savepoint,
//! `uow.begin()` — and roll that back: statements on the savepoint are not the unit of
//! work's own. Dropping a unit of work without committing rolls it back, as does
//! [`UnitOfWork::rollback`]. Nothing else in this crate writes outbox rows: the row-writing
//! code is private, so the only way to get an event into the outbox is to raise it in a unit
//! of work that commits.
//!
//! # Correlation, causation, trace context
//!
//! - **Correlation id**: a new UUIDv7 per unit of work unless set
//!   ([`UnitOfWorkBuilder::correlation_id`]); a consumer-side unit of work
//!   ([`UnitOfWorkBuilder::caused_by`]) inherits the incoming message's correlation id (or
//!   uses the incoming message id when it has none), so a whole flow shares one id.
//! - **Causation id**: none for a unit of work started by a request; the incoming message id
//!   for a consumer-side one.
//! - **Trace context**: see [`crate::trace`].
//!
//! # SQLite
//!
//! SQLite has one writer at a time, and SeaORM's SQLite pool has one connection unless
//! configured otherwise: while a unit of work is open, run *everything* on the unit of work,
//! never on the `DatabaseConnection` — a second acquire from a one-connection pool waits for
//! the unit of work, which waits for it: a deadlock until the pool's acquire timeout.
//! With a larger pool on a file database, units of work begin with `BEGIN IMMEDIATE` (see
//! [`OutboxBuilder::sqlite_begin_immediate`](crate::OutboxBuilder::sqlite_begin_immediate))
//! so that concurrent writers queue on SQLite's busy timeout instead of failing with
//! `SQLITE_BUSY`.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use chrono::{DateTime, Utc};
use outbox_core::clock::Clock;
use outbox_core::mapping::{ContractMapper, ContractSink};
use outbox_core::{Envelope, Raise};
use sea_orm::{
    AccessMode, ConnectionTrait, DatabaseConnection, DatabaseExecutor, DatabaseTransaction,
    DbBackend, DbErr, ExecResult, IsolationLevel, QueryResult, SqliteTransactionMode, Statement,
    StreamTrait, TransactionOptions, TransactionStream, TransactionTrait,
};
use tracing::Instrument as _;
use uuid::Uuid;

use crate::config::Outbox;
use crate::error::{CommitError, UnitOfWorkError};
use crate::sql::insert;
use crate::trace::TraceContext;
use crate::wakeup::{Target, WakeupTarget};

/// A business transaction with an event buffer. See the [module documentation](self).
///
/// `E` is the domain event type. The unit of work shares the [`Outbox`] configuration and
/// the mapper ([`MapperRef`]) instead of borrowing them, so it has no lifetime parameter:
/// closures taking `&UnitOfWork<E>` then have a single lifetime, which rustc needs to see
/// the future of [`UnitOfWorkBuilder::transaction`] as `Send` (with a lifetime parameter,
/// spawning it fails with "implementation of `AsyncFnOnce` is not general enough").
pub struct UnitOfWork<E: 'static = outbox_core::mapping::NoEvents> {
    txn: DatabaseTransaction,
    outbox: Outbox,
    mapper: MapperRef<E>,
    events: Mutex<Vec<Raised<E>>>,
    correlation_id: Uuid,
    causation_id: Option<Uuid>,
    trace: Option<TraceContext>,
    headers: BTreeMap<String, String>,
    /// Where the after-commit wake-up goes (nowhere unless
    /// [`PostgresWakeup::AfterCommit`](crate::PostgresWakeup) on PostgreSQL).
    wakeup: Target,
    /// Raised by nested units of work that wrote rows: wake up after this one commits, even
    /// if it wrote none itself. `Some` exactly when `wakeup` goes somewhere.
    nested_wrote: Option<Arc<AtomicBool>>,
    /// The error of the first statement run through the unit of work that failed: commit
    /// refuses when set.
    failed: Mutex<Option<String>>,
}

/// What a unit of work can begin on: a [`DatabaseConnection`] (a pool), a
/// [`DatabaseTransaction`] or another [`UnitOfWork`] (both nest as a savepoint), or a
/// [`DatabaseExecutor`] holding one of these.
///
/// Besides SeaORM's traits, it tells where the after-commit wake-up of the unit of work goes
/// ([`crate::wakeup`]). Implement it for a wrapper of your own by delegating
/// `wakeup_target` to the connection it wraps.
pub trait UnitOfWorkConnection:
    ConnectionTrait + TransactionTrait<Transaction = DatabaseTransaction>
{
    /// Where [`PostgresWakeup::AfterCommit`](crate::PostgresWakeup::AfterCommit) sends the
    /// notification of a unit of work begun on this connection. Default:
    /// [`WakeupTarget::none`] (relays find the rows at their next poll). Called only when
    /// that wake-up is configured and the backend is PostgreSQL.
    fn wakeup_target(&self) -> WakeupTarget {
        WakeupTarget::none()
    }
}

/// Notifies on this pool.
impl UnitOfWorkConnection for DatabaseConnection {
    fn wakeup_target(&self) -> WakeupTarget {
        WakeupTarget::pool(self)
    }
}

/// Nothing: the caller commits the transaction, not the unit of work.
impl UnitOfWorkConnection for DatabaseTransaction {}

/// As the connection or transaction it holds.
impl UnitOfWorkConnection for DatabaseExecutor<'_> {
    fn wakeup_target(&self) -> WakeupTarget {
        match self {
            DatabaseExecutor::Connection(db) => WakeupTarget::pool(db),
            _ => WakeupTarget::none(),
        }
    }
}

/// A nested unit of work hands its wake-up to this one, which requests it after its own
/// `COMMIT`.
impl<E: Send + 'static> UnitOfWorkConnection for UnitOfWork<E> {
    fn wakeup_target(&self) -> WakeupTarget {
        match &self.nested_wrote {
            Some(flag) => WakeupTarget(Target::Enclosing(Arc::clone(flag))),
            None => WakeupTarget::none(),
        }
    }
}

/// The mapper of a unit of work, shared without copying it: a `&'static` reference or an
/// `Arc`. Made by `From`, so constructors take `&OrderingContracts` (a unit struct
/// expression is promoted to `'static`), `&MAPPER` (a `static`) or `Arc::new(mapper)` (a
/// mapper built at run time) alike.
pub struct MapperRef<E: 'static>(MapperKind<E>);

enum MapperKind<E: 'static> {
    Static(&'static dyn ContractMapper<E>),
    Shared(Arc<dyn ContractMapper<E>>),
}

impl<E: 'static> MapperRef<E> {
    fn get(&self) -> &dyn ContractMapper<E> {
        match &self.0 {
            MapperKind::Static(mapper) => *mapper,
            MapperKind::Shared(mapper) => &**mapper,
        }
    }
}

impl<E: 'static> Clone for MapperRef<E> {
    fn clone(&self) -> Self {
        Self(match &self.0 {
            MapperKind::Static(mapper) => MapperKind::Static(*mapper),
            MapperKind::Shared(mapper) => MapperKind::Shared(Arc::clone(mapper)),
        })
    }
}

impl<E: 'static> fmt::Debug for MapperRef<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.0 {
            MapperKind::Static(_) => "MapperRef::Static",
            MapperKind::Shared(_) => "MapperRef::Shared",
        })
    }
}

impl<E: 'static, M: ContractMapper<E> + 'static> From<&'static M> for MapperRef<E> {
    fn from(mapper: &'static M) -> Self {
        Self(MapperKind::Static(mapper))
    }
}

impl<E: 'static, M: ContractMapper<E> + 'static> From<Arc<M>> for MapperRef<E> {
    fn from(mapper: Arc<M>) -> Self {
        Self(MapperKind::Shared(mapper))
    }
}

impl<E: 'static> From<Arc<dyn ContractMapper<E>>> for MapperRef<E> {
    fn from(mapper: Arc<dyn ContractMapper<E>>) -> Self {
        Self(MapperKind::Shared(mapper))
    }
}

/// A buffered domain event and the configured clock's time when it was raised: the
/// `occurred_at` of the contracts it maps to.
struct Raised<E> {
    event: E,
    at: DateTime<Utc>,
}

/// A clock stopped at one instant: makes a [`ContractSink`] stamp the raise time.
#[derive(Debug)]
struct RaisedAt(DateTime<Utc>);

impl Clock for RaisedAt {
    fn now(&self) -> DateTime<Utc> {
        self.0
    }
}

/// What a successful [`UnitOfWork::commit`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CommitReport {
    /// Domain events raised.
    pub events: usize,
    /// Outbox rows written (contracts emitted by the mapper).
    pub rows: usize,
    /// Multi-row `INSERT` statements executed.
    pub chunks: usize,
    /// The wake-up of listening relays this commit requested (PostgreSQL).
    pub wakeup: CommitWakeup,
    /// The message ids of the rows written, in insert order.
    pub message_ids: Vec<Uuid>,
}

/// The wake-up of listening relays a commit requested: [`CommitReport::wakeup`]. See
/// [`crate::wakeup`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CommitWakeup {
    /// None: no outbox row was written (by this unit of work or one nested in it), the
    /// backend is not PostgreSQL, notifications are off
    /// ([`PostgresWakeup::Off`](crate::PostgresWakeup::Off) or no channel), or the unit of
    /// work began on a plain transaction.
    None,
    /// `pg_notify` ran inside the transaction
    /// ([`PostgresWakeup::InTransaction`](crate::PostgresWakeup::InTransaction)): delivered
    /// with the commit.
    InTransaction,
    /// The after-commit notifier was signalled
    /// ([`PostgresWakeup::AfterCommit`](crate::PostgresWakeup::AfterCommit)): a coalesced
    /// `NOTIFY` follows within `min_interval` plus a round trip, best effort.
    AfterCommit,
    /// A unit of work nested in another one: the enclosing unit of work requests the wake-up
    /// after its own `COMMIT`.
    Enclosing,
}

impl CommitWakeup {
    /// Whether a wake-up was requested (anything but [`None`](Self::None)).
    pub fn is_requested(self) -> bool {
        self != Self::None
    }
}

enum TraceChoice {
    /// Ask the configured hook.
    FromSource,
    /// Ask the hook; use this one (from an incoming message) if it finds none.
    FromSourceOr(Option<TraceContext>),
    /// Set explicitly.
    Explicit(Option<TraceContext>),
}

/// Options of a unit of work before it begins: created by [`Outbox::unit_of_work`].
#[must_use]
pub struct UnitOfWorkBuilder<E: 'static> {
    outbox: Outbox,
    mapper: MapperRef<E>,
    correlation_id: Option<Uuid>,
    causation_id: Option<Uuid>,
    trace: TraceChoice,
    headers: BTreeMap<String, String>,
}

impl<E: 'static> UnitOfWorkBuilder<E> {
    /// Sets the correlation id (default: a new UUIDv7, or the incoming message's with
    /// [`caused_by`](Self::caused_by)).
    pub fn correlation_id(mut self, id: Uuid) -> Self {
        self.correlation_id = Some(id);
        self
    }

    /// Makes this a consumer-side unit of work handling `incoming`: causation id =
    /// `incoming.message_id`, correlation id = `incoming.correlation_id` (or
    /// `incoming.message_id` when it has none) unless set, and `incoming`'s trace context
    /// when the trace hook finds no current one.
    pub fn caused_by(mut self, incoming: &Envelope) -> Self {
        self.causation_id = Some(incoming.message_id);
        if self.correlation_id.is_none() {
            self.correlation_id = Some(incoming.correlation_id.unwrap_or(incoming.message_id));
        }
        if !matches!(self.trace, TraceChoice::Explicit(_)) {
            self.trace = TraceChoice::FromSourceOr(TraceContext::of_envelope(incoming));
        }
        self
    }

    /// Sets the trace context explicitly (`None`: no trace context), bypassing the hook.
    pub fn trace_context(mut self, context: Option<TraceContext>) -> Self {
        self.trace = TraceChoice::Explicit(context);
        self
    }

    /// Adds a header to every envelope the unit of work writes (e.g. a tenant id).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.insert(name.into(), value.into());
        self
    }

    /// Begins the transaction on `db` (a connection, a transaction or another unit of work,
    /// which then nests as a savepoint).
    ///
    /// # Errors
    /// The database's error when `BEGIN` fails.
    pub async fn begin<C>(self, db: &C) -> Result<UnitOfWork<E>, DbErr>
    where
        C: UnitOfWorkConnection,
    {
        let options = TransactionOptions {
            sqlite_transaction_mode: (db.get_database_backend() == DbBackend::Sqlite
                && self.outbox.sqlite_begin_immediate())
            .then_some(SqliteTransactionMode::Immediate),
            ..TransactionOptions::default()
        };
        let txn = db.begin_with_options(options).await?;
        let wakeup = if self.outbox.after_commit_channel().is_some()
            && db.get_database_backend() == DbBackend::Postgres
        {
            db.wakeup_target().0
        } else {
            Target::None
        };
        let nested_wrote =
            (!matches!(wakeup, Target::None)).then(|| Arc::new(AtomicBool::new(false)));
        let source = self.outbox.trace_context_source();
        let trace = match self.trace {
            TraceChoice::FromSource => source(),
            TraceChoice::FromSourceOr(incoming) => source().or(incoming),
            TraceChoice::Explicit(context) => context,
        };
        Ok(UnitOfWork {
            txn,
            outbox: self.outbox,
            mapper: self.mapper,
            events: Mutex::new(Vec::new()),
            correlation_id: self.correlation_id.unwrap_or_else(Uuid::now_v7),
            causation_id: self.causation_id,
            trace,
            headers: self.headers,
            wakeup,
            nested_wrote,
            failed: Mutex::new(None),
        })
    }

    /// Runs `work` in a unit of work on `db`: commits when it returns `Ok`, rolls back when
    /// it returns `Err` (or panics, or the future is dropped).
    ///
    /// The returned future is `Send` when `work`'s future is, so it can be spawned.
    ///
    /// # Errors
    /// [`UnitOfWorkError::Begin`], [`UnitOfWorkError::Aborted`] with `work`'s error, or
    /// [`UnitOfWorkError::Commit`].
    pub async fn transaction<C, T, Err, F>(self, db: &C, work: F) -> Result<T, UnitOfWorkError<Err>>
    where
        C: UnitOfWorkConnection,
        F: for<'u> AsyncFnOnce(&'u UnitOfWork<E>) -> Result<T, Err>,
    {
        let uow = self.begin(db).await.map_err(UnitOfWorkError::Begin)?;
        match work(&uow).await {
            Ok(value) => {
                uow.commit().await.map_err(UnitOfWorkError::Commit)?;
                Ok(value)
            }
            Err(error) => {
                if let Err(rollback) = uow.rollback().await {
                    tracing::warn!(error = %rollback, "rollback of an aborted unit of work failed");
                }
                Err(UnitOfWorkError::Aborted(error))
            }
        }
    }
}

impl Outbox {
    /// Options for a unit of work whose events `mapper` maps (see [`MapperRef`]: `&Mapper`
    /// for a unit struct or a static, `Arc<Mapper>` for one built at run time).
    pub fn unit_of_work<E: 'static>(
        &self,
        mapper: impl Into<MapperRef<E>>,
    ) -> UnitOfWorkBuilder<E> {
        UnitOfWorkBuilder {
            outbox: self.clone(),
            mapper: mapper.into(),
            correlation_id: None,
            causation_id: None,
            trace: TraceChoice::FromSource,
            headers: BTreeMap::new(),
        }
    }

    /// Begins a unit of work on `db` with default options.
    ///
    /// # Errors
    /// The database's error when `BEGIN` fails.
    pub async fn begin<E: 'static, C>(
        &self,
        db: &C,
        mapper: impl Into<MapperRef<E>>,
    ) -> Result<UnitOfWork<E>, DbErr>
    where
        C: UnitOfWorkConnection,
    {
        self.unit_of_work(mapper).begin(db).await
    }

    /// Begins a consumer-side unit of work handling `incoming` (see
    /// [`UnitOfWorkBuilder::caused_by`]).
    ///
    /// # Errors
    /// The database's error when `BEGIN` fails.
    pub async fn begin_caused_by<E: 'static, C>(
        &self,
        db: &C,
        mapper: impl Into<MapperRef<E>>,
        incoming: &Envelope,
    ) -> Result<UnitOfWork<E>, DbErr>
    where
        C: UnitOfWorkConnection,
    {
        self.unit_of_work(mapper)
            .caused_by(incoming)
            .begin(db)
            .await
    }

    /// Runs `work` in a unit of work with default options; see
    /// [`UnitOfWorkBuilder::transaction`].
    ///
    /// # Errors
    /// As [`UnitOfWorkBuilder::transaction`].
    pub async fn transaction<E: 'static, C, T, Err, F>(
        &self,
        db: &C,
        mapper: impl Into<MapperRef<E>>,
        work: F,
    ) -> Result<T, UnitOfWorkError<Err>>
    where
        C: UnitOfWorkConnection,
        F: for<'u> AsyncFnOnce(&'u UnitOfWork<E>) -> Result<T, Err>,
    {
        self.unit_of_work(mapper).transaction(db, work).await
    }
}

impl<E: 'static> UnitOfWork<E> {
    /// Begins a unit of work on `db` with the default configuration
    /// ([`Outbox::default_ref`]: tables `outbox` and `inbox`, …).
    ///
    /// # Errors
    /// The database's error when `BEGIN` fails.
    pub async fn begin<C>(db: &C, mapper: impl Into<MapperRef<E>>) -> Result<Self, DbErr>
    where
        C: UnitOfWorkConnection,
    {
        Outbox::default_ref().begin(db, mapper).await
    }

    fn buffer(&self) -> MutexGuard<'_, Vec<Raised<E>>> {
        // Pushing to a Vec cannot leave it inconsistent: ignore poisoning.
        self.events
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The configuration this unit of work writes with.
    pub fn outbox(&self) -> &Outbox {
        &self.outbox
    }

    /// The correlation id stamped on every envelope.
    pub fn correlation_id(&self) -> Uuid {
        self.correlation_id
    }

    /// Replaces the correlation id.
    pub fn set_correlation_id(&mut self, id: Uuid) {
        self.correlation_id = id;
    }

    /// The causation id stamped on every envelope (the incoming message of a consumer).
    pub fn causation_id(&self) -> Option<Uuid> {
        self.causation_id
    }

    /// The trace context stamped on every envelope.
    pub fn trace_context(&self) -> Option<&TraceContext> {
        self.trace.as_ref()
    }

    /// Replaces the trace context.
    pub fn set_trace_context(&mut self, context: Option<TraceContext>) {
        self.trace = context;
    }

    /// Number of domain events raised so far.
    pub fn pending_events(&self) -> usize {
        self.buffer().len()
    }

    /// Records the first failed statement run through the unit of work (see the
    /// [module documentation](self)); passes the result on.
    fn remember<T>(&self, result: Result<T, DbErr>) -> Result<T, DbErr> {
        if let Err(error) = &result {
            let mut failed = self
                .failed
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            if failed.is_none() {
                *failed = Some(error.to_string());
            }
        }
        result
    }

    /// Whether a statement run through the unit of work failed: [`commit`](Self::commit)
    /// will refuse.
    pub fn has_failed_statement(&self) -> bool {
        self.failed
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .is_some()
    }

    /// Rolls back the business changes and discards the raised events.
    ///
    /// # Errors
    /// The database's error when `ROLLBACK` fails (the connection then discards the
    /// transaction anyway).
    pub async fn rollback(self) -> Result<(), DbErr> {
        let discarded = self.buffer().len();
        tracing::debug!(discarded, "unit of work rolled back");
        self.txn.rollback().await
    }

    /// Maps the raised events to contracts, writes them to the outbox, commits, and requests
    /// a wake-up of listening relays on PostgreSQL ([`crate::wakeup`];
    /// [`CommitReport::wakeup`] says which). See the [module documentation](self).
    ///
    /// A failed after-commit `NOTIFY` is never returned: it is logged, counted in
    /// [`Outbox::wakeup_stats`], and relays find the rows at their next poll.
    ///
    /// # Errors
    /// A [`CommitError`]; except for [`CommitError::Commit`], the transaction was rolled back
    /// and nothing was written. [`CommitError::StatementFailed`] when a statement run through
    /// the unit of work failed, even if the caller caught that error.
    pub async fn commit(self) -> Result<CommitReport, CommitError> {
        let UnitOfWork {
            txn,
            outbox,
            mapper,
            events,
            correlation_id,
            causation_id,
            trace,
            headers,
            wakeup,
            nested_wrote,
            failed,
        } = self;
        let failed = failed
            .into_inner()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(error) = failed {
            tracing::warn!(%error, "unit of work not committed: a statement run through it failed");
            if let Err(rollback) = txn.rollback().await {
                tracing::warn!(error = %rollback, "rollback after a failed statement failed");
            }
            return Err(CommitError::StatementFailed { error });
        }
        let events = events
            .into_inner()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let span = tracing::info_span!(
            "outbox.commit",
            outbox.table = %outbox.outbox_table(),
            outbox.events = events.len(),
            outbox.rows = tracing::field::Empty,
            outbox.chunks = tracing::field::Empty,
            outbox.correlation_id = %correlation_id,
        );
        async move {
            let stamp = Stamp {
                correlation_id,
                causation_id,
                trace,
                headers,
            };
            match write_events(&txn, &outbox, mapper.get(), &events, stamp).await {
                Ok(mut report) => {
                    txn.commit().await.map_err(CommitError::Commit)?;
                    let wrote = report.rows > 0
                        || nested_wrote.is_some_and(|flag| flag.load(Ordering::Acquire));
                    if wrote {
                        match wakeup {
                            Target::None => {}
                            Target::Pool(db) => {
                                outbox.notifier().signal(db);
                                report.wakeup = CommitWakeup::AfterCommit;
                            }
                            Target::Enclosing(flag) => {
                                flag.store(true, Ordering::Release);
                                report.wakeup = CommitWakeup::Enclosing;
                            }
                        }
                    }
                    let span = tracing::Span::current();
                    span.record("outbox.rows", report.rows);
                    span.record("outbox.chunks", report.chunks);
                    tracing::debug!(
                        rows = report.rows,
                        chunks = report.chunks,
                        "unit of work committed"
                    );
                    Ok(report)
                }
                Err(error) => {
                    tracing::debug!(%error, "unit of work rolled back before commit");
                    if let Err(rollback) = txn.rollback().await {
                        tracing::warn!(error = %rollback, "rollback after a failed commit failed");
                    }
                    Err(error)
                }
            }
        }
        .instrument(span)
        .await
    }
}

/// The metadata a unit of work puts on every envelope.
struct Stamp {
    correlation_id: Uuid,
    causation_id: Option<Uuid>,
    trace: Option<TraceContext>,
    headers: BTreeMap<String, String>,
}

impl Stamp {
    fn apply(&self, envelope: &mut Envelope) {
        envelope.correlation_id = Some(self.correlation_id);
        envelope.causation_id = self.causation_id;
        if let Some(trace) = &self.trace {
            envelope.traceparent = Some(trace.traceparent().to_owned());
            envelope.tracestate = trace.tracestate().map(str::to_owned);
        }
        for (name, value) in &self.headers {
            envelope
                .headers
                .entry(name.clone())
                .or_insert_with(|| value.clone());
        }
    }
}

async fn write_events<E>(
    txn: &DatabaseTransaction,
    outbox: &Outbox,
    mapper: &dyn ContractMapper<E>,
    events: &[Raised<E>],
    stamp: Stamp,
) -> Result<CommitReport, CommitError> {
    let mut envelopes = Vec::with_capacity(events.len());
    for (index, raised) in events.iter().enumerate() {
        let clock = RaisedAt(raised.at);
        let mut sink = ContractSink::new(outbox.envelope_config(), &clock);
        mapper
            .map(&raised.event, &mut sink)
            .map_err(|source| CommitError::Map {
                index,
                event_type: std::any::type_name::<E>(),
                source,
            })?;
        envelopes.extend(sink.into_envelopes());
    }
    let backend = ConnectionTrait::get_database_backend(txn);
    let created_at = outbox.clock().now();
    let mut message_ids = Vec::with_capacity(envelopes.len());
    let mut rows = Vec::with_capacity(envelopes.len());
    for mut envelope in envelopes {
        stamp.apply(&mut envelope);
        message_ids.push(envelope.message_id);
        rows.push(insert::prepare(backend, outbox, envelope, created_at)?);
    }
    let row_count = rows.len();
    let notify_channel = outbox
        .in_transaction_channel()
        .filter(|_| backend == DbBackend::Postgres);
    let (chunks, wakeup) = if row_count == 0 {
        (0, CommitWakeup::None)
    } else {
        let chunks = insert::insert(txn, outbox, rows, notify_channel)
            .await
            .map_err(CommitError::Database)?;
        let wakeup = match notify_channel {
            Some(_) => CommitWakeup::InTransaction,
            None => CommitWakeup::None,
        };
        (chunks, wakeup)
    };
    Ok(CommitReport {
        events: events.len(),
        rows: row_count,
        chunks,
        wakeup,
        message_ids,
    })
}

impl<E: 'static> Raise<E> for UnitOfWork<E> {
    /// Buffers `event` until [`commit`](UnitOfWork::commit).
    fn raise(&self, event: E) {
        let at = self.outbox.clock().now();
        self.buffer().push(Raised { event, at });
    }
}

impl<E: 'static> fmt::Debug for UnitOfWork<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UnitOfWork")
            .field("outbox_table", &self.outbox.outbox_table().to_string())
            .field("backend", &ConnectionTrait::get_database_backend(&self.txn))
            .field("pending_events", &self.pending_events())
            .field("correlation_id", &self.correlation_id)
            .field("causation_id", &self.causation_id)
            .field("trace", &self.trace)
            .finish_non_exhaustive()
    }
}

impl<E: 'static> fmt::Debug for UnitOfWorkBuilder<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UnitOfWorkBuilder")
            .field("outbox_table", &self.outbox.outbox_table().to_string())
            .field("correlation_id", &self.correlation_id)
            .field("causation_id", &self.causation_id)
            .finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl<E: Send + 'static> ConnectionTrait for UnitOfWork<E> {
    fn get_database_backend(&self) -> DbBackend {
        ConnectionTrait::get_database_backend(&self.txn)
    }

    async fn execute_raw(&self, stmt: Statement) -> Result<ExecResult, DbErr> {
        let result = self.txn.execute_raw(stmt).await;
        self.remember(result)
    }

    async fn execute_unprepared(&self, sql: &str) -> Result<ExecResult, DbErr> {
        let result = self.txn.execute_unprepared(sql).await;
        self.remember(result)
    }

    async fn query_one_raw(&self, stmt: Statement) -> Result<Option<QueryResult>, DbErr> {
        let result = self.txn.query_one_raw(stmt).await;
        self.remember(result)
    }

    async fn query_all_raw(&self, stmt: Statement) -> Result<Vec<QueryResult>, DbErr> {
        let result = self.txn.query_all_raw(stmt).await;
        self.remember(result)
    }

    fn support_returning(&self) -> bool {
        self.txn.support_returning()
    }

    fn is_mock_connection(&self) -> bool {
        self.txn.is_mock_connection()
    }
}

impl<E: Send + 'static> StreamTrait for UnitOfWork<E> {
    type Stream<'a>
        = TransactionStream<'a>
    where
        Self: 'a;

    fn get_database_backend(&self) -> DbBackend {
        ConnectionTrait::get_database_backend(&self.txn)
    }

    fn stream_raw<'a>(
        &'a self,
        stmt: Statement,
    ) -> Pin<Box<dyn Future<Output = Result<Self::Stream<'a>, DbErr>> + 'a + Send>> {
        Box::pin(async move {
            let result = self.txn.stream_raw(stmt).await;
            self.remember(result)
        })
    }
}

/// Nested transactions are savepoints of the unit of work's transaction. They are plain
/// [`DatabaseTransaction`]s: run business statements on them, but raise events on the unit
/// of work (they are written when it commits, whatever happened to the savepoint).
#[async_trait::async_trait]
impl<E: Send + 'static> TransactionTrait for UnitOfWork<E> {
    type Transaction = DatabaseTransaction;

    async fn begin(&self) -> Result<DatabaseTransaction, DbErr> {
        self.txn.begin().await
    }

    async fn begin_with_config(
        &self,
        isolation_level: Option<IsolationLevel>,
        access_mode: Option<AccessMode>,
    ) -> Result<DatabaseTransaction, DbErr> {
        self.txn
            .begin_with_config(isolation_level, access_mode)
            .await
    }

    async fn begin_with_options(
        &self,
        options: TransactionOptions,
    ) -> Result<DatabaseTransaction, DbErr> {
        self.txn.begin_with_options(options).await
    }

    async fn transaction<F, T, Er>(&self, callback: F) -> Result<T, sea_orm::TransactionError<Er>>
    where
        F: for<'c> FnOnce(
                &'c DatabaseTransaction,
            ) -> Pin<Box<dyn Future<Output = Result<T, Er>> + Send + 'c>>
            + Send,
        T: Send,
        Er: std::fmt::Display + std::fmt::Debug + Send,
    {
        self.txn.transaction(callback).await
    }

    async fn transaction_with_config<F, T, Er>(
        &self,
        callback: F,
        isolation_level: Option<IsolationLevel>,
        access_mode: Option<AccessMode>,
    ) -> Result<T, sea_orm::TransactionError<Er>>
    where
        F: for<'c> FnOnce(
                &'c DatabaseTransaction,
            ) -> Pin<Box<dyn Future<Output = Result<T, Er>> + Send + 'c>>
            + Send,
        T: Send,
        Er: std::fmt::Display + std::fmt::Debug + Send,
    {
        self.txn
            .transaction_with_config(callback, isolation_level, access_mode)
            .await
    }
}
