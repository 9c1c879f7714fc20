//! `ANALYZE <outbox>` after a large move (PostgreSQL): the planner's statistics then know
//! the rows that just arrived.
//!
//! A move can put a hundred thousand rows into an outbox table whose statistics say it is
//! empty (it usually is, between bursts). PostgreSQL then plans the relay's claim and mark
//! on the smallest-looking index — a walk of every pending row per statement — until
//! autovacuum analyzes the table, up to a minute later: `outbox-bench relay --part
//! scheduled` drained 100 000 moved rows at 7 600 rows/s instead of 120 000. A relay that
//! has just moved that many rows knows it; an `ANALYZE` samples 30 000 rows (tens of
//! milliseconds). It needs the table's owner (PostgreSQL 15; `MAINTAIN` from 17): without
//! it PostgreSQL skips it with a warning, and autovacuum catches up as before.

use sea_orm::{ConnectionTrait, DbBackend, DbErr};

use crate::sql::store::Store;

impl Store {
    /// `ANALYZE <outbox table>` on PostgreSQL; nothing elsewhere (MariaDB's statistics are
    /// sampled on the fly, SQLite's claim has one plan).
    pub(crate) async fn analyze_outbox<C: ConnectionTrait>(&self, conn: &C) -> Result<(), DbErr> {
        if self.backend != DbBackend::Postgres {
            return Ok(());
        }
        let mut sql = self.sql();
        sql.push("ANALYZE ").table(self.outbox.outbox_table());
        conn.execute_raw(sql.build()).await?;
        Ok(())
    }
}
