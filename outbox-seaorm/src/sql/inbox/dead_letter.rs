//! The consumers' dead-letter statements: insert, list, find, and the status transitions
//! (requeue, resolve, skip, fail again).

use sea_orm::{ConnectionTrait, DbBackend, DbErr, QueryResult};
use uuid::Uuid;

use crate::config::Outbox;
use crate::limits;
use crate::record::dead_letter::{ConsumerDeadLetter, DeadLetterStatus, StoredMessage};
use crate::sql::dialect::{self as sql, quote};
use crate::sql::statement::Sql;

/// What to write for a new dead letter.
pub(crate) struct NewDeadLetter<'a> {
    pub(crate) message_id: Option<Uuid>,
    pub(crate) consumer: &'a str,
    pub(crate) event_type: Option<&'a str>,
    pub(crate) aggregate: Option<(&'a str, &'a str)>,
    pub(crate) reason: &'static str,
    pub(crate) error: String,
    pub(crate) attempts: u32,
    pub(crate) message: StoredMessage,
}

/// A key value as the `varchar(255)` columns take it.
fn key(value: &str) -> String {
    value.chars().take(255).collect()
}

fn encode_message(message: &StoredMessage) -> Result<(&'static str, String), DbErr> {
    let json = |e: serde_json::Error| DbErr::Json(e.to_string());
    let encoded = match message {
        StoredMessage::Envelope(envelope) => (
            "envelope",
            serde_json::to_string(envelope.as_ref()).map_err(json)?,
        ),
        StoredMessage::Binary(raw) => ("binary", serde_json::to_string(raw).map_err(json)?),
    };
    Ok(encoded)
}

fn decode_message(format: &str, text: &str) -> Result<StoredMessage, DbErr> {
    let bad = |e: serde_json::Error| DbErr::Json(format!("dead letter message: {e}"));
    match format {
        "envelope" => Ok(StoredMessage::Envelope(Box::new(
            serde_json::from_str(text).map_err(bad)?,
        ))),
        "binary" => Ok(StoredMessage::Binary(
            serde_json::from_str(text).map_err(bad)?,
        )),
        other => Err(DbErr::Type(format!("unknown dead letter format `{other}`"))),
    }
}

/// Inserts a dead letter; returns its id.
pub(crate) async fn insert<C: ConnectionTrait>(
    db: &C,
    outbox: &Outbox,
    letter: NewDeadLetter<'_>,
) -> Result<i64, DbErr> {
    let backend = db.get_database_backend();
    let (format, message) = encode_message(&letter.message)?;
    let mut statement = Sql::new(backend);
    statement
        .push("INSERT INTO ")
        .table(&outbox.tables().dead_letters)
        .push(" (");
    let columns = [
        "message_id",
        "consumer",
        "event_type",
        "aggregate_type",
        "aggregate_id",
        "reason",
        "error",
        "attempts",
        "format",
        "message",
        "status",
        "dead_at",
    ];
    for (i, name) in columns.iter().enumerate() {
        if i > 0 {
            statement.push(", ");
        }
        statement.push(&quote(backend, name));
    }
    statement.push(") VALUES (");
    match letter.message_id {
        Some(id) => statement.bind(sql::uuid(backend, id)),
        None if backend == DbBackend::Postgres => statement.bind(sea_orm::Value::Uuid(None)),
        None => statement.bind(sql::opt_text(None)),
    };
    statement.push(", ");
    statement.bind(sql::text(letter.consumer)).push(", ");
    statement
        .bind(sql::opt_text(letter.event_type.map(key)))
        .push(", ");
    statement
        .bind(sql::opt_text(letter.aggregate.map(|(t, _)| key(t))))
        .push(", ");
    statement
        .bind(sql::opt_text(letter.aggregate.map(|(_, id)| key(id))))
        .push(", ");
    statement.bind(sql::text(letter.reason)).push(", ");
    statement
        .bind(sql::text(limits::error_text(&letter.error)))
        .push(", ");
    statement
        .bind(sea_orm::Value::Int(Some(
            i32::try_from(letter.attempts).unwrap_or(i32::MAX),
        )))
        .push(", ");
    statement.bind(sql::text(format)).push(", ");
    statement.bind(sql::text(message)).push(", ");
    statement
        .bind(sql::text(DeadLetterStatus::Dead.as_str()))
        .push(", ");
    statement
        .bind(sql::timestamp(backend, outbox.clock().now()))
        .push(")");
    if backend == DbBackend::MySql {
        // The id comes back with the INSERT's own result (the OK packet): a separate
        // `SELECT LAST_INSERT_ID()` may run on another pooled connection, and returns
        // `BIGINT UNSIGNED`, which does not decode as i64.
        let result = db.execute_raw(statement.build()).await?;
        return i64::try_from(result.last_insert_id())
            .map_err(|e| DbErr::Type(format!("dead letter id: {e}")));
    }
    statement.push(" RETURNING ").push(&quote(backend, "id"));
    let row = db
        .query_one_raw(statement.build())
        .await?
        .ok_or(DbErr::RecordNotInserted)?;
    sql::read_i64(&row, "id")
}

