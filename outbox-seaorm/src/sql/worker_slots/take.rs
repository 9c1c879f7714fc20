//! Takes up to `want` free slots of one worker key for the batch's transaction: the slots
//! stay locked until it ends, so every relay's batches together hold at most the key's
//! limit of claimed rows.
//!
//! ```sql
//! SELECT slot FROM outbox_worker_slots WHERE worker_key = :key AND slot < :limit
//!   ORDER BY slot LIMIT :want FOR UPDATE SKIP LOCKED
//! ```

use sea_orm::{ConnectionTrait, DbBackend, DbErr};

use crate::sql::dialect::{self, quote};
use crate::sql::store::Store;
use crate::table::WorkerSlotColumn;

impl Store {
    /// The number of slots of `key` this transaction now holds, at most `want` (0 when
    /// other batches hold every slot). SQLite has no row locks: there the key's lease
    /// (held by one relay at a time) keeps the limit, and this returns `want` capped by it.
    pub(crate) async fn take_worker_slots<C: ConnectionTrait>(
        &self,
        conn: &C,
        key: &str,
        limit: u32,
        want: usize,
    ) -> Result<usize, DbErr> {
        let want = want.min(usize::try_from(limit).unwrap_or(usize::MAX));
        if self.backend == DbBackend::Sqlite || want == 0 {
            return Ok(want);
        }
        let q = |c: WorkerSlotColumn| quote(self.backend, c.as_str());
        let mut sql = self.sql();
        sql.push(&format!(
            "SELECT {} AS slot FROM ",
            q(WorkerSlotColumn::Slot)
        ))
        .table(self.outbox.worker_slots_table())
        .push(&format!(" WHERE {} = ", q(WorkerSlotColumn::WorkerKey)))
        .bind(dialect::text(key))
        .push(&format!(
            " AND {slot} < {limit} ORDER BY {slot} LIMIT {want} FOR UPDATE SKIP LOCKED",
            slot = q(WorkerSlotColumn::Slot)
        ));
        Ok(conn.query_all_raw(sql.build()).await?.len())
    }
}
