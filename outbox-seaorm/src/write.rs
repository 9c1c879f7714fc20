//! Writing outbox rows. Private on purpose: the only caller is
//! [`UnitOfWork::commit`](crate::UnitOfWork::commit), so no public API writes an outbox row
//! outside the business transaction.

use chrono::{DateTime, Utc};
use outbox_core::Envelope;
use sea_orm::sea_query::{Alias, Expr, Query, Value};
use sea_orm::{ConnectionTrait, DatabaseTransaction, DbBackend, DbErr, Statement};
use uuid::Uuid;

use crate::config::Outbox;
use crate::error::CommitError;
use crate::partition::partition_of;
use crate::schema::{MAX_KEY_CHARS, OutboxStatus, table_ref};

/// Columns an insert binds per row.
const INSERT_COLUMNS: usize = 17;
/// Rough per-row overhead of the statement text and the protocol, in bytes.
const ROW_OVERHEAD_BYTES: usize = 256;

/// Most bind parameters one statement may carry on `backend`.
const fn max_bind_parameters(backend: DbBackend) -> usize {
    match backend {
        // PostgreSQL's wire protocol and MySQL's COM_STMT_PREPARE count parameters in u16.
        DbBackend::Postgres | DbBackend::MySql => 65_535,
        // SQLITE_MAX_VARIABLE_NUMBER's default since SQLite 3.32.
        _ => 32_766,
    }
}

/// Rows per `INSERT` on `backend`: the configured number, capped by the parameter limit.
pub(crate) fn rows_per_chunk(backend: DbBackend, configured: usize) -> usize {
    configured
        .min(max_bind_parameters(backend) / INSERT_COLUMNS)
        .max(1)
}

fn json_len(value: &serde_json::Value) -> usize {
    // Serializing a `Value` cannot fail.
    outbox_core::envelope::serialized_len(value).unwrap_or(0)
}

/// One row's bound values and its estimated size.
pub(crate) struct PreparedRow {
    values: Vec<Value>,
    bytes: usize,
}

/// How values are bound on one backend (see the column types in [`crate::schema`]).
#[derive(Clone, Copy)]
struct Binder(DbBackend);

impl Binder {
    fn uuid(self, id: Option<Uuid>) -> Value {
        match self.0 {
            DbBackend::Postgres => Value::Uuid(id),
            _ => Value::String(id.map(|id| id.hyphenated().to_string())),
        }
    }

    fn timestamp(self, at: DateTime<Utc>) -> Value {
        match self.0 {
            DbBackend::Postgres => Value::ChronoDateTimeUtc(Some(at)),
            DbBackend::MySql => Value::ChronoDateTime(Some(at.naive_utc())),
            _ => Value::String(Some(sqlite_timestamp(at))),
        }
    }

    fn json(self, value: serde_json::Value) -> (Value, usize) {
        match self.0 {
            DbBackend::Postgres => {
                let len = json_len(&value);
                (Value::Json(Some(Box::new(value))), len)
            }
            _ => {
                let text = value.to_string();
                let len = text.len();
                (Value::String(Some(text)), len)
            }
        }
    }
}