const SELECT_COLUMNS: [&str; 19] = [
    "id",
    "message_id",
    "consumer",
    "event_type",
    "aggregate_type",
    "aggregate_id",
    "reason",
    "error",
    "attempts",
    "format",
    "message",
    "status",
    "dead_at",
    "requeued_at",
    "requeued_by",
    "resolved_at",
    "skipped_at",
    "skipped_by",
    "skip_reason",
];

fn select(backend: DbBackend, outbox: &Outbox) -> Sql {
    let mut statement = Sql::new(backend);
    statement.push("SELECT ");
    for (i, name) in SELECT_COLUMNS.iter().enumerate() {
        if i > 0 {
            statement.push(", ");
        }
        statement.push(&quote(backend, name));
    }
    statement
        .push(" FROM ")
        .table(&outbox.tables().dead_letters);
    statement
}

fn read_row(row: &QueryResult) -> Result<ConsumerDeadLetter, DbErr> {
    let message_id = match row.try_get::<Option<String>>("", "message_id") {
        Ok(text) => text
            .map(|text| Uuid::parse_str(&text).map_err(|e| DbErr::Type(e.to_string())))
            .transpose()?,
        Err(_) => row.try_get::<Option<Uuid>>("", "message_id")?,
    };
    let format: String = row.try_get("", "format")?;
    let message: String = row.try_get("", "message")?;
    let status: String = row.try_get("", "status")?;
    Ok(ConsumerDeadLetter {
        id: sql::read_i64(row, "id")?,
        message_id,
        consumer: row.try_get("", "consumer")?,
        event_type: row.try_get("", "event_type")?,
        aggregate: match (
            row.try_get::<Option<String>>("", "aggregate_type")?,
            row.try_get::<Option<String>>("", "aggregate_id")?,
        ) {
            (Some(aggregate_type), Some(aggregate_id)) => Some((aggregate_type, aggregate_id)),
            _ => None,
        },
        reason: row.try_get("", "reason")?,
        error: row.try_get("", "error")?,
        attempts: u32::try_from(sql::read_i64(row, "attempts")?).unwrap_or(0),
        message: decode_message(&format, &message)?,
        status: DeadLetterStatus::parse(&status)
            .ok_or_else(|| DbErr::Type(format!("unknown dead letter status `{status}`")))?,
        dead_at: sql::read_timestamp(row, "dead_at")?
            .ok_or_else(|| DbErr::Type("dead letter `dead_at` is NULL".into()))?,
        requeued_at: sql::read_timestamp(row, "requeued_at")?,
        requeued_by: row.try_get("", "requeued_by")?,
        resolved_at: sql::read_timestamp(row, "resolved_at")?,
        skipped_at: sql::read_timestamp(row, "skipped_at")?,
        skipped_by: row.try_get("", "skipped_by")?,
        skip_reason: row.try_get("", "skip_reason")?,
    })
}

/// Dead letters, oldest first, filtered by consumer and status.
pub(crate) async fn list<C: ConnectionTrait>(
    db: &C,
    outbox: &Outbox,
    consumer: Option<&str>,
    status: Option<DeadLetterStatus>,
    limit: u64,
) -> Result<Vec<ConsumerDeadLetter>, DbErr> {
    let backend = db.get_database_backend();
    let mut statement = select(backend, outbox);
    statement.push(" WHERE 1 = 1");
    if let Some(consumer) = consumer {
        statement
            .push(" AND ")
            .push(&quote(backend, "consumer"))
            .push(" = ")
            .bind(sql::text(consumer));
    }
    if let Some(status) = status {
        statement
            .push(" AND ")
            .push(&quote(backend, "status"))
            .push(" = ")
            .bind(sql::text(status.as_str()));
    }
    statement
        .push(" ORDER BY ")
        .push(&quote(backend, "id"))
        .push(&format!(" LIMIT {limit}"));
    db.query_all_raw(statement.build())
        .await?
        .iter()
        .map(read_row)
        .collect()
}

