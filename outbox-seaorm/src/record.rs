//! Reading outbox rows back: [`OutboxRecord`]. Read-only — rows are written only by
//! [`UnitOfWork::commit`](crate::UnitOfWork::commit).
//!
//! Queries select every column under its standard name (`"id" AS "message_id"` with the
//! Debezium naming), so one [`FromQueryResult`] implementation reads both namings on every
//! backend.

use chrono::{DateTime, NaiveDateTime, Utc};
use outbox_core::envelope::EnvelopeParts;
use outbox_core::{Envelope, Payload};
use sea_orm::sea_query::{Alias, Expr, Func, Order, Query, SelectStatement};
use sea_orm::{ConnectionTrait, DbErr, FromQueryResult, QueryResult, TryGetable};
use uuid::Uuid;

use crate::config::Outbox;
use crate::schema::{OutboxStatus, table_ref};
use crate::table::OutboxColumns;

/// One outbox row: the envelope and the relay's bookkeeping.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct OutboxRecord {
    /// Insert order.
    pub seq: i64,
    /// The envelope, as written.
    pub envelope: Envelope,
    /// `fnv1a_64(aggregate_id) % partitions` at insert time.
    pub partition: i32,
    /// Publication state.
    pub status: OutboxStatus,
    /// Failed publication attempts.
    pub attempts: i32,
    /// Earliest next publication attempt.
    pub next_attempt_at: DateTime<Utc>,
    /// Error of the last failed attempt.
    pub last_error: Option<String>,
    /// When it was published.
    pub published_at: Option<DateTime<Utc>>,
    /// When the row was written.
    pub created_at: DateTime<Utc>,
    /// The worker key (job-queue mode, see [`crate::job`]); `None` for event types without
    /// a job entry.
    pub worker_key: Option<String>,
    /// Whether a failed attempt may be retried (`false`: the first failure marks the row
    /// `failed`).
    pub retryable: bool,
}

fn type_error(column: &str, detail: impl std::fmt::Display) -> DbErr {
    DbErr::Type(format!("outbox column `{column}`: {detail}"))
}

/// Reads a value that may be `NULL`.
fn optional<T: TryGetable>(row: &QueryResult, pre: &str, column: &str) -> Result<Option<T>, DbErr> {
    row.try_get::<Option<T>>(pre, column)
}

fn uuid(row: &QueryResult, pre: &str, column: &str) -> Result<Option<Uuid>, DbErr> {
    // Native `uuid` on PostgreSQL, hyphenated text elsewhere. The backend is asked first:
    // a failed `try_get` builds an error message, which a relay would pay for every row.
    if row.try_as_pg_row().is_some() {
        return optional::<Uuid>(row, pre, column);
    }
    if let Ok(value) = optional::<String>(row, pre, column) {
        return value
            .map(|text| Uuid::parse_str(&text).map_err(|error| type_error(column, error)))
            .transpose();
    }
    optional::<Uuid>(row, pre, column)
}

fn timestamp(row: &QueryResult, pre: &str, column: &str) -> Result<Option<DateTime<Utc>>, DbErr> {
    // `timestamptz` on PostgreSQL, `datetime(6)` (UTC) on MariaDB, RFC 3339 text on SQLite.
    if row.try_as_mysql_row().is_some() {
        return Ok(optional::<NaiveDateTime>(row, pre, column)?.map(|naive| naive.and_utc()));
    }
    if let Ok(value) = optional::<DateTime<Utc>>(row, pre, column) {
        return Ok(value);
    }
    if let Ok(value) = optional::<NaiveDateTime>(row, pre, column) {
        return Ok(value.map(|naive| naive.and_utc()));
    }
    optional::<String>(row, pre, column)?
        .map(|text| {
            DateTime::parse_from_rfc3339(&text)
                .map(|at| at.with_timezone(&Utc))
                .map_err(|error| type_error(column, error))
        })
        .transpose()
}

fn json(row: &QueryResult, pre: &str, column: &str) -> Result<serde_json::Value, DbErr> {
    // `jsonb` on PostgreSQL, JSON text elsewhere.
    if row.try_as_pg_row().is_some() {
        return row.try_get::<serde_json::Value>(pre, column);
    }
    if let Ok(text) = row.try_get::<String>(pre, column) {
        return serde_json::from_str(&text).map_err(|error| type_error(column, error));
    }
    row.try_get::<serde_json::Value>(pre, column)
}

/// The payload column as text, validated once and not parsed into a tree (see
/// [`Payload`]); PostgreSQL's `jsonb` goes through a `serde_json::Value`.
fn payload(row: &QueryResult, pre: &str) -> Result<Payload, DbErr> {
    const COLUMN: &str = "payload";
    if row.try_as_pg_row().is_none()
        && let Ok(text) = row.try_get::<String>(pre, COLUMN)
    {
        return Payload::from_json(text).map_err(|error| type_error(COLUMN, error));
    }
    json(row, pre, COLUMN).map(Payload::from)
}

fn required<T>(value: Option<T>, column: &str) -> Result<T, DbErr> {
    value.ok_or_else(|| type_error(column, "unexpected NULL"))
}

