//! [`TaskTransaction`]: a transaction whose statements each run on a task of their own.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use sea_orm::{
    ConnectionTrait, DatabaseTransaction, DbBackend, DbErr, ExecResult, QueryResult, Statement,
};

/// A transaction whose statements each run on a task of their own on MariaDB and MySQL, so
/// that a caller dropped while one is in flight leaves the connection between two
/// statements, never inside one (see the [module documentation](super)). The transaction
/// ends (commit, rollback, or a drop, which rolls back) once the last statement has
/// completed.
///
/// PostgreSQL's and SQLite's connections recover from a statement dropped half-way (sqlx
/// counts PostgreSQL's outstanding replies; SQLite's worker thread finishes each command;
/// both shown by `tests/tests/cancellation.rs`),
/// so there the statements run in the caller's task: a task per statement cost about a
/// tenth of a one-client unit of work's throughput on PostgreSQL (BENCHMARKS.md).
pub(crate) struct TaskTransaction {
    txn: Arc<DatabaseTransaction>,
    on_tasks: bool,
}

impl TaskTransaction {
    /// Takes `txn` over.
    pub(crate) fn new(txn: DatabaseTransaction) -> Self {
        let on_tasks = ConnectionTrait::get_database_backend(&txn) == DbBackend::MySql;
        Self {
            txn: Arc::new(txn),
            on_tasks,
        }
    }

    /// The transaction itself, for what cannot move to a task: streams (they borrow it),
    /// savepoints, the backend.
    pub(crate) fn get(&self) -> &DatabaseTransaction {
        &self.txn
    }

    /// Runs `statement` on the transaction, on a task of its own.
    async fn run<T, F, Fut>(&self, statement: F) -> Result<T, DbErr>
    where
        T: Send + 'static,
        F: FnOnce(Arc<DatabaseTransaction>) -> Fut,
        Fut: Future<Output = Result<T, DbErr>> + Send + 'static,
    {
        let statement = statement(Arc::clone(&self.txn));
        if self.on_tasks {
            join(tokio::spawn(statement)).await?
        } else {
            statement.await
        }
    }

    /// [`ConnectionTrait::execute_raw`] on a task of its own.
    pub(crate) async fn execute_raw(&self, stmt: Statement) -> Result<ExecResult, DbErr> {
        self.run(move |txn| async move { txn.execute_raw(stmt).await })
            .await
    }

    /// [`ConnectionTrait::execute_unprepared`] on a task of its own.
    pub(crate) async fn execute_unprepared(&self, sql: &str) -> Result<ExecResult, DbErr> {
        let sql = sql.to_owned();
        self.run(move |txn| async move { txn.execute_unprepared(&sql).await })
            .await
    }

    /// [`ConnectionTrait::query_one_raw`] on a task of its own.
    pub(crate) async fn query_one_raw(
        &self,
        stmt: Statement,
    ) -> Result<Option<QueryResult>, DbErr> {
        self.run(move |txn| async move { txn.query_one_raw(stmt).await })
            .await
    }

    /// [`ConnectionTrait::query_all_raw`] on a task of its own.
    pub(crate) async fn query_all_raw(&self, stmt: Statement) -> Result<Vec<QueryResult>, DbErr> {
        self.run(move |txn| async move { txn.query_all_raw(stmt).await })
            .await
    }

    /// Ends the transaction with `finish` (statements, then `COMMIT` or `ROLLBACK`) on a task
    /// of its own, once every statement still running (whose caller was dropped) has
    /// completed: dropping the returned future does not stop `finish`.
    ///
    /// # Errors
    /// [`DbErr::Custom`] when the task did not complete (the runtime is shutting down): the
    /// transaction's outcome is then unknown.
    pub(crate) async fn finish<T, F, Fut>(self, finish: F) -> Result<T, DbErr>
    where
        T: Send + 'static,
        F: FnOnce(DatabaseTransaction) -> Fut + Send + 'static,
        Fut: Future<Output = T> + Send,
    {
        let on_tasks = self.on_tasks;
        let finished = async move {
            let txn = self.into_inner().await;
            finish(txn).await
        };
        if on_tasks {
            join(tokio::spawn(finished)).await
        } else {
            Ok(finished.await)
        }
    }

    /// `ROLLBACK`, on a task of its own.
    pub(crate) async fn rollback(self) -> Result<(), DbErr> {
        self.finish(|txn| txn.rollback()).await?
    }

    /// The transaction, once no statement's task holds it any more. Such a task exists only
    /// when a caller was dropped mid-statement and its transaction is then still used: rare,
    /// and over within one round trip, so polling for it is enough.
    async fn into_inner(self) -> DatabaseTransaction {
        let mut txn = self.txn;
        loop {
            match Arc::try_unwrap(txn) {
                Ok(txn) => return txn,
                Err(shared) => {
                    txn = shared;
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
        }
    }
}

/// The output of a task; its panic goes on in the caller, and a task the runtime cancelled
/// (it is shutting down) is an error.
async fn join<T>(task: tokio::task::JoinHandle<T>) -> Result<T, DbErr> {
    match task.await {
        Ok(output) => Ok(output),
        Err(error) => match error.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            Err(error) => Err(DbErr::Custom(format!(
                "a transaction's task did not complete: {error}"
            ))),
        },
    }
}
