//! The promotion: rows of the scheduled table whose time has come move into the outbox
//! table as new `pending` rows, in one transaction — taken in due order (earliest first,
//! then `seq`), inserted with fresh `seq`s in that order, deleted from the scheduled table.
//!
//! ```sql
//! SELECT seq FROM outbox_scheduled WHERE next_attempt_at <= :now
//!   ORDER BY next_attempt_at, seq LIMIT :limit
//!   FOR UPDATE                                              -- PostgreSQL (MariaDB: by
//!                                                           -- primary key, see below)
//! INSERT INTO outbox (<columns>) SELECT <columns>, 'pending', attempts FROM outbox_scheduled
//!   WHERE seq IN (…) ORDER BY next_attempt_at, seq
//! DELETE FROM outbox WHERE message_id IN (SELECT message_id FROM outbox_scheduled
//!   WHERE seq IN (…))                                       -- remove_after_insert
//! DELETE FROM outbox_scheduled WHERE seq IN (…)
//! ```
//!
//! Several relays may promote at once. They take turns, on purpose: a second mover's
//! `FOR UPDATE` waits for the first's rows, finds them gone at its commit, and locks the
//! rows after them, so the new `seq`s follow due order across movers (with `SKIP LOCKED`,
//! a mover that commits first would give later rows of an aggregate smaller `seq`s: the
//! scheduled test `many_due_rows_move_once_each_in_due_order` caught it). On SQLite the move
//! begins `IMMEDIATE`: one writer at a time.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::Value;
use sea_orm::{ConnectionTrait, DbBackend, DbErr, SqliteTransactionMode, TransactionOptions};

use crate::config::WriteMode;
use crate::sql::columns::{self, Column, Insert};
use crate::sql::dialect::{self, quote};
use crate::sql::store::Store;
use crate::transaction::Pool;

impl Store {
    /// Moves up to `limit` rows due at `now` from the scheduled table into the outbox
    /// table, in one transaction. Returns how many moved.
    pub(crate) async fn promote(
        &self,
        db: &Pool,
        now: DateTime<Utc>,
        limit: u64,
    ) -> Result<u64, DbErr> {
        // SQLite: take the write lock first, or two movers that both read would deadlock
        // on the upgrade (`database is locked`).
        let options = TransactionOptions {
            sqlite_transaction_mode: (self.backend == DbBackend::Sqlite)
                .then_some(SqliteTransactionMode::Immediate),
            ..TransactionOptions::default()
        };
        let txn = crate::transaction::begin_whole(db, options).await?;
        let seqs = self.due_scheduled(&txn, now, limit).await?;
        if seqs.is_empty() {
            txn.commit().await?;
            return Ok(0);
        }
        txn.execute_raw(self.promote_insert(&seqs)).await?;
        if let WriteMode::Table {
            remove_after_insert: true,
        } = self.outbox.write_mode()
        {
            txn.execute_raw(self.promote_remove(&seqs)).await?;
        }
        let mut sql = self.sql();
        sql.push("DELETE FROM ")
            .table(self.outbox.scheduled_table())
            .push(" WHERE ")
            .seq_in(&quote(self.backend, self.outbox.columns().seq), &seqs);
        txn.execute_raw(sql.build()).await?;
        txn.commit().await?;
        Ok(seqs.len() as u64)
    }

    /// The `seq`s of up to `limit` scheduled rows due at `now`, earliest first, locked.
    ///
    /// MariaDB in two steps, as the claim does (see `claim_mysql`): a locking read through
    /// the due index leaves InnoDB locks on its secondary entries, which the other mover's
    /// `DELETE` then waits for while it waits for ours — a deadlock (the scheduled test
    /// `many_due_rows_move_once_each_in_due_order` hit it). So: (1) a plain read of the
    /// candidate `seq`s through the due index; (2) a locking read of those rows through the
    /// primary key only, which waits for another mover's commit and then finds its rows
    /// gone.
    async fn due_scheduled<C: ConnectionTrait>(
        &self,
        conn: &C,
        now: DateTime<Utc>,
        limit: u64,
    ) -> Result<Vec<i64>, DbErr> {
        let c = self.outbox.columns();
        let q = |name: &str| quote(self.backend, name);
        let order = format!(" ORDER BY {}, {}", q(c.next_attempt_at), q(c.seq));
        let mut sql = self.sql();
        sql.push(&format!("SELECT {} AS seq FROM ", q(c.seq)))
            .table(self.outbox.scheduled_table())
            .push(&format!(" WHERE {} <= ", q(c.next_attempt_at)))
            .bind(self.ts(now))
            .push(&order)
            .push(" LIMIT ")
            .bind(Value::BigInt(Some(
                i64::try_from(limit).unwrap_or(i64::MAX),
            )));
        match self.backend {
            // Waiting, not skipping: a second mover waits for the first's commit and then
            // takes the rows after its rows, so the `seq`s follow due order across movers.
            DbBackend::Postgres => {
                sql.push(" FOR UPDATE");
            }
            DbBackend::MySql => {
                let candidates = read_seqs(conn, sql).await?;
                if candidates.is_empty() {
                    return Ok(candidates);
                }
                let mut sql = self.sql();
                sql.push(&format!("SELECT {} AS seq FROM ", q(c.seq)))
                    .table(self.outbox.scheduled_table())
                    .push(" FORCE INDEX (PRIMARY) WHERE ")
                    .seq_in(&q(c.seq), &candidates)
                    .push(&format!(" AND {} <= ", q(c.next_attempt_at)))
                    .bind(self.ts(now))
                    .push(&order)
                    .push(" FOR UPDATE");
                return read_seqs(conn, sql).await;
            }
            _ => {}
        }
        read_seqs(conn, sql).await
    }

