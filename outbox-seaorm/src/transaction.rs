//! Opening the relay's and the operations' transactions so that a cancelled caller cannot
//! leave one open on a pooled connection.

use sea_orm::{DatabaseConnection, DatabaseTransaction, DbErr, IsolationLevel, TransactionTrait};

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
pub(crate) async fn begin_whole(
    db: &DatabaseConnection,
    isolation: Option<IsolationLevel>,
) -> Result<DatabaseTransaction, DbErr> {
    let db = db.clone();
    tokio::spawn(async move { db.begin_with_config(isolation, None).await })
        .await
        .map_err(|error| DbErr::Custom(format!("opening a transaction: {error}")))?
}
