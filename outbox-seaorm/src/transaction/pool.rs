//! [`Pool`]: the database pool as the relay, the inbox and the operations use it — a
//! SeaORM pool that, behind a transaction pooler, runs each statement outside a
//! transaction in a transaction of its own.
//!
//! Behind PgBouncer in `pool_mode = transaction`, a client holds a server connection only
//! from `BEGIN` to `COMMIT`, or for one statement outside a transaction, which ends at the
//! protocol's `Sync`. sqlx sends a statement with parameters as two exchanges, each ending
//! in a `Sync`: `Parse` (and `Describe`), then `Bind` and `Execute`. Outside a transaction
//! the pooler may give the second exchange another server connection, one that has never
//! seen the statement — or, worse, has another client's statement of that name. Inside a
//! transaction both exchanges go to the same server connection. So with
//! [`OutboxBuilder::transaction_pooling`](crate::OutboxBuilder::transaction_pooling) every
//! statement of the engines outside a transaction runs as `BEGIN`, the statement, `COMMIT`
//! (two more round trips); without it the pool is used as it is.

use sea_orm::{
    ConnectionTrait, DatabaseConnection, DatabaseTransaction, DbBackend, DbErr, ExecResult,
    QueryResult, Statement, TransactionOptions,
};

use super::begin::{SeaOrmPool, begin_whole};
use crate::budget::{BudgetSeat, SeatGuard};

/// A SeaORM pool, with a transaction around each statement outside one when it sits
/// behind a transaction pooler (see the [module documentation](self)).
#[derive(Debug, Clone)]
pub(crate) struct Pool {
    db: DatabaseConnection,
    transaction_pooling: bool,
    /// Its seat in a server's connection budget, if it has one.
    seat: Option<BudgetSeat>,
}

impl Pool {
    /// `db`, behind a transaction pooler or not.
    pub(crate) fn new(db: DatabaseConnection, transaction_pooling: bool) -> Self {
        Self {
            db,
            transaction_pooling,
            seat: None,
        }
    }

    /// The same pool, holding connections only while `seat` is open (see
    /// [`crate::budget`]).
    pub(crate) fn with_seat(mut self, seat: Option<BudgetSeat>) -> Self {
        if let Some(seat) = &seat {
            seat.attach(&self.db);
        }
        self.seat = seat;
        self
    }

    /// Whether it holds connections only while its budget seat is open.
    pub(crate) fn budgeted(&self) -> bool {
        self.seat.is_some()
    }

    /// Waits for its seat to open, when it has one: hold the guard while using the pool
    /// (a turn of the relay, a transaction).
    pub(crate) async fn enter(&self) -> Option<SeatGuard> {
        match &self.seat {
            Some(seat) => Some(seat.enter().await),
            None => None,
        }
    }

    /// The SeaORM pool itself (its statements outside a transaction run as they are;
    /// transactions begin on it).
    pub(crate) fn connection(&self) -> &DatabaseConnection {
        &self.db
    }

    /// Whether it sits behind a transaction pooler.
    pub(crate) fn transaction_pooling(&self) -> bool {
        self.transaction_pooling
    }

    /// The transaction of one statement, behind a transaction pooler; `None` otherwise.
    async fn statement_transaction(&self) -> Result<Option<DatabaseTransaction>, DbErr> {
        if !self.transaction_pooling {
            return Ok(None);
        }
        begin_whole(&self.db, TransactionOptions::default())
            .await
            .map(Some)
    }
}

/// `$call` on the pool, or in a transaction of its own behind a transaction pooler.
macro_rules! each_in_a_transaction {
    ($pool:expr, $conn:ident => $call:expr) => {{
        let _seat = $pool.enter().await;
        match $pool.statement_transaction().await? {
            None => {
                let $conn = &$pool.db;
                $call.await
            }
            Some(txn) => {
                let $conn = &txn;
                let result = $call.await?;
                txn.commit().await?;
                Ok(result)
            }
        }
    }};
}

impl SeaOrmPool for Pool {
    fn sea_orm_pool(&self) -> &DatabaseConnection {
        &self.db
    }
}

#[async_trait::async_trait]
impl ConnectionTrait for Pool {
    fn get_database_backend(&self) -> DbBackend {
        self.db.get_database_backend()
    }

    async fn execute_raw(&self, stmt: Statement) -> Result<ExecResult, DbErr> {
        each_in_a_transaction!(self, conn => conn.execute_raw(stmt))
    }

    /// The simple protocol: one message, whole on one server connection.
    async fn execute_unprepared(&self, sql: &str) -> Result<ExecResult, DbErr> {
        let _seat = self.enter().await;
        self.db.execute_unprepared(sql).await
    }

    async fn query_one_raw(&self, stmt: Statement) -> Result<Option<QueryResult>, DbErr> {
        each_in_a_transaction!(self, conn => conn.query_one_raw(stmt))
    }

    async fn query_all_raw(&self, stmt: Statement) -> Result<Vec<QueryResult>, DbErr> {
        each_in_a_transaction!(self, conn => conn.query_all_raw(stmt))
    }

    fn support_returning(&self) -> bool {
        self.db.support_returning()
    }

    fn is_mock_connection(&self) -> bool {
        self.db.is_mock_connection()
    }
}
