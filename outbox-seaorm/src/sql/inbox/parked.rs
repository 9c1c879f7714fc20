//! The consumers' parked-message statements: park, the heads of the aggregates, the next
//! message of one, list, delete, and the next attempt's time.

use chrono::{DateTime, Utc};
use outbox_core::Envelope;
use sea_orm::{ConnectionTrait, DbBackend, DbErr, QueryResult, Value};

use crate::config::Outbox;
use crate::limits;
use crate::record::parked::ParkedMessage;
use crate::sql::dialect::{self as sql, quote, quote_table};
use crate::sql::statement::Sql;

/// What to park.
pub(crate) struct NewParked<'a> {
    pub(crate) consumer: &'a str,
    pub(crate) envelope: &'a Envelope,
    pub(crate) attempts: u32,
    pub(crate) next_attempt_at: DateTime<Utc>,
    pub(crate) last_error: Option<&'a str>,
}

fn int(value: u32) -> Value {
    Value::Int(Some(i32::try_from(value).unwrap_or(i32::MAX)))
}

/// Parks a message; `false` when this consumer had already parked it (a redelivery).
pub(crate) async fn insert<C: ConnectionTrait>(
    db: &C,
    outbox: &Outbox,
    parked: NewParked<'_>,
) -> Result<bool, DbErr> {
    let backend = db.get_database_backend();
    let message = serde_json::to_string(parked.envelope).map_err(|e| DbErr::Json(e.to_string()))?;
    let envelope = parked.envelope;
    let mut statement = Sql::new(backend);
    statement.push(if backend == DbBackend::MySql {
        "INSERT IGNORE INTO "
    } else {
        "INSERT INTO "
    });
    statement.table(&outbox.tables().parked).push(" (");
    let columns = [
        "consumer",
        "aggregate_type",
        "aggregate_id",
        "message_id",
        "event_type",
        "message",
        "attempts",
        "next_attempt_at",
        "last_error",
        "parked_at",
    ];
    for (i, name) in columns.iter().enumerate() {
        if i > 0 {
            statement.push(", ");
        }
        statement.push(&quote(backend, name));
    }
    statement.push(") VALUES (");
    let values = [
        sql::text(parked.consumer),
        sql::text(envelope.aggregate_type.as_str()),
        sql::text(envelope.aggregate_id.as_str()),
        sql::uuid(backend, envelope.message_id),
        sql::text(envelope.event_type.as_str()),
        sql::text(message),
        int(parked.attempts),
        sql::timestamp(backend, parked.next_attempt_at),
        sql::opt_text(parked.last_error.map(limits::error_text)),
        sql::timestamp(backend, outbox.clock().now()),
    ];
    for (i, value) in values.into_iter().enumerate() {
        if i > 0 {
            statement.push(", ");
        }
        statement.bind(value);
    }
    statement.push(")");
    if backend != DbBackend::MySql {
        statement.push(" ON CONFLICT DO NOTHING");
    }
    Ok(db.execute_raw(statement.build()).await?.rows_affected() == 1)
}

const SELECT_COLUMNS: [&str; 10] = [
    "id",
    "consumer",
    "aggregate_type",
    "aggregate_id",
    "message",
    "attempts",
    "next_attempt_at",
    "last_error",
    "parked_at",
    "message_id",
];

