//! Opening a transaction on a pool so that a cancelled caller cannot leave one open on a
//! pooled connection: the relay's, the operations', the inbox's and every unit of work's
//! begun on a pool ([`crate::unit_of_work::UnitOfWorkConnection::begin_unit_of_work`]).

use sea_orm::{
    DatabaseConnection, DatabaseTransaction, DbErr, IsolationLevel, TransactionOptions,
    TransactionTrait,
};

/// Opens a transaction on a task of its own, so that its `BEGIN` cannot be cancelled
/// half-way.
///
/// sqlx counts a transaction only once its `BEGIN` has returned. A future dropped while
/// `BEGIN` is in flight (an aborted relay task, a `select!` or a timeout around a batch)
/// hands the connection back to the pool inside a transaction nobody knows about: the
/// statements that later run on that connection without a transaction of their own (a
/// lease `UPDATE` of the next relay, say) run in it and keep their locks until the
/// connection is reused with `BEGIN` or closed. Seen in CI as a 50 s MariaDB lock wait
/// after a relay was aborted, and as PostgreSQL's notice "there is already a transaction
/// in progress". On a task of its own the `BEGIN` completes; a transaction nobody awaits
/// any more is dropped there, which rolls it back.
///
/// Seen in `tests/tests/cancellation.rs` for users' transactions too: a unit of work dropped
/// after its `BEGIN` was sent left the next user's autocommit `INSERT` uncommitted, on
/// PostgreSQL and on MariaDB (sqlx 0.9 only rolls back a cancelled `BEGIN` when it opens a
/// savepoint).
pub(crate) async fn begin_whole(
    db: &impl SeaOrmPool,
    options: TransactionOptions,
) -> Result<DatabaseTransaction, DbErr> {
    let db = db.sea_orm_pool().clone();
    tokio::spawn(async move { db.begin_with_options(options).await })
        .await
        .map_err(|error| DbErr::Custom(format!("opening a transaction: {error}")))?
}

/// [`begin_whole`] at an isolation level (`None`: the database's default).
pub(crate) async fn begin_whole_at(
    db: &impl SeaOrmPool,
    isolation: Option<IsolationLevel>,
) -> Result<DatabaseTransaction, DbErr> {
    let options = TransactionOptions {
        isolation_level: isolation,
        ..TransactionOptions::default()
    };
    begin_whole(db, options).await
}

/// What a transaction can be begun on: a SeaORM pool, or the engines' [`Pool`] around one.
pub(crate) trait SeaOrmPool {
    /// The SeaORM pool.
    fn sea_orm_pool(&self) -> &DatabaseConnection;
}

impl SeaOrmPool for DatabaseConnection {
    fn sea_orm_pool(&self) -> &DatabaseConnection {
        self
    }
}
