//! An operator's change to scheduled rows: cancel (delete) or give a new due time.

use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, DbErr};

use crate::sql::dialect::quote;
use crate::sql::store::Store;

impl Store {
    /// Deletes the scheduled rows `seqs`.
    pub(crate) async fn cancel_scheduled<C: ConnectionTrait>(
        &self,
        txn: &C,
        seqs: &[i64],
    ) -> Result<(), DbErr> {
        let mut sql = self.sql();
        sql.push("DELETE FROM ")
            .table(self.outbox.scheduled_table())
            .push(" WHERE ")
            .seq_in(&quote(self.backend, self.outbox.columns().seq), seqs);
        txn.execute_raw(sql.build()).await?;
        Ok(())
    }

    /// Makes the scheduled rows `seqs` due at `at`.
    pub(crate) async fn set_due<C: ConnectionTrait>(
        &self,
        txn: &C,
        seqs: &[i64],
        at: DateTime<Utc>,
    ) -> Result<(), DbErr> {
        let c = self.outbox.columns();
        let mut sql = self.sql();
        sql.push("UPDATE ")
            .table(self.outbox.scheduled_table())
            .push(&format!(
                " SET {} = ",
                quote(self.backend, c.next_attempt_at)
            ))
            .bind(self.ts(at))
            .push(" WHERE ")
            .seq_in(&quote(self.backend, c.seq), seqs);
        txn.execute_raw(sql.build()).await?;
        Ok(())
    }
}
