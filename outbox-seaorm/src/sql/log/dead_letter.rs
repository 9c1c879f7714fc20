//! The log relay's dead-letter table (`<outbox>_log_dead_letters`): writing dead and parked
//! events, the aggregates they hold, the entries a relay acts on (requeued ones and those
//! parked behind them), their transitions, and reading them for operators.

use outbox_core::Envelope;
use sea_orm::sea_query::Value;
use sea_orm::{ConnectionTrait, DbBackend, DbErr, QueryResult};
use uuid::Uuid;

use crate::limits;
use crate::record::log_dead_letter::{LogDeadLetter, LogDeadLetterStatus};
use crate::sql::dialect::{self, opt_text, text};
use crate::sql::store::Store;
use crate::status::MAX_KEY_CHARS;

/// An entry to write.
#[derive(Debug, Clone)]
pub(crate) struct NewLogDeadLetter<'a> {
    pub(crate) message_id: Option<Uuid>,
    pub(crate) event_type: &'a str,
    pub(crate) aggregate_type: &'a str,
    pub(crate) aggregate_id: &'a str,
    /// The envelope as JSON, when it could be read.
    pub(crate) envelope: Option<String>,
    pub(crate) error: &'a str,
    pub(crate) attempts: u32,
    pub(crate) status: LogDeadLetterStatus,
}

const COLUMNS: &str = "id, slot, message_id, event_type, aggregate_type, aggregate_id, envelope, \
                       error, attempts, status, dead_at, resolved_at, resolved_by, reason";

fn read(row: &QueryResult) -> Result<LogDeadLetter, DbErr> {
    let status: String = row.try_get("", "status")?;
    let envelope: Option<String> = row.try_get("", "envelope")?;
    Ok(LogDeadLetter {
        id: row.try_get("", "id")?,
        slot: row.try_get("", "slot")?,
        message_id: dialect::read_opt_uuid(row, "", "message_id")?,
        event_type: row.try_get("", "event_type")?,
        aggregate_type: row.try_get("", "aggregate_type")?,
        aggregate_id: row.try_get("", "aggregate_id")?,
        envelope: envelope.and_then(|json| serde_json::from_str::<Envelope>(&json).ok()),
        error: row.try_get("", "error")?,
        attempts: row.try_get("", "attempts")?,
        status: LogDeadLetterStatus::parse(&status)
            .ok_or_else(|| DbErr::Type(format!("unknown log dead letter status {status:?}")))?,
        dead_at: dialect::required(dialect::read_timestamp_of(row, "", "dead_at")?, "dead_at")?,
        resolved_at: dialect::read_timestamp_of(row, "", "resolved_at")?,
        resolved_by: row.try_get("", "resolved_by")?,
        reason: row.try_get("", "reason")?,
    })
}

impl Store {
    /// Writes an entry unless the slot already has one for its message id (a redelivery
    /// after a crash). Key columns are cut to their length, the error to
    /// [`limits::MAX_ERROR_CHARS`]: a dead letter can always be written.
    pub(crate) async fn insert_log_dead_letter<C: ConnectionTrait>(
        &self,
        conn: &C,
        slot: &str,
        entry: &NewLogDeadLetter<'_>,
    ) -> Result<(), DbErr> {
        let key = |value: &str| text(limits::chars(value, MAX_KEY_CHARS - 1));
        // A redelivered entry meets the unique `(slot, message_id)` and is not written again.
        let (insert, conflict) = match self.backend {
            DbBackend::MySql => ("INSERT IGNORE INTO ", ""),
            _ => ("INSERT INTO ", " ON CONFLICT DO NOTHING"),
        };
        let now = dialect::server_now(self.backend);
        let mut sql = self.sql();
        sql.push(insert)
            .table(&self.outbox.tables().relay.log_dead_letters)
            .push(
                " (slot, message_id, event_type, aggregate_type, aggregate_id, envelope, error, \
                 attempts, status, dead_at) VALUES (",
            )
            .bind(text(slot))
            .push(", ")
            .bind(dialect::opt_uuid(self.backend, entry.message_id))
            .push(", ")
            .bind(key(entry.event_type))
            .push(", ")
            .bind(key(entry.aggregate_type))
            .push(", ")
            .bind(key(entry.aggregate_id))
            .push(", ")
            .bind(opt_text(entry.envelope.clone()))
            .push(", ")
            .bind(text(limits::error_text(entry.error)))
            .push(", ")
            .bind(Value::Int(Some(
                i32::try_from(entry.attempts).unwrap_or(i32::MAX),
            )))
            .push(", ")
            .bind(text(entry.status.as_str()))
            .push(&format!(", {now}){conflict}"));
        conn.execute_raw(sql.build()).await?;
        Ok(())
    }

    /// The aggregates `slot`'s entries hold (`dead`, `parked`, `requeued`).
    pub(crate) async fn log_held_aggregates<C: ConnectionTrait>(
        &self,
        conn: &C,
        slot: &str,
    ) -> Result<Vec<(String, String)>, DbErr> {
        let mut sql = self.sql();
        sql.push("SELECT DISTINCT aggregate_type, aggregate_id FROM ")
            .table(&self.outbox.tables().relay.log_dead_letters)
            .push(" WHERE slot = ")
            .bind(text(slot))
            .push(" AND status IN ('dead', 'parked', 'requeued')");
        let rows = conn.query_all_raw(sql.build()).await?;
        rows.iter()
            .map(|row| {
                Ok((
                    row.try_get("", "aggregate_type")?,
                    row.try_get("", "aggregate_id")?,
                ))
            })
            .collect()
    }

