//! [`UnitOfWorkBuilder`]: the options of a unit of work before it begins, and the
//! [`Outbox`] methods that begin one.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use outbox_core::Envelope;
use sea_orm::{DbBackend, DbErr, SqliteTransactionMode, TransactionOptions};
use uuid::Uuid;

use super::UnitOfWork;
use super::connection::UnitOfWorkConnection;
use super::mapper::MapperRef;
use crate::config::Outbox;
use crate::error::UnitOfWorkError;
use crate::trace::TraceContext;
use crate::transaction::TaskTransaction;
use crate::wakeup::Target;

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
        let txn = db.begin_unit_of_work(options).await?;
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
            txn: TaskTransaction::new(txn),
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

impl<E: 'static> fmt::Debug for UnitOfWorkBuilder<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UnitOfWorkBuilder")
            .field("outbox_table", &self.outbox.outbox_table().to_string())
            .field("correlation_id", &self.correlation_id)
            .field("causation_id", &self.causation_id)
            .finish_non_exhaustive()
    }
}
