//! Writes the slot rows of every limited worker key, `0` to its limit − 1, keeping those
//! already there.
//!
//! ```sql
//! INSERT INTO outbox_worker_slots (worker_key, slot) VALUES (:key, 0), (:key, 1), …
//!   ON CONFLICT DO NOTHING                 -- PostgreSQL, SQLite
//!   ON DUPLICATE KEY UPDATE slot = slot    -- MariaDB
//! ```
//!
//! MariaDB takes an upsert rather than `INSERT IGNORE`: relays starting together then queue
//! on the rows' exclusive locks instead of share-locking them into a deadlock (the shape
//! the periodic jobs' table deadlocked in).

use sea_orm::{ConnectionTrait, DbBackend, DbErr};

use crate::sql::dialect::{self, quote};
use crate::sql::store::Store;
use crate::table::WorkerSlotColumn;

impl Store {
    /// Writes the missing slot rows of every limited worker key (none: no statement).
    pub(crate) async fn ensure_worker_slots<C: ConnectionTrait>(
        &self,
        conn: &C,
    ) -> Result<(), DbErr> {
        let limits: Vec<(&str, u32)> = self.outbox.worker_key_limits().collect();
        if limits.is_empty() {
            return Ok(());
        }
        let q = |c: WorkerSlotColumn| quote(self.backend, c.as_str());
        let mut sql = self.sql();
        sql.push("INSERT INTO ")
            .table(self.outbox.worker_slots_table())
            .push(&format!(
                " ({}, {}) VALUES ",
                q(WorkerSlotColumn::WorkerKey),
                q(WorkerSlotColumn::Slot)
            ));
        let mut first = true;
        for (key, limit) in limits {
            for slot in 0..limit {
                if !first {
                    sql.push(", ");
                }
                first = false;
                sql.push("(")
                    .bind(dialect::text(key))
                    .push(&format!(", {slot})"));
            }
        }
        match self.backend {
            DbBackend::MySql => {
                let slot = q(WorkerSlotColumn::Slot);
                sql.push(&format!(" ON DUPLICATE KEY UPDATE {slot} = {slot}"))
            }
            _ => sql.push(" ON CONFLICT DO NOTHING"),
        };
        conn.execute_raw(sql.build()).await?;
        Ok(())
    }
}
