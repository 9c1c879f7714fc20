//! Retention deletes: a batch of published outbox rows, or of inbox rows, older than a
//! cutoff (see [`crate::retention`]).

use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, DbBackend, DbErr};

use super::dialect::{self, quote, quote_table};
use super::statement::Sql;
use super::store::Store;
use crate::table::inbox_columns;

impl Store {
    /// Deletes up to `batch` published rows published before `cutoff`, in `seq` order.
    /// Returns the rows deleted.
    pub(crate) async fn delete_published<C: ConnectionTrait>(
        &self,
        conn: &C,
        cutoff: DateTime<Utc>,
        batch: usize,
    ) -> Result<u64, DbErr> {
        let backend = self.backend;
        let c = self.outbox.columns();
        let q = |name: &str| quote(backend, name);
        let table = quote_table(backend, self.outbox.outbox_table());
        let condition = format!(
            "{status} = 'published' AND {published} < ",
            status = q(c.status),
            published = q(c.published_at)
        );
        let mut sql = Sql::new(backend);
        if backend == DbBackend::MySql {
            sql.push(&format!("DELETE FROM {table} WHERE {condition}"))
                .bind(dialect::timestamp(backend, cutoff))
                .push(&format!(" ORDER BY {} LIMIT {batch}", q(c.seq)));
        } else {
            let seq = q(c.seq);
            sql.push(&format!(
                "DELETE FROM {table} WHERE {seq} IN (SELECT {seq} FROM {table} WHERE {condition}"
            ))
            .bind(dialect::timestamp(backend, cutoff))
            .push(&format!(" ORDER BY {seq} LIMIT {batch})"));
        }
        Ok(conn.execute_raw(sql.build()).await?.rows_affected())
    }

    /// Deletes up to `batch` inbox rows received before `cutoff`. Returns the rows deleted.
    pub(crate) async fn delete_received<C: ConnectionTrait>(
        &self,
        conn: &C,
        cutoff: DateTime<Utc>,
        batch: usize,
    ) -> Result<u64, DbErr> {
        let backend = self.backend;
        let q = |name: &str| quote(backend, name);
        let table = quote_table(backend, self.outbox.inbox_table());
        let received = q(inbox_columns::RECEIVED_AT);
        let mut sql = Sql::new(backend);
        if backend == DbBackend::MySql {
            sql.push(&format!("DELETE FROM {table} WHERE {received} < "))
                .bind(dialect::timestamp(backend, cutoff))
                .push(&format!(" ORDER BY {received} LIMIT {batch}"));
        } else {
            let key = format!(
                "{}, {}",
                q(inbox_columns::MESSAGE_ID),
                q(inbox_columns::CONSUMER)
            );
            sql.push(&format!(
                "DELETE FROM {table} WHERE ({key}) IN (SELECT {key} FROM {table} WHERE {received} < "
            ))
            .bind(dialect::timestamp(backend, cutoff))
            .push(&format!(" LIMIT {batch})"));
        }
        Ok(conn.execute_raw(sql.build()).await?.rows_affected())
    }
}