    /// `INSERT INTO <outbox> (<columns>) SELECT … FROM <scheduled> WHERE seq IN (…) ORDER
    /// BY next_attempt_at, seq`: every column a commit writes, copied, except `status`,
    /// which becomes `pending`. `attempts` is copied: 0 for a row a commit scheduled, the
    /// attempts so far for a job that snoozed (a snooze counts none, and forgets none).
    fn promote_insert(&self, seqs: &[i64]) -> sea_orm::Statement {
        let c = self.outbox.columns();
        let q = |name: &str| quote(self.backend, name);
        let inserted: Vec<Column> = columns::inserted().collect();
        let names = inserted
            .iter()
            .map(|column| q(column.name(c)))
            .collect::<Vec<_>>()
            .join(", ");
        let selected = inserted
            .iter()
            .map(|column| match column.insert() {
                Insert::Literal(literal) if *column != Column::Attempts => literal.to_owned(),
                _ => q(column.name(c)),
            })
            .collect::<Vec<_>>()
            .join(", ");
        let mut sql = self.sql();
        sql.push("INSERT INTO ")
            .table(self.outbox.outbox_table())
            .push(&format!(" ({names}) SELECT {selected} FROM "))
            .table(self.outbox.scheduled_table())
            .push(" WHERE ")
            .seq_in(&q(c.seq), seqs)
            .push(&format!(" ORDER BY {}, {}", q(c.next_attempt_at), q(c.seq)));
        sql.build()
    }

    /// `DELETE FROM <outbox> WHERE message_id IN (SELECT message_id FROM <scheduled> WHERE
    /// seq IN (…))`: `remove_after_insert` keeps the outbox table empty, the log keeps the
    /// insert.
    fn promote_remove(&self, seqs: &[i64]) -> sea_orm::Statement {
        let c = self.outbox.columns();
        let q = |name: &str| quote(self.backend, name);
        let mut sql = self.sql();
        sql.push("DELETE FROM ")
            .table(self.outbox.outbox_table())
            .push(&format!(
                " WHERE {} IN (SELECT {} FROM ",
                q(c.message_id),
                q(c.message_id)
            ))
            .table(self.outbox.scheduled_table())
            .push(" WHERE ")
            .seq_in(&q(c.seq), seqs)
            .push(")");
        sql.build()
    }
}

/// The `seq` column of every row `sql` returns.
async fn read_seqs<C: ConnectionTrait>(
    conn: &C,
    sql: crate::sql::statement::Sql,
) -> Result<Vec<i64>, DbErr> {
    let rows = conn.query_all_raw(sql.build()).await?;
    rows.iter()
        .map(|row| dialect::read_i64(row, "seq"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Outbox;

    #[test]
    fn the_copy_keeps_every_column_but_the_new_rows_literals() {
        let store = Store::new(&Outbox::default(), DbBackend::Postgres);
        let statement = store.promote_insert(&[3, 4]);
        assert_eq!(
            statement.sql,
            "INSERT INTO \"outbox\" (\"message_id\", \"event_type\", \"version\", \
             \"aggregate_type\", \"aggregate_id\", \"partition\", \"correlation_id\", \
             \"causation_id\", \"traceparent\", \"tracestate\", \"headers\", \"occurred_at\", \
             \"payload\", \"next_attempt_at\", \"created_at\", \"worker_key\", \"retryable\", \
             \"priority\", \"status\", \"attempts\") SELECT \"message_id\", \"event_type\", \"version\", \
             \"aggregate_type\", \"aggregate_id\", \"partition\", \"correlation_id\", \
             \"causation_id\", \"traceparent\", \"tracestate\", \"headers\", \"occurred_at\", \
             \"payload\", \"next_attempt_at\", \"created_at\", \"worker_key\", \"retryable\", \
             \"priority\", 'pending', \"attempts\" FROM \"outbox_scheduled\" WHERE \"seq\" = ANY(CAST($1 AS bigint[])) \
             ORDER BY \"next_attempt_at\", \"seq\""
        );
    }
}
