//! Reading scheduled rows back as [`ScheduledRecord`]s: by key or message id, in due
//! order, locked for an operator's change when asked; their count and the next due time.

use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, DbBackend, DbErr, FromQueryResult};
use uuid::Uuid;

use crate::record::{OutboxRecord, ScheduledRecord};
use crate::sql::columns;
use crate::sql::dialect::{self, quote};
use crate::sql::store::Store;
use crate::table::SCHEDULE_KEY_COLUMN;

/// Which scheduled rows.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Which<'a> {
    /// Every row.
    All,
    /// The row of this message id.
    MessageId(Uuid),
    /// The rows of this key.
    Key(&'a str),
}

impl Store {
    /// Scheduled rows in due order (then `seq`), at most `limit`; locked (`FOR UPDATE`,
    /// PostgreSQL and MariaDB) when `lock`.
    pub(crate) async fn scheduled_rows<C: ConnectionTrait>(
        &self,
        conn: &C,
        which: Which<'_>,
        limit: u64,
        lock: bool,
    ) -> Result<Vec<ScheduledRecord>, DbErr> {
        let c = self.outbox.columns();
        let q = |name: &str| quote(self.backend, name);
        let list = columns::ALL
            .iter()
            .map(|column| format!("{} AS {}", q(column.name(c)), q(column.standard())))
            .chain([format!(
                "{} AS {}",
                q(SCHEDULE_KEY_COLUMN),
                q(SCHEDULE_KEY_COLUMN)
            )])
            .collect::<Vec<_>>()
            .join(", ");
        let mut sql = self.sql();
        sql.push(&format!("SELECT {list} FROM "))
            .table(self.outbox.scheduled_table());
        match which {
            Which::All => {}
            Which::MessageId(id) => {
                sql.push(&format!(" WHERE {} = ", q(c.message_id)))
                    .bind(dialect::uuid(self.backend, id));
            }
            Which::Key(key) => {
                sql.push(&format!(" WHERE {} = ", q(SCHEDULE_KEY_COLUMN)))
                    .bind(dialect::text(key));
            }
        }
        sql.push(&format!(
            " ORDER BY {}, {} LIMIT {limit}",
            q(c.next_attempt_at),
            q(c.seq)
        ));
        if lock && self.backend != DbBackend::Sqlite {
            sql.push(" FOR UPDATE");
        }
        let rows = conn.query_all_raw(sql.build()).await?;
        rows.iter()
            .map(|row| {
                Ok(ScheduledRecord {
                    record: OutboxRecord::from_query_result(row, "")?,
                    key: row.try_get("", SCHEDULE_KEY_COLUMN)?,
                })
            })
            .collect()
    }

    /// How many rows wait in the scheduled table, counted up to `cap` + 1 (a bounded walk
    /// of the due index, whatever the table holds), and the earliest due time (the index's
    /// first entry).
    pub(crate) async fn scheduled_summary<C: ConnectionTrait>(
        &self,
        conn: &C,
        cap: u64,
    ) -> Result<(u64, Option<DateTime<Utc>>), DbErr> {
        let c = self.outbox.columns();
        let q = |name: &str| quote(self.backend, name);
        let mut sql = self.sql();
        sql.push("SELECT (SELECT count(*) FROM (SELECT 1 AS one FROM ")
            .table(self.outbox.scheduled_table())
            .push(&format!(
                " LIMIT {}) AS w) AS n, (SELECT min({}) FROM ",
                cap.saturating_add(1),
                q(c.next_attempt_at)
            ))
            .table(self.outbox.scheduled_table())
            .push(") AS next_due");
        let Some(row) = conn.query_one_raw(sql.build()).await? else {
            return Ok((0, None));
        };
        let count = dialect::read_i64(&row, "n")?;
        let next = dialect::read_timestamp(&row, "next_due")?;
        Ok((u64::try_from(count).unwrap_or(0), next))
    }
}
