//! Marking claimed rows: published (the row kept with `status = 'published'`, or deleted
//! when published rows are not kept), or failed (retry later, dead, or failed for good).

use chrono::{DateTime, Utc};
use sea_orm::sea_query::Value;
use sea_orm::{ConnectionTrait, DbBackend, DbErr};

use super::dialect::{self, quote};
use super::statement::Sql;
use super::store::Store;

/// What a failed attempt leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AfterFailure {
    /// Stays `pending`, due again at this time.
    RetryAt(DateTime<Utc>),
    /// `dead`: too many attempts, or a permanent error.
    Dead,
    /// `failed`: not retryable (job-queue mode).
    Failed,
}

impl Store {
    /// `UPDATE <outbox>` of rows picked by `seq`; on MariaDB through the primary key
    /// (`FORCE INDEX (PRIMARY)`). InnoDB may otherwise pick the `status` index for `seq IN
    /// (…) AND status = 'pending'` (it does on a small table) and lock, while it scans, every
    /// pending row it passes, releasing the others only afterwards (`READ COMMITTED`). A
    /// claim running meanwhile (another relay, or this relay's claim ahead) then skips such
    /// a row as `SKIP LOCKED` and may take the later rows of its aggregate: out of order.
    fn update_by_seq<'s>(&self, sql: &'s mut Sql) -> &'s mut Sql {
        sql.push("UPDATE ").table(self.outbox.outbox_table());
        if self.backend == DbBackend::MySql {
            sql.push(" FORCE INDEX (PRIMARY)");
        }
        sql
    }

    /// `status = 'published'` for pending rows of `seqs`. Returns the rows changed.
    pub(crate) async fn mark_published<C: ConnectionTrait>(
        &self,
        conn: &C,
        seqs: &[i64],
        now: DateTime<Utc>,
    ) -> Result<u64, DbErr> {
        if seqs.is_empty() {
            return Ok(0);
        }
        let c = self.outbox.columns();
        let q = |name: &str| quote(self.backend, name);
        let mut sql = self.sql();
        self.update_by_seq(&mut sql)
            .push(&format!(
                " SET {} = 'published', {} = ",
                q(c.status),
                q(c.published_at)
            ))
            .bind(self.ts(now))
            .push(" WHERE ")
            .seq_in(&q(c.seq), seqs)
            .push(&format!(" AND {} = 'pending'", q(c.status)));
        Ok(conn.execute_raw(sql.build()).await?.rows_affected())
    }

    /// Deletes the pending rows of `seqs`: the mark of published rows that are not kept
    /// (retention zero), and the second half of a snoozed row's move to the scheduled table.
    /// Returns the rows deleted.
    ///
    /// A `DELETE` writes no new row version and no index entry: on PostgreSQL 15 it cost
    /// about a sixth of the `UPDATE` of [`mark_published`](Self::mark_published) per batch
    /// of 500 (0.4–0.7 ms and 28 kB of WAL against 2.9–3.3 ms and 285 kB), which can never
    /// be a HOT update since `status` is in the partial indexes' predicates. On MariaDB it
    /// goes through the primary key for the reason given at `update_by_seq` (a `DELETE`
    /// takes an index hint only in its multiple-table form: `DELETE o FROM outbox o FORCE
    /// INDEX (PRIMARY) …`); without it, relays deadlocked on each other's rows.
    pub(crate) async fn delete_pending_rows<C: ConnectionTrait>(
        &self,
        conn: &C,
        seqs: &[i64],
    ) -> Result<u64, DbErr> {
        if seqs.is_empty() {
            return Ok(0);
        }
        let c = self.outbox.columns();
        let q = |name: &str| quote(self.backend, name);
        let mut sql = self.sql();
        if self.backend == DbBackend::MySql {
            sql.push("DELETE o FROM ")
                .table(self.outbox.outbox_table())
                .push(" o FORCE INDEX (PRIMARY)");
        } else {
            sql.push("DELETE FROM ")
                .table(self.outbox.outbox_table())
                .push(" AS o");
        }
        sql.push(" WHERE ")
            .seq_in(&format!("o.{}", q(c.seq)), seqs)
            .push(&format!(" AND o.{} = 'pending'", q(c.status)));
        Ok(conn.execute_raw(sql.build()).await?.rows_affected())
    }

    /// A failed attempt: `attempts`, `last_error`, and what happens next (see
    /// [`AfterFailure`]).
    pub(crate) async fn mark_failed<C: ConnectionTrait>(
        &self,
        conn: &C,
        seq: i64,
        attempts: i32,
        next: AfterFailure,
        error: &str,
    ) -> Result<u64, DbErr> {
        let c = self.outbox.columns();
        let q = |name: &str| quote(self.backend, name);
        let mut sql = self.sql();
        self.update_by_seq(&mut sql).push(" SET ");
        match next {
            AfterFailure::RetryAt(at) => {
                sql.push(&format!("{} = ", q(c.next_attempt_at)))
                    .bind(self.ts(at));
            }
            AfterFailure::Dead => {
                sql.push(&format!("{} = 'dead'", q(c.status)));
            }
            AfterFailure::Failed => {
                sql.push(&format!("{} = 'failed'", q(c.status)));
            }
        }
        sql.push(&format!(", {} = ", q(c.attempts)))
            .bind(Value::Int(Some(attempts)))
            .push(&format!(", {} = ", q(c.last_error)))
            .bind(dialect::text(crate::limits::error_text(error)))
            .push(&format!(
                " WHERE {} = {seq} AND {} = 'pending'",
                q(c.seq),
                q(c.status)
            ));
        Ok(conn.execute_raw(sql.build()).await?.rows_affected())
    }
}
