//! Retention under the log relay: in table mode the log relay never updates a row, so the
//! rows it published stay `pending`; its purge deletes the oldest of them in `seq` order,
//! older than a cutoff the relay derives from its last acknowledged commit (see the
//! `log` module of [`crate::relay`]).

use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, DbBackend, DbErr};

use crate::sql::dialect::{self, quote, quote_table};
use crate::sql::statement::Sql;
use crate::sql::store::Store;
use crate::status::OutboxStatus;

impl Store {
    /// Deletes up to `batch` `pending` rows written before `cutoff`, in `seq` order.
    /// Returns the rows deleted.
    pub(crate) async fn delete_streamed<C: ConnectionTrait>(
        &self,
        conn: &C,
        cutoff: DateTime<Utc>,
        batch: usize,
    ) -> Result<u64, DbErr> {
        let backend = self.backend;
        let c = self.outbox.columns();
        let q = |name: &str| quote(backend, name);
        let table = quote_table(backend, self.outbox.outbox_table());
        let seq = q(c.seq);
        let mut sql = Sql::new(backend);
        let status = q(c.status);
        let pending = OutboxStatus::Pending.as_str();
        let created = q(c.created_at);
        if backend == DbBackend::MySql {
            // MariaDB takes no `LIMIT` in an `IN` subquery; its single-table `DELETE` orders
            // and limits itself.
            sql.push(&format!(
                "DELETE FROM {table} WHERE {status} = '{pending}' AND {created} < "
            ))
            .bind(dialect::timestamp(backend, cutoff))
            .push(&format!(" ORDER BY {seq} LIMIT {batch}"));
        } else {
            sql.push(&format!(
                "DELETE FROM {table} WHERE {seq} IN (SELECT {seq} FROM {table} WHERE \
                 {status} = '{pending}' AND {created} < "
            ))
            .bind(dialect::timestamp(backend, cutoff))
            .push(&format!(" ORDER BY {seq} LIMIT {batch})"));
        }
        Ok(conn.execute_raw(sql.build()).await?.rows_affected())
    }
}
