//! Operator actions on outbox rows: reading and locking the row, requeueing or skipping it,
//! and the operator log.

use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, DbBackend, DbErr};
use uuid::Uuid;

use crate::record::operator_action::{OperatorAction, OperatorActionKind};
use crate::sql::dialect::{self, quote};
use crate::sql::statement::Sql;
use crate::sql::store::Store;

/// The row an operator acts on, as read (and locked) before the change.
#[derive(Debug, Clone)]
pub(crate) struct ActionRow {
    pub(crate) seq: i64,
    pub(crate) event_type: String,
    pub(crate) status: String,
    pub(crate) last_error: Option<String>,
}

/// The columns of the operator log, in the order the statements list them.
const LOG_COLUMNS: [&str; 10] = [
    "seq",
    "message_id",
    "event_type",
    "action",
    "previous_status",
    "actor",
    "reason",
    "last_error",
    "at",
    "detail",
];

impl Store {
    /// The row with `message_id`, locked for the rest of the transaction (`FOR UPDATE`; on
    /// SQLite the transaction holds the write lock already).
    pub(crate) async fn row_for_action<C: ConnectionTrait>(
        &self,
        txn: &C,
        message_id: Uuid,
    ) -> Result<Option<ActionRow>, DbErr> {
        let c = self.outbox.columns();
        let q = |name: &str| quote(self.backend, name);
        let mut sql = Sql::new(self.backend);
        sql.push(&format!(
            "SELECT {seq} AS seq, {event} AS event_type, {status} AS status, {error} AS last_error \
             FROM ",
            seq = q(c.seq),
            event = q(c.event_type),
            status = q(c.status),
            error = q(c.last_error),
        ))
        .table(self.outbox.outbox_table())
        .push(&format!(" WHERE {} = ", q(c.message_id)))
        .bind(dialect::uuid(self.backend, message_id));
        if self.backend != DbBackend::Sqlite {
            sql.push(" FOR UPDATE");
        }
        let Some(row) = txn.query_one_raw(sql.build()).await? else {
            return Ok(None);
        };
        Ok(Some(ActionRow {
            seq: dialect::read_i64(&row, "seq")?,
            event_type: row.try_get("", "event_type")?,
            status: row.try_get("", "status")?,
            last_error: row.try_get("", "last_error")?,
        }))
    }

    /// Requeues (`pending`, attempts 0, due `now`) or skips the row `seq`.
    pub(crate) async fn apply_action<C: ConnectionTrait>(
        &self,
        txn: &C,
        seq: i64,
        action: OperatorActionKind,
        now: DateTime<Utc>,
    ) -> Result<(), DbErr> {
        let c = self.outbox.columns();
        let q = |name: &str| quote(self.backend, name);
        let mut sql = Sql::new(self.backend);
        sql.push("UPDATE ")
            .table(self.outbox.outbox_table())
            .push(" SET ");
        match action {
            OperatorActionKind::Requeue => {
                sql.push(&format!(
                    "{status} = 'pending', {attempts} = 0, {next} = ",
                    status = q(c.status),
                    attempts = q(c.attempts),
                    next = q(c.next_attempt_at)
                ))
                .bind(dialect::timestamp(self.backend, now));
            }
            _ => {
                sql.push(&format!("{} = 'skipped'", q(c.status)));
            }
        }
        sql.push(&format!(" WHERE {} = {seq}", q(c.seq)));
        txn.execute_raw(sql.build()).await?;
        Ok(())
    }

    /// Appends `entry` to the operator log.
    pub(crate) async fn log_action<C: ConnectionTrait>(
        &self,
        conn: &C,
        entry: &OperatorAction,
    ) -> Result<(), DbErr> {
        let backend = self.backend;
        let columns = LOG_COLUMNS.map(|name| quote(backend, name)).join(", ");
        let mut sql = Sql::new(backend);
        sql.push("INSERT INTO ")
            .table(&self.tables().operator_log)
            .push(&format!(" ({columns}) VALUES ({}, ", entry.seq))
            .bind(dialect::uuid(backend, entry.message_id))
            .push(", ")
            .bind(dialect::text(entry.event_type.clone()))
            .push(", ")
            .bind(dialect::text(entry.action.as_str()))
            .push(", ")
            .bind(dialect::text(entry.previous_status.clone()))
            .push(", ")
            .bind(dialect::text(entry.actor.clone()))
            .push(", ")
            .bind(dialect::opt_text(entry.reason.clone()))
            .push(", ")
            .bind(dialect::opt_text(entry.last_error.clone()))
            .push(", ")
            .bind(dialect::timestamp(backend, entry.at))
            .push(", ")
            .bind(dialect::opt_text(entry.detail.clone()))
            .push(")");
        conn.execute_raw(sql.build()).await?;
        Ok(())
    }

    /// The operator log, oldest first: every entry, or those of one message.
    pub(crate) async fn operator_log<C: ConnectionTrait>(
        &self,
        conn: &C,
        message_id: Option<Uuid>,
        latest: Option<u64>,
    ) -> Result<Vec<OperatorAction>, DbErr> {
        let backend = self.backend;
        let q = |name: &str| quote(backend, name);
        let columns = LOG_COLUMNS.map(q).join(", ");
        let mut sql = Sql::new(backend);
        sql.push(&format!("SELECT {columns} FROM "))
            .table(&self.tables().operator_log);
        if let Some(id) = message_id {
            sql.push(&format!(" WHERE {} = ", q("message_id")))
                .bind(dialect::uuid(backend, id));
        }
        match latest {
            // The latest `limit` entries, read newest first and returned oldest first.
            Some(limit) => {
                sql.push(&format!(" ORDER BY {} DESC LIMIT {limit}", q("id")));
            }
            None => {
                sql.push(&format!(" ORDER BY {}", q("id")));
            }
        }
        let mut rows = conn.query_all_raw(sql.build()).await?;
        if latest.is_some() {
            rows.reverse();
        }
        rows.iter()
            .map(|row| {
                let action: String = row.try_get("", "action")?;
                Ok(OperatorAction {
                    seq: dialect::read_i64(row, "seq")?,
                    message_id: dialect::read_uuid(row, "message_id")?,
                    event_type: row.try_get("", "event_type")?,
                    action: OperatorActionKind::parse(&action).ok_or_else(|| {
                        DbErr::Type(format!("unknown operator action {action:?}"))
                    })?,
                    previous_status: row.try_get("", "previous_status")?,
                    actor: row.try_get("", "actor")?,
                    reason: row.try_get("", "reason")?,
                    last_error: row.try_get("", "last_error")?,
                    at: dialect::read_timestamp(row, "at")?
                        .ok_or_else(|| DbErr::Type("operator log `at` is NULL".into()))?,
                    detail: row.try_get("", "detail")?,
                })
            })
            .collect()
    }
}
