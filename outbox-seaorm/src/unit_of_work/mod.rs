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

mod builder;
mod commit;
mod connection;
mod mapper;
mod unique;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard};

use chrono::{DateTime, Utc};
use outbox_core::clock::Clock;
use outbox_core::schedule::Schedule;
use outbox_core::{Raise, RaiseLater};
#[cfg(doc)]
use sea_orm::DatabaseTransaction;
use sea_orm::{ConnectionTrait, DbErr};
use uuid::Uuid;

use crate::config::Outbox;
#[cfg(doc)]
use crate::error::CommitError;
use crate::trace::TraceContext;
use crate::transaction::TaskTransaction;
use crate::wakeup::Target;
#[cfg(doc)]
use outbox_core::mapping::ContractMapper;
#[cfg(doc)]
use sea_orm::{StreamTrait, TransactionTrait};

pub use builder::UnitOfWorkBuilder;
pub use commit::{CommitReport, CommitWakeup};
pub use connection::UnitOfWorkConnection;
pub use mapper::MapperRef;
pub use unique::AlreadyEnqueued;

/// A business transaction with an event buffer. See the [module documentation](self).
///
/// `E` is the domain event type. The unit of work shares the [`Outbox`] configuration and
/// the mapper ([`MapperRef`]) instead of borrowing them, so it has no lifetime parameter:
/// closures taking `&UnitOfWork<E>` then have a single lifetime, which rustc needs to see
/// the future of [`UnitOfWorkBuilder::transaction`] as `Send` (with a lifetime parameter,
/// spawning it fails with "implementation of `AsyncFnOnce` is not general enough").
pub struct UnitOfWork<E: 'static = outbox_core::mapping::NoEvents> {
    /// Every statement and the `COMMIT` run on tasks of their own: a caller dropped at any
    /// await point leaves the pooled connection clean ([`crate::transaction`]).
    txn: TaskTransaction,
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

/// A buffered domain event and the configured clock's time when it was raised: the
/// `occurred_at` of the contracts it maps to.
pub(super) struct Raised<E> {
    pub(super) event: E,
    pub(super) at: DateTime<Utc>,
    /// When the event is due, if later than at commit ([`RaiseLater`]).
    pub(super) schedule: Option<Schedule>,
}

/// A clock stopped at one instant: makes a [`ContractSink`] stamp the raise time.
#[derive(Debug)]
pub(super) struct RaisedAt(pub(super) DateTime<Utc>);

impl Clock for RaisedAt {
    fn now(&self) -> DateTime<Utc> {
        self.0
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
}

impl<E: 'static> Raise<E> for UnitOfWork<E> {
    /// Buffers `event` until [`commit`](UnitOfWork::commit).
    fn raise(&self, event: E) {
        let at = self.outbox.clock().now();
        self.buffer().push(Raised {
            event,
            at,
            schedule: None,
        });
    }
}

impl<E: 'static> RaiseLater<E> for UnitOfWork<E> {
    /// Buffers `event` until [`commit`](UnitOfWork::commit), which writes its contracts due
    /// when `schedule` says (see [`crate::schedule`]).
    fn raise_scheduled(&self, event: E, schedule: Schedule) {
        let at = self.outbox.clock().now();
        self.buffer().push(Raised {
            event,
            at,
            schedule: Some(schedule),
        });
    }
}

impl<E: 'static> fmt::Debug for UnitOfWork<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UnitOfWork")
            .field("outbox_table", &self.outbox.outbox_table().to_string())
            .field(
                "backend",
                &ConnectionTrait::get_database_backend(self.txn.get()),
            )
            .field("pending_events", &self.pending_events())
            .field("correlation_id", &self.correlation_id)
            .field("causation_id", &self.causation_id)
            .field("trace", &self.trace)
            .finish_non_exhaustive()
    }
}