fn select(backend: DbBackend, alias: &str) -> String {
    SELECT_COLUMNS
        .iter()
        .map(|name| format!("{alias}.{q} AS {q}", q = quote(backend, name)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn read_row(row: &QueryResult) -> Result<ParkedMessage, DbErr> {
    let message: String = row.try_get("", "message")?;
    let envelope: Envelope =
        serde_json::from_str(&message).map_err(|e| DbErr::Json(format!("parked message: {e}")))?;
    Ok(ParkedMessage {
        id: sql::read_i64(row, "id")?,
        consumer: row.try_get("", "consumer")?,
        aggregate: (
            row.try_get("", "aggregate_type")?,
            row.try_get("", "aggregate_id")?,
        ),
        envelope,
        attempts: u32::try_from(sql::read_i64(row, "attempts")?).unwrap_or(0),
        next_attempt_at: sql::read_timestamp(row, "next_attempt_at")?
            .ok_or_else(|| DbErr::Type("parked `next_attempt_at` is NULL".into()))?,
        last_error: row.try_get("", "last_error")?,
        parked_at: sql::read_timestamp(row, "parked_at")?
            .ok_or_else(|| DbErr::Type("parked `parked_at` is NULL".into()))?,
    })
}

/// The first parked message of each of `consumer`'s aggregates, oldest first, at most
/// `limit`; with `skip_held`, not those of aggregates a `dead` or `requeued` dead letter
/// holds.
pub(crate) async fn heads<C: ConnectionTrait>(
    db: &C,
    outbox: &Outbox,
    consumer: &str,
    skip_held: bool,
    limit: u64,
) -> Result<Vec<ParkedMessage>, DbErr> {
    let backend = db.get_database_backend();
    let q = |n: &str| quote(backend, n);
    let name = quote_table(backend, &outbox.tables().parked);
    let mut statement = Sql::new(backend);
    statement
        .push(&format!(
            "SELECT {} FROM {name} p WHERE p.{consumer} = ",
            select(backend, "p"),
            consumer = q("consumer")
        ))
        .bind(sql::text(consumer))
        .push(&format!(
            " AND NOT EXISTS (SELECT 1 FROM {name} b WHERE b.{consumer} = p.{consumer} \
             AND b.{at} = p.{at} AND b.{ai} = p.{ai} AND b.{id} < p.{id})",
            consumer = q("consumer"),
            at = q("aggregate_type"),
            ai = q("aggregate_id"),
            id = q("id"),
        ));
    if skip_held {
        statement.push(&format!(
            " AND NOT EXISTS (SELECT 1 FROM {letters} d WHERE d.{consumer} = p.{consumer} \
             AND d.{at} = p.{at} AND d.{ai} = p.{ai} AND d.{status} IN ('dead', 'requeued'))",
            letters = quote_table(backend, &outbox.tables().dead_letters),
            consumer = q("consumer"),
            at = q("aggregate_type"),
            ai = q("aggregate_id"),
            status = q("status"),
        ));
    }
    statement.push(&format!(" ORDER BY p.{} LIMIT {limit}", q("id")));
    db.query_all_raw(statement.build())
        .await?
        .iter()
        .map(read_row)
        .collect()
}

/// The parked message of `consumer`'s `aggregate` that follows `after`, if any.
pub(crate) async fn next_of<C: ConnectionTrait>(
    db: &C,
    outbox: &Outbox,
    consumer: &str,
    (aggregate_type, aggregate_id): (&str, &str),
    after: i64,
) -> Result<Option<ParkedMessage>, DbErr> {
    let backend = db.get_database_backend();
    let q = |n: &str| quote(backend, n);
    let mut statement = Sql::new(backend);
    statement
        .push(&format!(
            "SELECT {} FROM {} p WHERE p.{} = ",
            select(backend, "p"),
            quote_table(backend, &outbox.tables().parked),
            q("consumer")
        ))
        .bind(sql::text(consumer))
        .push(&format!(" AND p.{} = ", q("aggregate_type")))
        .bind(sql::text(aggregate_type))
        .push(&format!(" AND p.{} = ", q("aggregate_id")))
        .bind(sql::text(aggregate_id))
        .push(&format!(" AND p.{} > ", q("id")))
        .bind(Value::BigInt(Some(after)))
        .push(&format!(" ORDER BY p.{} LIMIT 1", q("id")));
    db.query_one_raw(statement.build())
        .await?
        .as_ref()
        .map(read_row)
        .transpose()
}

/// `consumer`'s parked messages, oldest first, at most `limit`.
pub(crate) async fn list<C: ConnectionTrait>(
    db: &C,
    outbox: &Outbox,
    consumer: Option<&str>,
    limit: u64,
) -> Result<Vec<ParkedMessage>, DbErr> {
    let backend = db.get_database_backend();
    let q = |n: &str| quote(backend, n);
    let mut statement = Sql::new(backend);
    statement.push(&format!(
        "SELECT {} FROM {} p WHERE 1 = 1",
        select(backend, "p"),
        quote_table(backend, &outbox.tables().parked),
    ));
    if let Some(consumer) = consumer {
        statement
            .push(&format!(" AND p.{} = ", q("consumer")))
            .bind(sql::text(consumer));
    }
    statement.push(&format!(" ORDER BY p.{} LIMIT {limit}", q("id")));
    db.query_all_raw(statement.build())
        .await?
        .iter()
        .map(read_row)
        .collect()
}

/// Removes a parked message (applied, or dead-lettered in the same transaction); whether
/// it was still there.
pub(crate) async fn delete<C: ConnectionTrait>(
    db: &C,
    outbox: &Outbox,
    id: i64,
) -> Result<bool, DbErr> {
    let backend = db.get_database_backend();
    let mut statement = Sql::new(backend);
    statement
        .push("DELETE FROM ")
        .table(&outbox.tables().parked)
        .push(&format!(" WHERE {} = ", quote(backend, "id")))
        .bind(Value::BigInt(Some(id)));
    Ok(db.execute_raw(statement.build()).await?.rows_affected() == 1)
}

/// Records a failed attempt of a parked message: its attempts, the next attempt's time
/// and the error.
pub(crate) async fn retry_at<C: ConnectionTrait>(
    db: &C,
    outbox: &Outbox,
    id: i64,
    attempts: u32,
    at: DateTime<Utc>,
    error: &str,
) -> Result<(), DbErr> {
    let backend = db.get_database_backend();
    let q = |n: &str| quote(backend, n);
    let mut statement = Sql::new(backend);
    statement
        .push("UPDATE ")
        .table(&outbox.tables().parked)
        .push(&format!(" SET {} = ", q("attempts")))
        .bind(int(attempts))
        .push(&format!(", {} = ", q("next_attempt_at")))
        .bind(sql::timestamp(backend, at))
        .push(&format!(", {} = ", q("last_error")))
        .bind(sql::text(limits::error_text(error)))
        .push(&format!(" WHERE {} = ", q("id")))
        .bind(Value::BigInt(Some(id)));
    db.execute_raw(statement.build()).await?;
    Ok(())
}
