//! The slot lease of `<outbox>_log_slots`: which log relay streams from a slot (one at a
//! time; the others wait as standbys), whether the rows that were in the outbox table when
//! the slot was created have been published, and the last acknowledged position. Lease
//! times are the database server's clock (`clock_timestamp()`, MariaDB's
//! `UTC_TIMESTAMP(6)`), so relays on different
//! hosts agree on expiry.

use sea_orm::sea_query::Value;
use sea_orm::{ConnectionTrait, DbBackend, DbErr, FromQueryResult};

use crate::sql::dialect::{self, text};
use crate::sql::store::Store;

/// The slot row a lease holder sees.
#[derive(Debug, Clone, PartialEq, Eq, FromQueryResult)]
pub(crate) struct SlotLease {
    /// Whether this outbox's relay created (or set out to create) the server's slot.
    pub(crate) ours: bool,
    /// Whether the table's rows of the slot's creation have been published.
    pub(crate) backfilled: bool,
}

/// A slot row, for status output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SlotOwner {
    /// The slot.
    pub(crate) slot: String,
    /// The relay holding the lease, if it has not expired.
    pub(crate) owner: Option<String>,
    /// Whether the backfill is done.
    pub(crate) backfilled: bool,
    /// The last acknowledged position (`0/16B3748`).
    pub(crate) acknowledged_lsn: Option<String>,
}

fn millis(ttl: std::time::Duration) -> Value {
    Value::BigInt(Some(i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX)))
}

impl Store {
    /// Takes (or renews) the lease of `slot` for `owner` until `ttl` from now, unless
    /// another owner holds it unexpired. `None`: another relay is active.
    pub(crate) async fn take_log_lease<C: ConnectionTrait>(
        &self,
        conn: &C,
        slot: &str,
        owner: &str,
        ttl: std::time::Duration,
    ) -> Result<Option<SlotLease>, DbErr> {
        if self.backend == DbBackend::MySql {
            return self.take_log_lease_mysql(conn, slot, owner, ttl).await;
        }
        let table = &self.outbox.tables().relay.log_slots;
        let mut sql = self.sql();
        sql.push("INSERT INTO ")
            .table(table)
            .push(" AS s (slot, created_at, owner, lease_expires_at) VALUES (")
            .bind(text(slot))
            .push(", clock_timestamp(), ")
            .bind(text(owner))
            .push(", clock_timestamp() + ")
            .bind(millis(ttl))
            .push(
                " * interval '1 millisecond') ON CONFLICT (slot) DO UPDATE SET \
                 owner = EXCLUDED.owner, lease_expires_at = EXCLUDED.lease_expires_at \
                 WHERE s.owner = EXCLUDED.owner OR s.owner IS NULL \
                 OR s.lease_expires_at < clock_timestamp() \
                 RETURNING s.slot_created_at IS NOT NULL AS ours, \
                 s.backfilled_at IS NOT NULL AS backfilled",
            );
        match conn.query_one_raw(sql.build()).await? {
            Some(row) => Ok(Some(SlotLease::from_query_result(&row, "")?)),
            None => Ok(None),
        }
    }

