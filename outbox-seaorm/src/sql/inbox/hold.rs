//! The aggregates a consumer holds, read from its parked messages and (under
//! [`DeadLetterPolicy::Block`](outbox_core::policy::DeadLetterPolicy::Block)) its `dead` or
//! `requeued` dead letters (see `inbox::hold`).

use sea_orm::{ConnectionTrait, DbErr};

use crate::config::Outbox;
use crate::sql::dialect::{self as sql, quote};
use crate::sql::statement::Sql;
use crate::table::TableName;

/// The distinct aggregates `(type, id)` of `consumer`'s parked messages and, with
/// `dead_letters`, of its `dead` or `requeued` dead letters.
pub(crate) async fn held_aggregates<C: ConnectionTrait>(
    db: &C,
    outbox: &Outbox,
    consumer: &str,
    dead_letters: bool,
) -> Result<Vec<(String, String)>, DbErr> {
    let tables = outbox.tables();
    let mut held = aggregates(db, &tables.parked, consumer, "").await?;
    if dead_letters {
        let q = |name: &str| quote(db.get_database_backend(), name);
        let holding = format!(
            " AND {} IN ('dead', 'requeued') AND {} IS NOT NULL AND {} IS NOT NULL",
            q("status"),
            q("aggregate_type"),
            q("aggregate_id")
        );
        held.extend(aggregates(db, &tables.dead_letters, consumer, &holding).await?);
    }
    Ok(held)
}

/// The distinct aggregates of `consumer`'s rows in `table` (the parked messages, or the
/// dead letters) that meet `condition` (appended SQL).
async fn aggregates<C: ConnectionTrait>(
    db: &C,
    table: &TableName,
    consumer: &str,
    condition: &str,
) -> Result<Vec<(String, String)>, DbErr> {
    let backend = db.get_database_backend();
    let q = |name: &str| quote(backend, name);
    let mut statement = Sql::new(backend);
    statement
        .push(&format!(
            "SELECT DISTINCT {} AS aggregate_type, {} AS aggregate_id FROM ",
            q("aggregate_type"),
            q("aggregate_id")
        ))
        .table(table)
        .push(&format!(" WHERE {} = ", q("consumer")))
        .bind(sql::text(consumer))
        .push(condition);
    db.query_all_raw(statement.build())
        .await?
        .iter()
        .map(|row| {
            Ok((
                row.try_get("", "aggregate_type")?,
                row.try_get("", "aggregate_id")?,
            ))
        })
        .collect()
}
