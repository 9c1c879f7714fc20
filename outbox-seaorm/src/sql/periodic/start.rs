//! A periodic job's first row: its schedule and next run, unless another relay wrote it
//! first (`ON CONFLICT DO NOTHING`). On MariaDB the look begins with it, as `ON DUPLICATE KEY
//! UPDATE name = name`: a locking read of a row that does not exist yet holds the gap, and
//! relays that all read it and then insert deadlock on each other's gap (CI caught three
//! relays doing so); the upsert locks the row exclusively at once, and the others queue.

use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, DbBackend, DbErr};

use crate::sql::dialect::{self, quote};
use crate::sql::store::Store;
use crate::table::PeriodicColumn;

impl Store {
    /// Writes periodic job `name`'s first row, due at `next_run_at`, unless it exists.
    pub(crate) async fn start_periodic<C: ConnectionTrait>(
        &self,
        conn: &C,
        name: &str,
        schedule: &str,
        next_run_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<(), DbErr> {
        let q = |c: PeriodicColumn| quote(self.backend, c.as_str());
        let mut sql = self.sql();
        sql.push("INSERT INTO ")
            .table(self.outbox.periodic_table())
            .push(&format!(
                " ({}, {}, {}, {}) VALUES (",
                q(PeriodicColumn::Name),
                q(PeriodicColumn::Schedule),
                q(PeriodicColumn::NextRunAt),
                q(PeriodicColumn::UpdatedAt)
            ))
            .bind(dialect::text(name))
            .push(", ")
            .bind(dialect::text(schedule))
            .push(", ")
            .bind(self.ts(next_run_at))
            .push(", ")
            .bind(self.ts(now))
            .push(")");
        let name = q(PeriodicColumn::Name);
        if self.backend == DbBackend::MySql {
            sql.push(&format!(" ON DUPLICATE KEY UPDATE {name} = {name}"));
        } else {
            sql.push(&format!(" ON CONFLICT ({name}) DO NOTHING"));
        }
        conn.execute_raw(sql.build()).await?;
        Ok(())
    }
}