    /// [`take_log_lease`](Self::take_log_lease) on MariaDB (no `RETURNING` on an upsert):
    /// the row is made if missing (unowned, expired), the conditional `UPDATE` decides, and
    /// the winner reads the row back.
    async fn take_log_lease_mysql<C: ConnectionTrait>(
        &self,
        conn: &C,
        slot: &str,
        owner: &str,
        ttl: std::time::Duration,
    ) -> Result<Option<SlotLease>, DbErr> {
        let table = &self.outbox.tables().relay.log_slots;
        let mut sql = self.sql();
        sql.push("INSERT IGNORE INTO ")
            .table(table)
            .push(" (slot, created_at, lease_expires_at) VALUES (")
            .bind(text(slot))
            .push(", UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))");
        conn.execute_raw(sql.build()).await?;
        let (before, after) = dialect::server_now_plus_millis(self.backend);
        let mut sql = self.sql();
        sql.push("UPDATE ")
            .table(table)
            .push(&format!(" SET lease_expires_at = {before}"))
            .bind(millis(ttl))
            .push(&format!("{after}, owner = "))
            .bind(text(owner))
            .push(" WHERE slot = ")
            .bind(text(slot))
            .push(" AND (owner = ")
            .bind(text(owner))
            .push(" OR owner IS NULL OR lease_expires_at < UTC_TIMESTAMP(6))");
        if conn.execute_raw(sql.build()).await?.rows_affected() == 0 {
            return Ok(None);
        }
        let mut sql = self.sql();
        sql.push(
            "SELECT slot_created_at IS NOT NULL AS ours, backfilled_at IS NOT NULL AS backfilled \
             FROM ",
        )
        .table(table)
        .push(" WHERE slot = ")
        .bind(text(slot));
        let Some(row) = conn.query_one_raw(sql.build()).await? else {
            return Ok(None);
        };
        Ok(Some(SlotLease {
            ours: dialect::read_bool(&row, "", "ours")?,
            backfilled: dialect::read_bool(&row, "", "backfilled")?,
        }))
    }

    /// Gives the lease up (shutdown), so that a standby takes over at once.
    pub(crate) async fn release_log_lease<C: ConnectionTrait>(
        &self,
        conn: &C,
        slot: &str,
        owner: &str,
    ) -> Result<(), DbErr> {
        let now = dialect::server_now(self.backend);
        let mut sql = self.sql();
        sql.push("UPDATE ")
            .table(&self.outbox.tables().relay.log_slots)
            .push(&format!(
                " SET owner = NULL, lease_expires_at = {now} WHERE slot = "
            ))
            .bind(text(slot))
            .push(" AND owner = ")
            .bind(text(owner));
        conn.execute_raw(sql.build()).await?;
        Ok(())
    }

    /// Records that `owner` creates the server's slot now (`creating`: the slot is ours, not
    /// backfilled yet), or that its backfill is done.
    pub(crate) async fn set_log_backfilled<C: ConnectionTrait>(
        &self,
        conn: &C,
        slot: &str,
        owner: &str,
        done: bool,
    ) -> Result<(), DbErr> {
        let now = dialect::server_now(self.backend);
        let set = if done {
            format!("backfilled_at = {now}")
        } else {
            format!("backfilled_at = NULL, slot_created_at = {now}")
        };
        let mut sql = self.sql();
        sql.push("UPDATE ")
            .table(&self.outbox.tables().relay.log_slots)
            .push(&format!(" SET {set} WHERE slot = "))
            .bind(text(slot))
            .push(" AND owner = ")
            .bind(text(owner));
        conn.execute_raw(sql.build()).await?;
        Ok(())
    }

    /// Records the last acknowledged position of `slot`: status output on PostgreSQL (the
    /// slot holds the position), where the stream resumes on MariaDB. Written only while
    /// `owner` holds the lease; `false`: it does not (any more).
    pub(crate) async fn record_log_acknowledged<C: ConnectionTrait>(
        &self,
        conn: &C,
        slot: &str,
        owner: &str,
        position: &str,
    ) -> Result<bool, DbErr> {
        let now = dialect::server_now(self.backend);
        let mut sql = self.sql();
        sql.push("UPDATE ")
            .table(&self.outbox.tables().relay.log_slots)
            .push(" SET acknowledged_lsn = ")
            .bind(text(position))
            .push(&format!(", acknowledged_at = {now} WHERE slot = "))
            .bind(text(slot))
            .push(" AND owner = ")
            .bind(text(owner));
        Ok(conn.execute_raw(sql.build()).await?.rows_affected() == 1)
    }

