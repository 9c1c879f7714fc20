//! The slot lease of `<outbox>_log_slots`: which log relay streams from a slot (one at a
//! time; the others wait as standbys), whether the rows that were in the outbox table when
//! the slot was created have been published, and the last acknowledged position. Lease
//! times are the database server's clock (`clock_timestamp()`), so relays on different
//! hosts agree on expiry.

use sea_orm::sea_query::Value;
use sea_orm::{ConnectionTrait, DbErr, FromQueryResult};

use crate::sql::dialect::text;
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
#[derive(Debug, Clone, PartialEq, Eq, FromQueryResult)]
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

    /// Gives the lease up (shutdown), so that a standby takes over at once.
    pub(crate) async fn release_log_lease<C: ConnectionTrait>(
        &self,
        conn: &C,
        slot: &str,
        owner: &str,
    ) -> Result<(), DbErr> {
        let mut sql = self.sql();
        sql.push("UPDATE ")
            .table(&self.outbox.tables().relay.log_slots)
            .push(" SET owner = NULL, lease_expires_at = clock_timestamp() WHERE slot = ")
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
        let set = if done {
            "backfilled_at = clock_timestamp()"
        } else {
            "backfilled_at = NULL, slot_created_at = clock_timestamp()"
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

    /// Records the last acknowledged position of `slot` (status output).
    pub(crate) async fn record_log_acknowledged<C: ConnectionTrait>(
        &self,
        conn: &C,
        slot: &str,
        owner: &str,
        lsn: &str,
    ) -> Result<(), DbErr> {
        let mut sql = self.sql();
        sql.push("UPDATE ")
            .table(&self.outbox.tables().relay.log_slots)
            .push(" SET acknowledged_lsn = ")
            .bind(text(lsn))
            .push(", acknowledged_at = clock_timestamp() WHERE slot = ")
            .bind(text(slot))
            .push(" AND owner = ")
            .bind(text(owner));
        conn.execute_raw(sql.build()).await?;
        Ok(())
    }

    /// Whether the log relay's tables exist (an outbox installed before them has none).
    pub(crate) async fn log_tables_exist<C: ConnectionTrait>(
        &self,
        conn: &C,
    ) -> Result<bool, DbErr> {
        let table = &self.outbox.tables().relay.log_slots;
        let qualified = match table.schema() {
            Some(schema) => format!("{schema}.{}", table.table()),
            None => table.table().to_owned(),
        };
        let mut sql = self.sql();
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
        let mut sql = self.sql();
        sql.push(
            "SELECT slot, CASE WHEN lease_expires_at > clock_timestamp() THEN owner END AS owner, \
             backfilled_at IS NOT NULL AS backfilled, acknowledged_lsn FROM ",
        )
        .table(&self.outbox.tables().relay.log_slots)
        .push(" ORDER BY slot");
        let rows = conn.query_all_raw(sql.build()).await?;
        rows.iter()
            .map(|row| SlotOwner::from_query_result(row, ""))
            .collect()
    }
}
