//! The counts of the status report: pending rows (in backoff, held back, the oldest
//! claimable), given-up rows by status and event type, pending rows per worker key.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use outbox_core::policy::DeadLetterPolicy;
use sea_orm::{ConnectionTrait, DbErr};

use crate::sql::dialect::{self, quote, quote_table};
use crate::sql::statement::Sql;
use crate::sql::store::Store;
use crate::status::OutboxStatus;

/// The pending rows of an outbox, as the relay's claim sees them.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct PendingSummary {
    /// Every pending row.
    pub(crate) pending: i64,
    /// Pending rows in backoff.
    pub(crate) in_backoff: i64,
    /// Due rows held back behind an earlier row of their aggregate.
    pub(crate) held: i64,
    /// `created_at` of the oldest claimable row.
    pub(crate) oldest: Option<DateTime<Utc>>,
    /// `created_at` of the oldest held-back row.
    pub(crate) oldest_held: Option<DateTime<Utc>>,
}

/// Given-up rows: dead and failed ones per event type, and the skipped ones.
#[derive(Debug, Clone, Default)]
pub(crate) struct GivenUpCounts {
    /// Dead rows per event type.
    pub(crate) dead: BTreeMap<String, u64>,
    /// Failed rows per event type.
    pub(crate) failed: BTreeMap<String, u64>,
    /// Skipped rows.
    pub(crate) skipped: u64,
}

impl Store {
    /// Per pending row: due (not in backoff, as the relay's claim sees it), and held back
    /// (the claim would not take it); summed.
    pub(crate) async fn pending_summary<C: ConnectionTrait>(
        &self,
        conn: &C,
        now: DateTime<Utc>,
        ordered: bool,
        dead_letters: DeadLetterPolicy,
    ) -> Result<PendingSummary, DbErr> {
        let c = self.outbox.columns();
        let q = |name: &str| quote(self.backend, name);
        let mut sql = Sql::new(self.backend);
        sql.push(
            "SELECT COUNT(*) AS pending, COUNT(CASE WHEN t.due = 0 THEN 1 END) AS parked, \
             COUNT(CASE WHEN t.due = 1 AND t.held = 1 THEN 1 END) AS held, \
             MIN(CASE WHEN t.due = 1 AND t.held = 0 THEN t.created END) AS oldest, \
             MIN(CASE WHEN t.due = 1 AND t.held = 1 THEN t.created END) AS oldest_held \
             FROM (SELECT ",
        )
        .push(&format!("o.{} AS created, CASE WHEN ", q(c.created_at)));
        self.due_time(&mut sql, "o", now);
        sql.push(" THEN 1 ELSE 0 END AS due, CASE WHEN ");
        self.held_back(&mut sql, now, ordered, dead_letters);
        sql.push(&format!(
            " THEN 1 ELSE 0 END AS held FROM {table} o WHERE o.{status} = 'pending') t",
            table = quote_table(self.backend, self.outbox.outbox_table()),
            status = q(c.status)
        ));
        let Some(row) = conn.query_one_raw(sql.build()).await? else {
            return Ok(PendingSummary::default());
        };
        Ok(PendingSummary {
            pending: dialect::read_i64(&row, "pending")?,
            in_backoff: dialect::read_i64(&row, "parked")?,
            held: dialect::read_i64(&row, "held")?,
            oldest: dialect::read_timestamp(&row, "oldest")?,
            oldest_held: dialect::read_timestamp(&row, "oldest_held")?,
        })
    }

    /// Dead and failed rows per event type, and the skipped rows.
    pub(crate) async fn given_up_counts<C: ConnectionTrait>(
        &self,
        conn: &C,
    ) -> Result<GivenUpCounts, DbErr> {
        let c = self.outbox.columns();
        let q = |name: &str| quote(self.backend, name);
        let mut sql = Sql::new(self.backend);
        sql.push(&format!(
            "SELECT {status} AS status, {event} AS event_type, COUNT(*) AS n FROM {table} \
             WHERE {status} IN ('dead', 'failed', 'skipped') GROUP BY {status}, {event}",
            status = q(c.status),
            event = q(c.event_type),
            table = quote_table(self.backend, self.outbox.outbox_table()),
        ));
        let mut counts = GivenUpCounts::default();
        for row in conn.query_all_raw(sql.build()).await? {
            let status: String = row.try_get("", "status")?;
            let count = u64::try_from(dialect::read_i64(&row, "n")?).unwrap_or(0);
            match OutboxStatus::parse(&status) {
                Some(OutboxStatus::Dead) => {
                    counts.dead.insert(row.try_get("", "event_type")?, count);
                }
                Some(OutboxStatus::Failed) => {
                    counts.failed.insert(row.try_get("", "event_type")?, count);
                }
                _ => counts.skipped += count,
            }
        }
        Ok(counts)
    }

    /// Pending keyed rows per worker key, with the `created_at` of each key's oldest
    /// claimable row (served by the `(worker_key, seq)` index of pending keyed rows).
    pub(crate) async fn pending_by_worker_key<C: ConnectionTrait>(
        &self,
        conn: &C,
        now: DateTime<Utc>,
    ) -> Result<Vec<(String, u64, Option<DateTime<Utc>>)>, DbErr> {
        let c = self.outbox.columns();
        let q = |name: &str| quote(self.backend, name);
        let mut sql = Sql::new(self.backend);
        sql.push(&format!(
            "SELECT {key} AS worker_key, COUNT(*) AS pending, MIN(CASE WHEN ",
            key = q(c.worker_key),
        ));
        self.due_time(&mut sql, "", now);
        sql.push(&format!(
            " THEN {created} END) AS oldest FROM {table} WHERE {status} = 'pending' AND {key} \
             IS NOT NULL GROUP BY {key}",
            created = q(c.created_at),
            table = quote_table(self.backend, self.outbox.outbox_table()),
            status = q(c.status),
            key = q(c.worker_key),
        ));
        conn.query_all_raw(sql.build())
            .await?
            .iter()
            .map(|row| {
                Ok((
                    row.try_get("", "worker_key")?,
                    u64::try_from(dialect::read_i64(row, "pending")?).unwrap_or(0),
                    dialect::read_timestamp(row, "oldest")?,
                ))
            })
            .collect()
    }
}
