//! A periodic job's row, locked until the enqueue's transaction ends (`FOR UPDATE` on
//! PostgreSQL and MariaDB — by primary key; SQLite's transaction began `IMMEDIATE`): a
//! second relay waits, then sees the advanced row and enqueues nothing.

use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, DbBackend, DbErr};

use super::{read_record, record_columns};
use crate::sql::dialect;
use crate::sql::store::Store;
use crate::table::PeriodicColumn;

/// What the enqueue needs of a periodic job's row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PeriodicState {
    /// The cron expression its next run was computed from.
    pub(crate) schedule: String,
    /// When its next run is due.
    pub(crate) next_run_at: DateTime<Utc>,
}

impl Store {
    /// The row of periodic job `name`, locked; `None` when it has none yet.
    pub(crate) async fn lock_periodic<C: ConnectionTrait>(
        &self,
        conn: &C,
        name: &str,
    ) -> Result<Option<PeriodicState>, DbErr> {
        let mut sql = self.sql();
        sql.push(&format!("SELECT {} FROM ", record_columns(self.backend)))
            .table(self.outbox.periodic_table())
            .push(&format!(
                " WHERE {} = ",
                dialect::quote(self.backend, PeriodicColumn::Name.as_str())
            ))
            .bind(dialect::text(name));
        if self.backend != DbBackend::Sqlite {
            sql.push(" FOR UPDATE");
        }
        let Some(row) = conn.query_one_raw(sql.build()).await? else {
            return Ok(None);
        };
        let record = read_record(&row)?;
        Ok(Some(PeriodicState {
            schedule: record.schedule,
            next_run_at: record.next_run_at,
        }))
    }
}
