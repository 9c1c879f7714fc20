//! Writing outbox rows: the multi-row `INSERT` of a commit. Private on purpose: the only
//! caller is [`UnitOfWork::commit`](crate::UnitOfWork::commit), so no public API writes an
//! outbox row outside the business transaction.

use chrono::{DateTime, Utc};
use outbox_core::Envelope;
use sea_orm::sea_query::Value;
use sea_orm::{ConnectionTrait, DatabaseTransaction, DbBackend, DbErr, Statement};

use super::columns::{self, Column, INSERT_BOUND, Insert};
use super::dialect::{self, quote, quote_table};
use crate::backend::{InsertText, max_bind_parameters};
use crate::config::Outbox;
use crate::error::CommitError;
use crate::partition::partition_of;
use crate::status::{MAX_KEY_CHARS, OutboxStatus};

/// Bind parameters per row (every column [`Insert::Bound`]).
const INSERT_COLUMNS: usize = INSERT_BOUND;
/// Rough per-row overhead of the statement text and the protocol, in bytes.
const ROW_OVERHEAD_BYTES: usize = 256;

/// Rows per `INSERT` on `backend`: the configured number, capped by the parameter limit.
pub(crate) fn rows_per_chunk(backend: DbBackend, configured: usize) -> usize {
    configured
        .min(max_bind_parameters(backend) / INSERT_COLUMNS)
        .max(1)
}

/// One row's bound values and its estimated size.
pub(crate) struct PreparedRow {
    pub(super) values: Vec<Value>,
    pub(super) bytes: usize,
}