    /// The stored acknowledged position of `slot` (`None`: none recorded).
    pub(crate) async fn log_acknowledged<C: ConnectionTrait>(
        &self,
        conn: &C,
        slot: &str,
    ) -> Result<Option<String>, DbErr> {
        let mut sql = self.sql();
        sql.push("SELECT acknowledged_lsn FROM ")
            .table(&self.outbox.tables().relay.log_slots)
            .push(" WHERE slot = ")
            .bind(text(slot));
        Ok(match conn.query_one_raw(sql.build()).await? {
            Some(row) => row.try_get::<Option<String>>("", "acknowledged_lsn")?,
            None => None,
        })
    }

    /// Forgets `slot`'s stored position and backfill (MariaDB's recovery after its binlogs
    /// were purged): the next start backfills the pending rows from a new snapshot. Not
    /// while a relay holds the lease; `false`: no such slot, or it is held.
    pub(crate) async fn reset_log_position<C: ConnectionTrait>(
        &self,
        conn: &C,
        slot: &str,
    ) -> Result<bool, DbErr> {
        let mut sql = self.sql();
        sql.push("UPDATE ")
            .table(&self.outbox.tables().relay.log_slots)
            .push(
                " SET acknowledged_lsn = NULL, acknowledged_at = NULL, backfilled_at = NULL, \
                 slot_created_at = NULL WHERE slot = ",
            )
            .bind(text(slot))
            .push(&format!(
                " AND (owner IS NULL OR lease_expires_at < {})",
                dialect::server_now(self.backend)
            ));
        Ok(conn.execute_raw(sql.build()).await?.rows_affected() == 1)
    }

    /// Whether the log relay's tables exist (an outbox installed before them has none).
    pub(crate) async fn log_tables_exist<C: ConnectionTrait>(
        &self,
        conn: &C,
    ) -> Result<bool, DbErr> {
        let table = &self.outbox.tables().relay.log_slots;
        let mut sql = self.sql();
        if self.backend == DbBackend::MySql {
            sql.push(
                "SELECT count(*) AS present FROM information_schema.tables WHERE table_schema = ",
            );
            match table.schema() {
                Some(schema) => sql.bind(text(schema)),
                None => sql.push("DATABASE()"),
            };
            sql.push(" AND table_name = ").bind(text(table.table()));
            let row = conn.query_one_raw(sql.build()).await?;
            return Ok(row
                .map(|row| dialect::read_i64(&row, "present"))
                .transpose()?
                .unwrap_or(0)
                > 0);
        }
        let qualified = match table.schema() {
            Some(schema) => format!("{schema}.{}", table.table()),
            None => table.table().to_owned(),
        };
        sql.push("SELECT to_regclass(")
            .bind(text(format!("\"{}\"", qualified.replace('.', "\".\""))))
            .push(") IS NOT NULL AS present");
        let row = conn.query_one_raw(sql.build()).await?;
        Ok(row
            .map(|row| row.try_get::<bool>("", "present"))
            .transpose()?
            .unwrap_or(false))
    }

    /// Every slot row of this outbox, with its live owner.
    pub(crate) async fn log_slot_owners<C: ConnectionTrait>(
        &self,
        conn: &C,
    ) -> Result<Vec<SlotOwner>, DbErr> {
        let now = dialect::server_now(self.backend);
        let mut sql = self.sql();
        sql.push(&format!(
            "SELECT slot, CASE WHEN lease_expires_at > {now} THEN owner END AS owner, \
             backfilled_at IS NOT NULL AS backfilled, acknowledged_lsn FROM "
        ))
        .table(&self.outbox.tables().relay.log_slots)
        .push(" ORDER BY slot");
        let rows = conn.query_all_raw(sql.build()).await?;
        rows.iter()
            .map(|row| {
                Ok(SlotOwner {
                    slot: row.try_get("", "slot")?,
                    owner: row.try_get("", "owner")?,
                    backfilled: dialect::read_bool(row, "", "backfilled")?,
                    acknowledged_lsn: row.try_get("", "acknowledged_lsn")?,
                })
            })
            .collect()
    }
}