    /// The holding entries of `slot` (`dead`, `parked`, `requeued`) by aggregate, then id:
    /// what a relay walks to publish requeued entries and release parked ones.
    pub(crate) async fn log_holding_entries<C: ConnectionTrait>(
        &self,
        conn: &C,
        slot: &str,
        limit: u64,
    ) -> Result<Vec<LogDeadLetter>, DbErr> {
        let mut sql = self.sql();
        sql.push(&format!("SELECT {COLUMNS} FROM "))
            .table(&self.outbox.tables().relay.log_dead_letters)
            .push(" WHERE slot = ")
            .bind(text(slot))
            .push(&format!(
                " AND status IN ('dead', 'parked', 'requeued') \
                 ORDER BY aggregate_type, aggregate_id, id LIMIT {limit}"
            ));
        let rows = conn.query_all_raw(sql.build()).await?;
        rows.iter().map(read).collect()
    }

    /// Moves entry `id` from `from` to `to` (with the relay's or an operator's details).
    /// `false`: it was not in `from`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn transition_log_dead_letter<C: ConnectionTrait>(
        &self,
        conn: &C,
        id: i64,
        from: LogDeadLetterStatus,
        to: LogDeadLetterStatus,
        error: Option<(&str, u32)>,
        actor: Option<&str>,
        reason: Option<&str>,
    ) -> Result<bool, DbErr> {
        let mut sql = self.sql();
        sql.push("UPDATE ")
            .table(&self.outbox.tables().relay.log_dead_letters)
            .push(" SET status = ")
            .bind(text(to.as_str()))
            .push(&format!(
                ", resolved_at = {}",
                dialect::server_now(self.backend)
            ));
        if let Some((error, attempts)) = error {
            sql.push(", error = ")
                .bind(text(limits::error_text(error)))
                .push(", attempts = ")
                .bind(Value::Int(Some(
                    i32::try_from(attempts).unwrap_or(i32::MAX),
                )));
        }
        if let Some(actor) = actor {
            sql.push(", resolved_by = ").bind(text(actor));
        }
        if let Some(reason) = reason {
            sql.push(", reason = ").bind(text(reason));
        }
        sql.push(" WHERE id = ")
            .bind(Value::BigInt(Some(id)))
            .push(" AND status = ")
            .bind(text(from.as_str()));
        Ok(conn.execute_raw(sql.build()).await?.rows_affected() == 1)
    }

    /// Entries oldest first, filtered by slot, event type and status, at most `limit`.
    pub(crate) async fn list_log_dead_letters<C: ConnectionTrait>(
        &self,
        conn: &C,
        slot: Option<&str>,
        event_type: Option<&str>,
        status: Option<LogDeadLetterStatus>,
        limit: u64,
    ) -> Result<Vec<LogDeadLetter>, DbErr> {
        let mut sql = self.sql();
        sql.push(&format!("SELECT {COLUMNS} FROM "))
            .table(&self.outbox.tables().relay.log_dead_letters)
            .push(" WHERE true");
        if let Some(slot) = slot {
            sql.push(" AND slot = ").bind(text(slot));
        }
        if let Some(event_type) = event_type {
            sql.push(" AND event_type = ").bind(text(event_type));
        }
        if let Some(status) = status {
            sql.push(" AND status = ").bind(text(status.as_str()));
        }
        sql.push(&format!(" ORDER BY id LIMIT {limit}"));
        let rows = conn.query_all_raw(sql.build()).await?;
        rows.iter().map(read).collect()
    }

    /// Entry `id`.
    pub(crate) async fn find_log_dead_letter<C: ConnectionTrait>(
        &self,
        conn: &C,
        id: i64,
    ) -> Result<Option<LogDeadLetter>, DbErr> {
        let mut sql = self.sql();
        sql.push(&format!("SELECT {COLUMNS} FROM "))
            .table(&self.outbox.tables().relay.log_dead_letters)
            .push(" WHERE id = ")
            .bind(Value::BigInt(Some(id)));
        match conn.query_one_raw(sql.build()).await? {
            Some(row) => Ok(Some(read(&row)?)),
            None => Ok(None),
        }
    }

    /// Counts of `slot`'s entries (or every slot's) by status.
    pub(crate) async fn count_log_dead_letters<C: ConnectionTrait>(
        &self,
        conn: &C,
    ) -> Result<Vec<(String, i64)>, DbErr> {
        let mut sql = self.sql();
        sql.push("SELECT status, count(*) AS n FROM ")
            .table(&self.outbox.tables().relay.log_dead_letters)
            .push(" GROUP BY status ORDER BY status");
        let rows = conn.query_all_raw(sql.build()).await?;
        rows.iter()
            .map(|row| Ok((row.try_get("", "status")?, dialect::read_i64(row, "n")?)))
            .collect()
    }
}
