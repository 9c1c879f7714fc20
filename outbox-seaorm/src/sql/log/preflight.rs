//! What the log relay checks before it touches a slot: the server's `wal_level`, whether
//! the connected role may replicate, and how many replication slots are left.

use sea_orm::{ConnectionTrait, DbErr, FromQueryResult, Statement};

use crate::sql::store::Store;

/// The server facts a log relay needs at start-up.
#[derive(Debug, Clone, PartialEq, Eq, FromQueryResult)]
pub(crate) struct Preflight {
    /// `wal_level`: `logical` is required.
    pub(crate) wal_level: String,
    /// `rolreplication OR rolsuper` of the connected role.
    pub(crate) can_replicate: bool,
    /// `max_replication_slots`.
    pub(crate) max_slots: i32,
    /// Slots in use (of any database and kind).
    pub(crate) used_slots: i64,
    /// The server's major version (`server_version_num / 10000`).
    pub(crate) server_major: i32,
    /// `current_database()`: the database the slot will belong to.
    pub(crate) database: String,
    /// `current_user`: the role that replicates.
    pub(crate) role: String,
}

impl Store {
    /// Reads the [`Preflight`] facts in one round trip.
    pub(crate) async fn log_preflight<C: ConnectionTrait>(
        &self,
        conn: &C,
    ) -> Result<Preflight, DbErr> {
        let sql = "SELECT current_setting('wal_level') AS wal_level, \
                   COALESCE((SELECT rolreplication OR rolsuper FROM pg_roles \
                   WHERE rolname = current_user), false) AS can_replicate, \
                   current_setting('max_replication_slots')::int4 AS max_slots, \
                   (SELECT count(*) FROM pg_replication_slots)::int8 AS used_slots, \
                   (current_setting('server_version_num')::int4 / 10000) AS server_major, \
                   current_database()::text AS database, current_user::text AS role";
        let row = conn
            .query_one_raw(Statement::from_string(self.backend, sql))
            .await?
            .ok_or_else(|| DbErr::RecordNotFound("the preflight query returned no row".into()))?;
        Preflight::from_query_result(&row, "")
    }
}