/// The key columns' limit ([`MAX_KEY_CHARS`]) on an envelope's event type, aggregate type
/// and aggregate id.
pub(crate) fn check_key_lengths(envelope: &Envelope) -> Result<(), CommitError> {
    check_length(envelope, "event_type", &envelope.event_type)?;
    check_length(envelope, "aggregate_type", &envelope.aggregate_type)?;
    check_length(envelope, "aggregate_id", &envelope.aggregate_id)
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

/// The headers as a JSON object of strings (`{}` when empty), serialized once.
fn headers_json(headers: &std::collections::BTreeMap<String, String>) -> String {
    if headers.is_empty() {
        return "{}".to_owned();
    }
    // A map of strings always serializes.
    serde_json::to_string(headers).unwrap_or_else(|_| "{}".to_owned())
}

/// Turns a stamped envelope into the values of one row.
///
/// JSON columns are bound as JSON **text**, serialized once here (cast to `jsonb` in the
/// statement on PostgreSQL): binding a `serde_json::Value` instead makes SeaORM deep-copy
/// the tree on every execution and sqlx serialize it again.
pub(crate) fn prepare(
    backend: DbBackend,
    outbox: &Outbox,
    envelope: Envelope,
    created_at: DateTime<Utc>,
) -> Result<PreparedRow, CommitError> {
    // A new row is due at once.
    prepare_due(backend, outbox, envelope, created_at, created_at)
}

/// [`prepare`] with `next_attempt_at` set to `due` (a scheduled row: the due time).
pub(crate) fn prepare_due(
    backend: DbBackend,
    outbox: &Outbox,
    envelope: Envelope,
    created_at: DateTime<Utc>,
    due: DateTime<Utc>,
) -> Result<PreparedRow, CommitError> {
    check_key_lengths(&envelope)?;
    // Job-queue columns, fixed at commit from the configuration (see `crate::job`).
    let (worker_key, retryable, priority) = match outbox.job(&envelope.event_type) {
        Some(job) => (
            job.worker_key_ref().map(str::to_owned),
            job.is_retryable(),
            job.priority_value(),
        ),
        None => (None, true, 0),
    };
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
    let headers = headers_json(&headers);
    // Already JSON text: stored as it is.
    let payload = payload.into_string();
    let bytes = ROW_OVERHEAD_BYTES
        + event_type.len()
        + aggregate_type.len()
        + aggregate_id.len()
        + traceparent.as_ref().map_or(0, String::len)
        + tracestate.as_ref().map_or(0, String::len)
        + headers.len()
        + payload.len();
    let mut row = RowValues {
        message_id: Some(dialect::uuid(backend, message_id)),
        event_type: Some(event_type),
        version,
        aggregate_type: Some(aggregate_type),
        aggregate_id: Some(aggregate_id),
        partition,
        correlation_id: correlation_id.map(|id| dialect::uuid(backend, id)),
        causation_id: causation_id.map(|id| dialect::uuid(backend, id)),
        traceparent,
        tracestate,
        headers: Some(headers),
        occurred_at: dialect::timestamp(backend, occurred_at),
        payload: Some(payload),
        next_attempt_at: dialect::timestamp(backend, due),
        created_at: dialect::timestamp(backend, created_at),
        worker_key,
        retryable,
        priority,
    };
    let values: Vec<Value> = ALL_BOUND
        .iter()
        .map(|&column| row.take(backend, column))
        .collect();
    debug_assert_eq!(values.len(), INSERT_COLUMNS);
    Ok(PreparedRow { values, bytes })
}

/// The bound columns of an `INSERT`, in order.
pub(super) const ALL_BOUND: [Column; INSERT_BOUND] = {
    let mut bound = [Column::Seq; INSERT_BOUND];
    let mut next = 0;
    let mut index = 0;
    while index < columns::ALL.len() {
        if matches!(columns::ALL[index].insert(), Insert::Bound) {
            bound[next] = columns::ALL[index];
            next += 1;
        }
        index += 1;
    }
    bound
};

/// One row's values, each taken once by [`take`](Self::take) in [`ALL_BOUND`]'s order.
struct RowValues {
    message_id: Option<Value>,
    event_type: Option<String>,
    version: u32,
    aggregate_type: Option<String>,
    aggregate_id: Option<String>,
    partition: u32,
    correlation_id: Option<Value>,
    causation_id: Option<Value>,
    traceparent: Option<String>,
    tracestate: Option<String>,
    headers: Option<String>,
    occurred_at: Value,
    payload: Option<String>,
    next_attempt_at: Value,
    created_at: Value,
    worker_key: Option<String>,
    retryable: bool,
    priority: u8,
}

impl RowValues {
    /// The value bound to `column`.
    fn take(&mut self, backend: DbBackend, column: Column) -> Value {
        let null_uuid = || dialect::opt_uuid(backend, None);
        match column {
            Column::MessageId => self.message_id.take().unwrap_or_else(null_uuid),
            Column::EventType => Value::String(self.event_type.take()),
            // Versions come from `v<N>` with N parsed as u32; clamp rather than wrap.
            Column::Version => Value::Int(Some(i32::try_from(self.version).unwrap_or(i32::MAX))),
            Column::AggregateType => Value::String(self.aggregate_type.take()),
            Column::AggregateId => Value::String(self.aggregate_id.take()),
            Column::Partition => Value::Int(Some(i32::try_from(self.partition).unwrap_or(0))),
            Column::CorrelationId => self.correlation_id.take().unwrap_or_else(null_uuid),
            Column::CausationId => self.causation_id.take().unwrap_or_else(null_uuid),
            Column::Traceparent => Value::String(self.traceparent.take()),
            Column::Tracestate => Value::String(self.tracestate.take()),
            Column::Headers => Value::String(self.headers.take()),
            Column::OccurredAt => self.occurred_at.clone(),
            Column::Payload => Value::String(self.payload.take()),
            Column::NextAttemptAt => self.next_attempt_at.clone(),
            Column::CreatedAt => self.created_at.clone(),
            Column::WorkerKey => Value::String(self.worker_key.take()),
            Column::Retryable => Value::Bool(Some(self.retryable)),
            Column::Priority => Value::Int(Some(i32::from(self.priority))),
            // Not bound (see `Column::insert`).
            Column::Seq
            | Column::Status
            | Column::Attempts
            | Column::LastError
            | Column::PublishedAt => Value::String(None),
        }
    }
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

/// The text of an `INSERT` of `rows` rows of `outbox` on `backend`. The text of one row is
/// built once per backend (table and column names are fixed by the configuration) and kept
/// on the `Outbox` ([`crate::backend::StatementCache`]): a commit only appends the
/// placeholders of a multi-row chunk, and a one-row commit (the common case) copies the
/// whole statement.
fn insert_text(backend: DbBackend, outbox: &Outbox, rows: usize) -> String {
    let sql = outbox.statements().outbox_insert.get_or_init(backend, || {
        let prefix = insert_prefix(backend, outbox);
        let mut one_row = prefix.clone();
        push_row(&mut one_row, backend, 0);
        InsertText { prefix, one_row }
    });
    if rows == 1 {
        return sql.one_row.clone();
    }
    let per_row = sql.one_row.len() - sql.prefix.len() + 2 * INSERT_COLUMNS;
    let mut text = String::with_capacity(sql.prefix.len() + rows * per_row);
    text.push_str(&sql.prefix);
    for row in 0..rows {
        if row > 0 {
            text.push_str(", ");
        }
        push_row(&mut text, backend, row * INSERT_COLUMNS);
    }
    text
}

/// `INSERT INTO <table> (<columns>) VALUES `.
fn insert_prefix(backend: DbBackend, outbox: &Outbox) -> String {
    let columns = columns::inserted()
        .map(|column| quote(backend, column.name(outbox.columns())))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "INSERT INTO {} ({columns}) VALUES ",
        quote_table(backend, outbox.outbox_table())
    )
}

/// Appends one row's placeholders, numbered from `first + 1` on PostgreSQL, in the order of
/// [`ALL_BOUND`], then the literals (`status`, `attempts`).
fn push_row(text: &mut String, backend: DbBackend, first: usize) {
    push_values(text, backend, first, 0, &LITERALS);
}

/// The literals of a new outbox row, in [`columns::ALL`]'s order (`status`, `attempts`;
/// a unit test checks them against [`Column::insert`]).
const LITERALS: [&str; 2] = [OutboxStatus::Pending.as_sql_literal(), "0"];

/// Appends one row's placeholders: those of [`ALL_BOUND`] and `extra` more, numbered from
/// `first + 1` on PostgreSQL, then `literals`.
pub(super) fn push_values(
    text: &mut String,
    backend: DbBackend,
    first: usize,
    extra: usize,
    literals: &[&str],
) {
    text.push('(');
    for (position, column) in ALL_BOUND.iter().enumerate() {
        if position > 0 {
            text.push_str(", ");
        }
        match backend {
            DbBackend::Postgres => {
                let json = column.is_json();
                if json {
                    text.push_str("CAST(");
                }
                text.push('$');
                push_number(text, first + position + 1);
                if json {
                    text.push_str(" AS jsonb)");
                }
            }
            _ => text.push('?'),
        }
    }
    for position in ALL_BOUND.len()..ALL_BOUND.len() + extra {
        text.push_str(", ");
        match backend {
            DbBackend::Postgres => {
                text.push('$');
                push_number(text, first + position + 1);
            }
            _ => text.push('?'),
        }
    }
    for literal in literals {
        text.push_str(", ");
        text.push_str(literal);
    }
    text.push(')');
}

fn push_number(text: &mut String, n: usize) {
    use std::fmt::Write as _;
    // Writing to a String cannot fail.
    let _ = write!(text, "{n}");
}

fn insert_statement(backend: DbBackend, outbox: &Outbox, rows: Vec<PreparedRow>) -> Statement {
    let sql = insert_text(backend, outbox, rows.len());
    let mut values = Vec::with_capacity(rows.len() * INSERT_COLUMNS);
    for row in rows {
        values.extend(row.values);
    }
    Statement::from_sql_and_values(backend, sql, values)
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
        let mut statement = insert_statement(backend, outbox, rows);
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

/// Deletes the rows of `message_ids` again ([`WriteMode::Table`](crate::config::WriteMode::Table)
/// with `remove_after_insert`): the inserts stay in the log (PostgreSQL's write-ahead log,
/// MariaDB's binlog) for the log relay, the table stays empty. PostgreSQL: one statement,
/// the ids bound as one `uuid[]` literal; MariaDB: `IN (…)` lists of at most
/// [`REMOVE_CHUNK`] ids.
pub(crate) async fn remove(
    txn: &DatabaseTransaction,
    outbox: &Outbox,
    backend: DbBackend,
    message_ids: &[uuid::Uuid],
) -> Result<(), DbErr> {
    let table = quote_table(backend, outbox.outbox_table());
    let column = quote(backend, outbox.columns().message_id);
    if backend != DbBackend::Postgres {
        for chunk in message_ids.chunks(REMOVE_CHUNK) {
            let marks = vec!["?"; chunk.len()].join(", ");
            let sql = format!("DELETE FROM {table} WHERE {column} IN ({marks})");
            let values = chunk.iter().map(|id| dialect::uuid(backend, *id));
            txn.execute_raw(Statement::from_sql_and_values(backend, sql, values))
                .await?;
        }
        return Ok(());
    }
    let mut ids = String::with_capacity(2 + message_ids.len() * 37);
    ids.push('{');
    for (index, id) in message_ids.iter().enumerate() {
        if index > 0 {
            ids.push(',');
        }
        ids.push_str(&id.to_string());
    }
    ids.push('}');
    let sql = format!("DELETE FROM {table} WHERE {column} = ANY(CAST($1 AS uuid[]))");
    txn.execute_raw(Statement::from_sql_and_values(
        backend,
        sql,
        [dialect::text(ids)],
    ))
    .await?;
    Ok(())
}

/// Most ids in one `DELETE … IN (…)` of [`remove`] (MariaDB).
const REMOVE_CHUNK: usize = 1_000;

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
    fn the_literals_are_the_columns_literals() {
        let literals: Vec<&str> = columns::ALL
            .into_iter()
            .filter_map(|column| match column.insert() {
                Insert::Literal(literal) => Some(literal),
                _ => None,
            })
            .collect();
        assert_eq!(literals, LITERALS);
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
        assert_eq!(rows_per_chunk(DbBackend::Postgres, 1_000_000), 65_535 / 18);
        assert_eq!(rows_per_chunk(DbBackend::Sqlite, 1_000_000), 32_766 / 18);
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
    fn insert_text_per_backend() {
        let outbox = Outbox::default();
        let one = insert_text(DbBackend::Postgres, &outbox, 1);
        assert_eq!(
            one,
            "INSERT INTO \"outbox\" (\"message_id\", \"event_type\", \"version\", \
             \"aggregate_type\", \"aggregate_id\", \"partition\", \"correlation_id\", \
             \"causation_id\", \"traceparent\", \"tracestate\", \"headers\", \"occurred_at\", \
             \"payload\", \"next_attempt_at\", \"created_at\", \"worker_key\", \"retryable\", \
             \"priority\", \"status\", \"attempts\") VALUES \
             ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, CAST($11 AS jsonb), $12, \
             CAST($13 AS jsonb), $14, $15, $16, $17, $18, 'pending', 0)"
        );
        let two = insert_text(DbBackend::Postgres, &outbox, 2);
        assert!(two.starts_with(&one));
        assert!(two.ends_with(
            ", ($19, $20, $21, $22, $23, $24, $25, $26, $27, $28, CAST($29 AS jsonb), $30, \
             CAST($31 AS jsonb), $32, $33, $34, $35, $36, 'pending', 0)"
        ));
        let mysql = insert_text(DbBackend::MySql, &outbox, 2);
        assert!(mysql.starts_with("INSERT INTO `outbox` (`message_id`, "));
        assert_eq!(mysql.matches('?').count(), 2 * INSERT_COLUMNS);
        let sqlite = insert_text(DbBackend::Sqlite, &outbox, 3);
        assert_eq!(sqlite.matches('?').count(), 3 * INSERT_COLUMNS);
        assert_eq!(sqlite.matches("'pending', 0)").count(), 3);
    }

    #[test]
    fn sqlite_timestamps_are_fixed_width() {
        use crate::sql::dialect::sqlite_timestamp;
        let at: DateTime<Utc> = "2026-01-02T03:04:05Z".parse().unwrap();
        assert_eq!(sqlite_timestamp(at), "2026-01-02T03:04:05.000000Z");
        let at: DateTime<Utc> = "2026-01-02T03:04:05.123456Z".parse().unwrap();
        assert_eq!(sqlite_timestamp(at), "2026-01-02T03:04:05.123456Z");
    }
}
