//! A unit of work as a SeaORM connection: what it can begin on ([`UnitOfWorkConnection`]),
//! and SeaORM's connection, stream and transaction traits on [`UnitOfWork`], every statement
//! running on its transaction.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use sea_orm::{
    AccessMode, ConnectionTrait, DatabaseConnection, DatabaseExecutor, DatabaseTransaction,
    DbBackend, DbErr, ExecResult, IsolationLevel, QueryResult, Statement, StreamTrait,
    TransactionOptions, TransactionStream, TransactionTrait,
};

use super::UnitOfWork;
use crate::wakeup::{Target, WakeupTarget};

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

    /// Begins the transaction of a unit of work on this connection. Default:
    /// [`TransactionTrait::begin_with_options`].
    ///
    /// A pool ([`DatabaseConnection`], or a [`DatabaseExecutor`] holding one) runs its
    /// `BEGIN` on a task of its own instead, so that a unit of work whose future is dropped
    /// while `BEGIN` is in flight (a timeout, a `select!`, an aborted request handler) cannot
    /// hand the connection back to the pool inside a transaction nobody owns, where the
    /// next user's statements would run uncommitted. A wrapper of a pool should delegate
    /// this method to the pool's.
    fn begin_unit_of_work(
        &self,
        options: TransactionOptions,
    ) -> impl Future<Output = Result<DatabaseTransaction, DbErr>> + Send {
        self.begin_with_options(options)
    }
}

/// Notifies on this pool; begins on a task of its own.
impl UnitOfWorkConnection for DatabaseConnection {
    fn wakeup_target(&self) -> WakeupTarget {
        WakeupTarget::pool(self)
    }

    async fn begin_unit_of_work(
        &self,
        options: TransactionOptions,
    ) -> Result<DatabaseTransaction, DbErr> {
        crate::transaction::begin_whole(self, options).await
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

    async fn begin_unit_of_work(
        &self,
        options: TransactionOptions,
    ) -> Result<DatabaseTransaction, DbErr> {
        match self {
            DatabaseExecutor::Connection(db) => db.begin_unit_of_work(options).await,
            _ => self.begin_with_options(options).await,
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

#[async_trait::async_trait]
impl<E: Send + 'static> ConnectionTrait for UnitOfWork<E> {
    fn get_database_backend(&self) -> DbBackend {
        ConnectionTrait::get_database_backend(self.txn.get())
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
        self.txn.get().support_returning()
    }

    fn is_mock_connection(&self) -> bool {
        self.txn.get().is_mock_connection()
    }
}

impl<E: Send + 'static> StreamTrait for UnitOfWork<E> {
    type Stream<'a>
        = TransactionStream<'a>
    where
        Self: 'a;

    fn get_database_backend(&self) -> DbBackend {
        ConnectionTrait::get_database_backend(self.txn.get())
    }

    fn stream_raw<'a>(
        &'a self,
        stmt: Statement,
    ) -> Pin<Box<dyn Future<Output = Result<Self::Stream<'a>, DbErr>> + 'a + Send>> {
        Box::pin(async move {
            let result = self.txn.get().stream_raw(stmt).await;
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
        self.txn.get().begin().await
    }

    async fn begin_with_config(
        &self,
        isolation_level: Option<IsolationLevel>,
        access_mode: Option<AccessMode>,
    ) -> Result<DatabaseTransaction, DbErr> {
        self.txn
            .get()
            .begin_with_config(isolation_level, access_mode)
            .await
    }

    async fn begin_with_options(
        &self,
        options: TransactionOptions,
    ) -> Result<DatabaseTransaction, DbErr> {
        self.txn.get().begin_with_options(options).await
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
        self.txn.get().transaction(callback).await
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
            .get()
            .transaction_with_config(callback, isolation_level, access_mode)
            .await
    }
}
