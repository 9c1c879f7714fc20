//! The backfill of a new slot: the outbox rows that were pending when the slot was created,
//! read page by page in `seq` order inside a transaction that imported the slot's exported
//! snapshot (so that every row is either in the snapshot or in the stream, never both or
//! neither).

use outbox_core::Envelope;
use sea_orm::sea_query::{Alias, Expr, ExprTrait as _};
use sea_orm::{ConnectionTrait, DbErr, FromQueryResult};

use crate::record::OutboxRecord;
use crate::sql::store::Store;
use crate::status::OutboxStatus;

/// One backfilled row: its `seq`, and its envelope or why it cannot be read (with its key
/// columns as written).
#[derive(Debug)]
pub(crate) struct BackfillRow {
    /// The row's `seq` (the next page starts after the last one).
    pub(crate) seq: i64,
    /// The envelope, or `(event_type, aggregate_type, aggregate_id, error)`.
    pub(crate) envelope: Result<Envelope, (String, String, String, String)>,
}

impl Store {
    /// Imports `snapshot` into `txn` (a `REPEATABLE READ` transaction that ran no query
    /// yet).
    pub(crate) async fn import_snapshot<C: ConnectionTrait>(
        &self,
        txn: &C,
        snapshot: &str,
    ) -> Result<(), DbErr> {
        // An exported snapshot name is hexadecimal digits and dashes; anything else is refused
        // rather than quoted.
        if !snapshot.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
            return Err(DbErr::Custom(format!(
                "unexpected snapshot name {snapshot:?}"
            )));
        }
        txn.execute_unprepared(&format!("SET TRANSACTION SNAPSHOT '{snapshot}'"))
            .await?;
        Ok(())
    }

    /// Up to `limit` pending rows after `after` in `seq` order.
    pub(crate) async fn pending_after<C: ConnectionTrait>(
        &self,
        conn: &C,
        after: i64,
        limit: u64,
    ) -> Result<Vec<BackfillRow>, DbErr> {
        let c = self.outbox.columns();
        let mut select = OutboxRecord::select(&self.outbox);
        select
            .and_where(Expr::col(Alias::new(c.status)).eq(OutboxStatus::Pending.as_str()))
            .and_where(Expr::col(Alias::new(c.seq)).gt(after))
            .limit(limit);
        let rows = conn.query_all(&select).await?;
        rows.iter()
            .map(|row| {
                let seq: i64 = row.try_get("", "seq")?;
                let envelope = match OutboxRecord::from_query_result(row, "") {
                    Ok(record) => Ok(record.envelope),
                    Err(error) => Err((
                        row.try_get("", "event_type").unwrap_or_default(),
                        row.try_get("", "aggregate_type").unwrap_or_default(),
                        row.try_get("", "aggregate_id").unwrap_or_default(),
                        error.to_string(),
                    )),
                };
                Ok(BackfillRow { seq, envelope })
            })
            .collect()
    }
}

#[cfg(feature = "log-relay-mariadb")]
impl Store {
    /// MariaDB's backfill page, read through the snapshot's own connection (not the pool):
    /// every column of up to `limit` pending rows after the `seq` bound to its one `?`, in
    /// `seq` order.
    pub(crate) fn binlog_backfill_page(&self, limit: u64) -> String {
        let c = self.outbox.columns();
        let q = |name: &str| crate::sql::dialect::quote(self.backend, name);
        format!(
            "SELECT * FROM {table} WHERE {status} = '{pending}' AND {seq} > ? ORDER BY {seq} \
             LIMIT {limit}",
            table = crate::sql::dialect::quote_table(self.backend, self.outbox.outbox_table()),
            status = q(c.status),
            pending = OutboxStatus::Pending.as_str(),
            seq = q(c.seq),
        )
    }
}