/// `YYYY-MM-DDTHH:MM:SS.ffffffZ`: fixed width, so text order is time order.
pub(crate) fn sqlite_timestamp(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

fn check_length(envelope: &Envelope, field: &'static str, value: &str) -> Result<(), CommitError> {
    // Cheap test first: a string of at most MAX_KEY_CHARS bytes has at most as many chars.
    if value.len() <= MAX_KEY_CHARS {
        return Ok(());
    }
    let length = value.chars().count();
    if length <= MAX_KEY_CHARS {
        return Ok(());
    }
    Err(CommitError::FieldTooLong {
        field,
        event_type: envelope.event_type.clone(),
        message_id: envelope.message_id,
        length,
        max: MAX_KEY_CHARS,
    })
}

/// Turns a stamped envelope into the values of one row.
pub(crate) fn prepare(
    backend: DbBackend,
    outbox: &Outbox,
    envelope: Envelope,
    created_at: DateTime<Utc>,
) -> Result<PreparedRow, CommitError> {
    check_length(&envelope, "event_type", &envelope.event_type)?;
    check_length(&envelope, "aggregate_type", &envelope.aggregate_type)?;
    check_length(&envelope, "aggregate_id", &envelope.aggregate_id)?;
    let bind = Binder(backend);
    let partition = partition_of(&envelope.aggregate_id, outbox.partitions());
    let Envelope {
        message_id,
        event_type,
        version,
        occurred_at,
        correlation_id,
        causation_id,
        traceparent,
        tracestate,
        aggregate_type,
        aggregate_id,
        headers,
        payload,
        ..
    } = envelope;
    let headers = serde_json::Value::Object(
        headers
            .into_iter()
            .map(|(name, value)| (name, serde_json::Value::String(value)))
            .collect(),
    );
    let (headers, headers_len) = bind.json(headers);
    let (payload, payload_len) = bind.json(payload);
    let bytes = ROW_OVERHEAD_BYTES
        + event_type.len()
        + aggregate_type.len()
        + aggregate_id.len()
        + traceparent.as_ref().map_or(0, String::len)
        + tracestate.as_ref().map_or(0, String::len)
        + headers_len
        + payload_len;
    let values = vec![
        bind.uuid(Some(message_id)),
        Value::String(Some(event_type)),
        // Versions come from `v<N>` with N parsed as u32; clamp rather than wrap.
        Value::Int(Some(i32::try_from(version).unwrap_or(i32::MAX))),
        Value::String(Some(aggregate_type)),
        Value::String(Some(aggregate_id)),
        Value::Int(Some(i32::try_from(partition).unwrap_or(0))),
        bind.uuid(correlation_id),
        bind.uuid(causation_id),
        Value::String(traceparent),
        Value::String(tracestate),
        headers,
        bind.timestamp(occurred_at),
        payload,
        Value::String(Some(OutboxStatus::Pending.as_str().to_owned())),
        Value::Int(Some(0)),
        bind.timestamp(created_at),
        bind.timestamp(created_at),
    ];
    debug_assert_eq!(values.len(), INSERT_COLUMNS);
    Ok(PreparedRow { values, bytes })
}

/// Splits rows into chunks of at most `max_rows` rows and, unless a single row is larger,
/// `max_bytes` estimated bytes.
pub(crate) fn chunk(
    rows: Vec<PreparedRow>,
    max_rows: usize,
    max_bytes: usize,
) -> Vec<Vec<PreparedRow>> {
    let mut chunks = Vec::new();
    let mut current: Vec<PreparedRow> = Vec::new();
    let mut current_bytes = 0;
    for row in rows {
        let full = current.len() >= max_rows || current_bytes + row.bytes > max_bytes;
        if full && !current.is_empty() {
            chunks.push(std::mem::take(&mut current));
            current_bytes = 0;
        }
        current_bytes += row.bytes;
        current.push(row);
    }
    if !current.is_empty() {
        chunks.push(current);
    }
    chunks
}

fn insert_statement(
    backend: DbBackend,
    outbox: &Outbox,
    rows: Vec<PreparedRow>,
) -> Result<Statement, DbErr> {
    let c = outbox.columns();
    let mut insert = Query::insert();
    insert.into_table(table_ref(outbox.outbox_table())).columns(
        [
            c.message_id,
            c.event_type,
            c.version,
            c.aggregate_type,
            c.aggregate_id,
            c.partition,
            c.correlation_id,
            c.causation_id,
            c.traceparent,
            c.tracestate,
            c.headers,
            c.occurred_at,
            c.payload,
            c.status,
            c.attempts,
            c.next_attempt_at,
            c.created_at,
        ]
        .map(Alias::new),
    );
    for row in rows {
        insert
            .values(row.values.into_iter().map(Expr::val))
            .map_err(|error| DbErr::Custom(format!("building the outbox insert: {error}")))?;
    }
    Ok(backend.build(&insert))
}

/// Inserts the rows on the transaction, one multi-row `INSERT` per chunk. With
/// `notify_channel` (PostgreSQL only), the last chunk's statement also notifies it (see
/// [`notify_with`]). Returns the number of statements executed.
pub(crate) async fn insert(
    txn: &DatabaseTransaction,
    outbox: &Outbox,
    rows: Vec<PreparedRow>,
    notify_channel: Option<&str>,
) -> Result<usize, DbErr> {
    let backend = txn.get_database_backend();
    let chunks = chunk(
        rows,
        rows_per_chunk(backend, outbox.chunk_rows()),
        outbox.chunk_bytes(),
    );
    let count = chunks.len();
    for (index, rows) in chunks.into_iter().enumerate() {
        let mut statement = insert_statement(backend, outbox, rows)?;
        if index + 1 == count
            && backend == DbBackend::Postgres
            && let Some(channel) = notify_channel
        {
            statement = notify_with(statement, channel);
        }
        txn.execute_raw(statement).await?;
    }
    Ok(count)
}

/// `WITH outbox_insert AS (<insert>) SELECT pg_notify('<channel>', '')`: the insert and the
/// notification in one statement, so one round trip. A data-modifying `WITH` runs to
/// completion even though the outer query does not read it; the notification is delivered
/// when (and only if) the transaction commits.
///
/// The channel is a validated identifier (`[A-Za-z_][A-Za-z0-9_]*`), written as a literal
/// rather than bound: the insert may already use all 65 535 bind parameters.
fn notify_with(statement: Statement, channel: &str) -> Statement {
    debug_assert!(
        channel
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
    );
    let channel = channel.replace('\'', "''");
    Statement {
        sql: format!(
            "WITH outbox_insert AS ({}) SELECT pg_notify('{channel}', '')",
            statement.sql
        ),
        ..statement
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(bytes: usize) -> PreparedRow {
        PreparedRow {
            values: Vec::new(),
            bytes,
        }
    }

    fn sizes(chunks: &[Vec<PreparedRow>]) -> Vec<usize> {
        chunks.iter().map(Vec::len).collect()
    }

    #[test]
    fn chunks_by_rows_and_bytes() {
        let rows = (0..10).map(|_| row(10)).collect();
        assert_eq!(sizes(&chunk(rows, 4, 1_000)), vec![4, 4, 2]);
        let rows = (0..10).map(|_| row(10)).collect();
        assert_eq!(sizes(&chunk(rows, 100, 35)), vec![3, 3, 3, 1]);
        // A row over the byte budget goes alone.
        let rows = vec![row(10), row(100), row(10)];
        assert_eq!(sizes(&chunk(rows, 100, 50)), vec![1, 1, 1]);
        assert!(chunk(Vec::new(), 10, 10).is_empty());
    }

    #[test]
    fn respects_bind_parameter_limits() {
        assert_eq!(rows_per_chunk(DbBackend::Postgres, 1_000_000), 65_535 / 17);
        assert_eq!(rows_per_chunk(DbBackend::Sqlite, 1_000_000), 32_766 / 17);
        assert_eq!(rows_per_chunk(DbBackend::MySql, 10), 10);
        assert!(rows_per_chunk(DbBackend::Postgres, 1_000_000) * INSERT_COLUMNS <= 65_535);
    }

    #[test]
    fn notify_wraps_the_insert_in_a_cte() {
        let insert = Statement::from_sql_and_values(
            DbBackend::Postgres,
            "INSERT INTO \"outbox\" (\"a\") VALUES ($1)",
            [Value::Int(Some(1))],
        );
        let statement = notify_with(insert, "outbox_pending");
        assert_eq!(
            statement.sql,
            "WITH outbox_insert AS (INSERT INTO \"outbox\" (\"a\") VALUES ($1)) \
             SELECT pg_notify('outbox_pending', '')"
        );
        assert_eq!(statement.values.map(|values| values.0.len()), Some(1));
    }

    #[test]
    fn sqlite_timestamps_are_fixed_width() {
        let at: DateTime<Utc> = "2026-01-02T03:04:05Z".parse().unwrap();
        assert_eq!(sqlite_timestamp(at), "2026-01-02T03:04:05.000000Z");
        let at: DateTime<Utc> = "2026-01-02T03:04:05.123456Z".parse().unwrap();
        assert_eq!(sqlite_timestamp(at), "2026-01-02T03:04:05.123456Z");
    }
}
