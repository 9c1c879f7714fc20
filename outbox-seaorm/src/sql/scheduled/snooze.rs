//! A snoozed job waits in the scheduled table, due at the snooze's time, and comes back
//! with the mover like any scheduled row (with its attempts so far):
//!
//! - the polling relay moves its claimed row there in the batch's mark transaction
//!   (`INSERT INTO <scheduled> SELECT … FROM <outbox> WHERE seq = :seq`, then the `DELETE`),
//!   so that the claim's rule "a row that never failed is due at once" stays true;
//! - the log relay writes the envelope there before it acknowledges the batch, replacing any
//!   row of its message id (a replay after a crash before the acknowledgement snoozes it
//!   again: one row, the later time), and deletes the row the outbox table still holds
//!   (table mode keeps rows until retention; the mover's insert of the same message id
//!   would be refused).

use chrono::{DateTime, Utc};
use outbox_core::Envelope;
use sea_orm::{ConnectionTrait, DbErr, TransactionTrait};

use super::insert::{insert_scheduled, prepare_scheduled};
use crate::error::CommitError;
use crate::sql::columns::{self, Column, Insert};
use crate::sql::dialect::{self, quote};
use crate::sql::store::Store;
use crate::status::OutboxStatus;
use crate::transaction::Pool;

/// Why a snoozed job could not be written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SnoozeWriteError {
    /// Its row cannot be stored (over a column's limit).
    #[error("{0}")]
    Row(#[from] CommitError),
    /// The database failed.
    #[error("{0}")]
    Database(#[from] sea_orm::DbErr),
}

impl Store {
    /// Writes `envelope` to the scheduled table due at `at` (written at `now`), in one
    /// transaction with the removal of the rows of its message id in the scheduled and
    /// outbox tables.
    pub(crate) async fn snooze_to_scheduled(
        &self,
        db: &Pool,
        envelope: Envelope,
        now: DateTime<Utc>,
        at: DateTime<Utc>,
    ) -> Result<(), SnoozeWriteError> {
        let message_id = envelope.message_id;
        let row = prepare_scheduled(self.backend, &self.outbox, envelope, now, at, None)?;
        let txn = db.connection().begin().await?;
        // The outbox table keeps its row under the log relay (table mode, until retention):
        // it goes, or the mover's insert of the same message id would be refused.
        for table in [self.outbox.scheduled_table(), self.outbox.outbox_table()] {
            let mut sql = self.sql();
            sql.push("DELETE FROM ")
                .table(table)
                .push(&format!(
                    " WHERE {} = ",
                    quote(self.backend, self.outbox.columns().message_id)
                ))
                .bind(dialect::uuid(self.backend, message_id));
            txn.execute_raw(sql.build()).await?;
        }
        insert_scheduled(&txn, &self.outbox, vec![row]).await?;
        txn.commit().await?;
        Ok(())
    }

    /// Moves the claimed pending row `seq` into the scheduled table, due at `at`, on the
    /// batch's transaction. Returns whether it moved (a row an operator changed meanwhile
    /// is left alone).
    pub(crate) async fn snooze_row<C: ConnectionTrait>(
        &self,
        conn: &C,
        seq: i64,
        at: DateTime<Utc>,
    ) -> Result<bool, DbErr> {
        let c = self.outbox.columns();
        let q = |name: &str| quote(self.backend, name);
        let inserted: Vec<Column> = columns::inserted().collect();
        let names = inserted
            .iter()
            .map(|column| q(column.name(c)))
            .collect::<Vec<_>>()
            .join(", ");
        let mut sql = self.sql();
        sql.push("INSERT INTO ")
            .table(self.outbox.scheduled_table())
            .push(&format!(" ({names}) SELECT "));
        for (index, column) in inserted.iter().enumerate() {
            if index > 0 {
                sql.push(", ");
            }
            match (column, column.insert()) {
                (Column::NextAttemptAt, _) => {
                    sql.bind(self.ts(at));
                }
                (Column::Status, _) => {
                    sql.push(OutboxStatus::Scheduled.as_sql_literal());
                }
                (_, Insert::Literal(_) | Insert::Bound | Insert::Omitted) => {
                    sql.push(&q(column.name(c)));
                }
            }
        }
        sql.push(" FROM ")
            .table(self.outbox.outbox_table())
            .push(&format!(
                " WHERE {} = {seq} AND {} = 'pending'",
                q(c.seq),
                q(c.status)
            ));
        if conn.execute_raw(sql.build()).await?.rows_affected() == 0 {
            return Ok(false);
        }
        self.delete_pending_rows(conn, &[seq]).await?;
        Ok(true)
    }
}
