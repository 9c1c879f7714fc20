//! A replication slot as `pg_replication_slots` shows it: whether it exists, its plugin,
//! whether a relay streams from it, how far behind it is, and whether the server still
//! keeps its WAL (`wal_status`).

use sea_orm::{ConnectionTrait, DbErr, FromQueryResult};

use crate::sql::dialect::text;
use crate::sql::store::Store;

/// One row of `pg_replication_slots`.
#[derive(Debug, Clone, PartialEq, Eq, FromQueryResult)]
pub(crate) struct SlotRow {
    /// `logical` or `physical`.
    pub(crate) slot_type: String,
    /// The output plugin (`pgoutput` for ours).
    pub(crate) plugin: Option<String>,
    /// The database a logical slot decodes.
    pub(crate) database: Option<String>,
    /// Whether a consumer streams from it now.
    pub(crate) active: bool,
    /// `reserved`, `extended`, `unreserved` or `lost` (`lost`: invalidated).
    pub(crate) wal_status: Option<String>,
    /// Bytes of WAL between the server's current position and the slot's confirmed flush
    /// position (what a restart would read again and what the server keeps for it).
    pub(crate) lag_bytes: Option<i64>,
    /// The confirmed flush position, as PostgreSQL writes an LSN (`0/16B3748`).
    pub(crate) confirmed_flush: Option<String>,
}

impl Store {
    /// The slot called `name`, `None` when there is none.
    pub(crate) async fn slot<C: ConnectionTrait>(
        &self,
        conn: &C,
        name: &str,
    ) -> Result<Option<SlotRow>, DbErr> {
        let mut sql = self.sql();
        sql.push(
            "SELECT slot_type::text AS slot_type, plugin::text AS plugin, \
             database::text AS database, active, wal_status, \
             pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::int8 AS lag_bytes, \
             confirmed_flush_lsn::text AS confirmed_flush \
             FROM pg_replication_slots WHERE slot_name = ",
        )
        .bind(text(name));
        match conn.query_one_raw(sql.build()).await? {
            Some(row) => Ok(Some(SlotRow::from_query_result(&row, "")?)),
            None => Ok(None),
        }
    }

    /// Drops the slot called `name` (it must not be active). Its unacknowledged changes
    /// are gone with it.
    pub(crate) async fn drop_slot<C: ConnectionTrait>(
        &self,
        conn: &C,
        name: &str,
    ) -> Result<(), DbErr> {
        let mut sql = self.sql();
        sql.push("SELECT pg_drop_replication_slot(")
            .bind(text(name))
            .push(")::text");
        conn.query_one_raw(sql.build()).await?;
        Ok(())
    }
}