impl FromQueryResult for OutboxRecord {
    /// Reads a row selected with the standard column names (as [`OutboxRecord::select`]
    /// does).
    fn from_query_result(row: &QueryResult, pre: &str) -> Result<Self, DbErr> {
        let headers = match json(row, pre, "headers")? {
            serde_json::Value::Object(map) => map
                .into_iter()
                .map(|(name, value)| match value {
                    serde_json::Value::String(text) => Ok((name, text)),
                    other => Ok((name, other.to_string())),
                })
                .collect::<Result<_, DbErr>>()?,
            serde_json::Value::Null => Default::default(),
            other => return Err(type_error("headers", format!("not an object: {other}"))),
        };
        let status: String = row.try_get(pre, "status")?;
        let stored_version: i32 = row.try_get(pre, "version")?;
        let envelope = Envelope::from_parts(EnvelopeParts {
            message_id: required(uuid(row, pre, "message_id")?, "message_id")?,
            event_type: row.try_get(pre, "event_type")?,
            occurred_at: required(timestamp(row, pre, "occurred_at")?, "occurred_at")?,
            correlation_id: uuid(row, pre, "correlation_id")?,
            causation_id: uuid(row, pre, "causation_id")?,
            traceparent: optional(row, pre, "traceparent")?,
            tracestate: optional(row, pre, "tracestate")?,
            aggregate_type: row.try_get(pre, "aggregate_type")?,
            aggregate_id: row.try_get(pre, "aggregate_id")?,
            headers,
            payload: payload(row, pre)?,
        })
        .map_err(|error| type_error("event_type", error))?;
        if i64::from(envelope.version) != i64::from(stored_version) {
            return Err(type_error(
                "version",
                format!(
                    "{stored_version} disagrees with event type `{}`",
                    envelope.event_type
                ),
            ));
        }
        Ok(Self {
            seq: row.try_get(pre, "seq")?,
            envelope,
            partition: row.try_get(pre, "partition")?,
            status: OutboxStatus::parse(&status)
                .ok_or_else(|| type_error("status", format!("unknown status {status:?}")))?,
            attempts: row.try_get(pre, "attempts")?,
            next_attempt_at: required(timestamp(row, pre, "next_attempt_at")?, "next_attempt_at")?,
            last_error: optional(row, pre, "last_error")?,
            published_at: timestamp(row, pre, "published_at")?,
            created_at: required(timestamp(row, pre, "created_at")?, "created_at")?,
            worker_key: optional(row, pre, "worker_key")?,
            retryable: crate::relay::sql::read_bool(row, pre, "retryable")?,
        })
    }
}

fn standard_names(columns: &OutboxColumns) -> [(&'static str, &'static str); 22] {
    [
        (columns.seq, "seq"),
        (columns.message_id, "message_id"),
        (columns.event_type, "event_type"),
        (columns.version, "version"),
        (columns.aggregate_type, "aggregate_type"),
        (columns.aggregate_id, "aggregate_id"),
        (columns.partition, "partition"),
        (columns.correlation_id, "correlation_id"),
        (columns.causation_id, "causation_id"),
        (columns.traceparent, "traceparent"),
        (columns.tracestate, "tracestate"),
        (columns.headers, "headers"),
        (columns.occurred_at, "occurred_at"),
        (columns.payload, "payload"),
        (columns.status, "status"),
        (columns.attempts, "attempts"),
        (columns.next_attempt_at, "next_attempt_at"),
        (columns.last_error, "last_error"),
        (columns.published_at, "published_at"),
        (columns.created_at, "created_at"),
        (columns.worker_key, "worker_key"),
        (columns.retryable, "retryable"),
    ]
}

impl OutboxRecord {
    /// A `SELECT` of every column of `outbox`'s table under the standard names, in `seq`
    /// order; add conditions and limits, then read the rows with
    /// [`FromQueryResult`].
    pub fn select(outbox: &Outbox) -> SelectStatement {
        let mut select = Query::select();
        for (column, name) in standard_names(outbox.columns()) {
            select.expr_as(Expr::col(Alias::new(column)), Alias::new(name));
        }
        select
            .from(table_ref(outbox.outbox_table()))
            .order_by(Alias::new(outbox.columns().seq), Order::Asc);
        select
    }

    /// The first `limit` rows of `outbox`'s table in `seq` order.
    ///
    /// # Errors
    /// The database's error, or [`DbErr::Type`] for a row that does not decode.
    pub async fn list<C: ConnectionTrait>(
        db: &C,
        outbox: &Outbox,
        limit: u64,
    ) -> Result<Vec<Self>, DbErr> {
        let mut select = Self::select(outbox);
        select.limit(limit);
        let rows = db.query_all(&select).await?;
        rows.iter()
            .map(|row| Self::from_query_result(row, ""))
            .collect()
    }

    /// Number of rows in `outbox`'s table.
    ///
    /// # Errors
    /// The database's error.
    pub async fn count<C: ConnectionTrait>(db: &C, outbox: &Outbox) -> Result<u64, DbErr> {
        let mut select = Query::select();
        select
            .expr_as(
                Func::count(Expr::col(Alias::new(outbox.columns().seq))),
                Alias::new("n"),
            )
            .from(table_ref(outbox.outbox_table()));
        let row = db.query_one(&select).await?;
        let count: i64 = match row {
            Some(row) => row.try_get("", "n")?,
            None => 0,
        };
        Ok(u64::try_from(count).unwrap_or(0))
    }
}
