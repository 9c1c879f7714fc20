//! A periodic job's row moved on: its next run, its schedule as used, and — when runs were
//! enqueued — the last one's time and message id.

use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, DbErr};
use uuid::Uuid;

use crate::sql::dialect::{self, quote};
use crate::sql::store::Store;
use crate::table::PeriodicColumn;

/// The last run enqueued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LastRun {
    /// The time the schedule named.
    pub(crate) at: DateTime<Utc>,
    /// Its row's message id.
    pub(crate) message_id: Uuid,
}

impl Store {
    /// Sets periodic job `name`'s next run (and schedule), and its last run when given.
    pub(crate) async fn advance_periodic<C: ConnectionTrait>(
        &self,
        conn: &C,
        name: &str,
        schedule: &str,
        next_run_at: DateTime<Utc>,
        last: Option<LastRun>,
        now: DateTime<Utc>,
    ) -> Result<(), DbErr> {
        let q = |c: PeriodicColumn| quote(self.backend, c.as_str());
        let mut sql = self.sql();
        sql.push("UPDATE ")
            .table(self.outbox.periodic_table())
            .push(&format!(" SET {} = ", q(PeriodicColumn::Schedule)))
            .bind(dialect::text(schedule))
            .push(&format!(", {} = ", q(PeriodicColumn::NextRunAt)))
            .bind(self.ts(next_run_at))
            .push(&format!(", {} = ", q(PeriodicColumn::UpdatedAt)))
            .bind(self.ts(now));
        if let Some(last) = last {
            sql.push(&format!(", {} = ", q(PeriodicColumn::LastRunAt)))
                .bind(self.ts(last.at))
                .push(&format!(", {} = ", q(PeriodicColumn::LastMessageId)))
                .bind(dialect::uuid(self.backend, last.message_id));
        }
        sql.push(&format!(" WHERE {} = ", q(PeriodicColumn::Name)))
            .bind(dialect::text(name));
        conn.execute_raw(sql.build()).await?;
        Ok(())
    }
}
