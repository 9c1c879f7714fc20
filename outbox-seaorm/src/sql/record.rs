//! Reading outbox rows back as [`OutboxRecord`]s: the `SELECT` of every column under its
//! standard name, its decoding, and the row count.

use outbox_core::Envelope;
use outbox_core::envelope::EnvelopeParts;
use sea_orm::sea_query::{Alias, Expr, Func, Order, Query, SelectStatement};
use sea_orm::{ConnectionTrait, DbErr, FromQueryResult, QueryResult};

use super::columns;
use super::dialect::{
    optional, read_bool, read_json, read_opt_uuid, read_payload, read_timestamp_of, required,
    table_ref, type_error,
};
use crate::config::Outbox;
use crate::record::OutboxRecord;
use crate::status::OutboxStatus;

impl FromQueryResult for OutboxRecord {
    /// Reads a row selected with the standard column names (as [`OutboxRecord::select`]
    /// does).
    fn from_query_result(row: &QueryResult, pre: &str) -> Result<Self, DbErr> {
        let headers = match read_json(row, pre, "headers")? {
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
            message_id: required(read_opt_uuid(row, pre, "message_id")?, "message_id")?,
            event_type: row.try_get(pre, "event_type")?,
            occurred_at: required(read_timestamp_of(row, pre, "occurred_at")?, "occurred_at")?,
            correlation_id: read_opt_uuid(row, pre, "correlation_id")?,
            causation_id: read_opt_uuid(row, pre, "causation_id")?,
            traceparent: optional(row, pre, "traceparent")?,
            tracestate: optional(row, pre, "tracestate")?,
            aggregate_type: row.try_get(pre, "aggregate_type")?,
            aggregate_id: row.try_get(pre, "aggregate_id")?,
            headers,
            payload: read_payload(row, pre, "payload")?,
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
            next_attempt_at: required(
                read_timestamp_of(row, pre, "next_attempt_at")?,
                "next_attempt_at",
            )?,
            last_error: optional(row, pre, "last_error")?,
            published_at: read_timestamp_of(row, pre, "published_at")?,
            created_at: required(read_timestamp_of(row, pre, "created_at")?, "created_at")?,
            worker_key: optional(row, pre, "worker_key")?,
            retryable: read_bool(row, pre, "retryable")?,
        })
    }
}

impl OutboxRecord {
    /// A `SELECT` of every column of `outbox`'s table under the standard names, in `seq`
    /// order; add conditions and limits, then read the rows with
    /// [`FromQueryResult`].
    pub fn select(outbox: &Outbox) -> SelectStatement {
        let mut select = Query::select();
        for column in columns::ALL {
            select.expr_as(
                Expr::col(Alias::new(column.name(outbox.columns()))),
                Alias::new(column.standard()),
            );
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