/// One dead letter by id.
pub(crate) async fn find<C: ConnectionTrait>(
    db: &C,
    outbox: &Outbox,
    id: i64,
) -> Result<Option<ConsumerDeadLetter>, DbErr> {
    let backend = db.get_database_backend();
    let mut statement = select(backend, outbox);
    statement
        .push(" WHERE ")
        .push(&quote(backend, "id"))
        .push(" = ")
        .bind(sea_orm::Value::BigInt(Some(id)));
    db.query_one_raw(statement.build())
        .await?
        .as_ref()
        .map(read_row)
        .transpose()
}

/// Who moves a dead letter, and why (skips need a reason).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Actor<'a> {
    pub(crate) name: Option<&'a str>,
    pub(crate) reason: Option<&'a str>,
}

/// Moves a dead letter from `from` to `to`; returns whether it did.
pub(crate) async fn transition<C: ConnectionTrait>(
    db: &C,
    outbox: &Outbox,
    id: i64,
    from: DeadLetterStatus,
    to: DeadLetterStatus,
    actor: Actor<'_>,
) -> Result<bool, DbErr> {
    let backend = db.get_database_backend();
    let now = sql::timestamp(backend, outbox.clock().now());
    let mut statement = Sql::new(backend);
    statement
        .push("UPDATE ")
        .table(&outbox.tables().dead_letters)
        .push(" SET ")
        .push(&quote(backend, "status"))
        .push(" = ")
        .bind(sql::text(to.as_str()));
    match to {
        DeadLetterStatus::Requeued => {
            statement
                .push(", ")
                .push(&quote(backend, "requeued_at"))
                .push(" = ")
                .bind(now)
                .push(", ")
                .push(&quote(backend, "requeued_by"))
                .push(" = ")
                .bind(sql::opt_text(actor.name.map(key)));
        }
        DeadLetterStatus::Resolved => {
            statement
                .push(", ")
                .push(&quote(backend, "resolved_at"))
                .push(" = ")
                .bind(now);
        }
        DeadLetterStatus::Skipped => {
            statement
                .push(", ")
                .push(&quote(backend, "skipped_at"))
                .push(" = ")
                .bind(now)
                .push(", ")
                .push(&quote(backend, "skipped_by"))
                .push(" = ")
                .bind(sql::opt_text(actor.name.map(key)))
                .push(", ")
                .push(&quote(backend, "skip_reason"))
                .push(" = ")
                .bind(sql::opt_text(actor.reason.map(limits::error_text)));
        }
        DeadLetterStatus::Dead => {}
    }
    statement
        .push(" WHERE ")
        .push(&quote(backend, "id"))
        .push(" = ")
        .bind(sea_orm::Value::BigInt(Some(id)))
        .push(" AND ")
        .push(&quote(backend, "status"))
        .push(" = ")
        .bind(sql::text(from.as_str()));
    Ok(db.execute_raw(statement.build()).await?.rows_affected() == 1)
}

/// Records a failed redelivery of a requeued dead letter: back to `dead`, with the new
/// error and attempts added.
pub(crate) async fn fail_again<C: ConnectionTrait>(
    db: &C,
    outbox: &Outbox,
    id: i64,
    error: &str,
    attempts: u32,
) -> Result<(), DbErr> {
    let backend = db.get_database_backend();
    let q = |n: &str| quote(backend, n);
    let mut statement = Sql::new(backend);
    statement
        .push("UPDATE ")
        .table(&outbox.tables().dead_letters)
        .push(&format!(" SET {} = ", q("status")))
        .bind(sql::text(DeadLetterStatus::Dead.as_str()))
        .push(&format!(", {} = ", q("error")))
        .bind(sql::text(limits::error_text(error)))
        .push(&format!(", {0} = {0} + ", q("attempts")))
        .bind(sea_orm::Value::Int(Some(
            i32::try_from(attempts).unwrap_or(i32::MAX),
        )))
        .push(&format!(", {} = ", q("dead_at")))
        .bind(sql::timestamp(backend, outbox.clock().now()))
        .push(&format!(" WHERE {} = ", q("id")))
        .bind(sea_orm::Value::BigInt(Some(id)));
    db.execute_raw(statement.build()).await?;
    Ok(())
}
