//! What the log relay checks on MariaDB before it reads the binlog: that it is MariaDB, the
//! binlog settings
//! (`log_bin`, `binlog_format`, `binlog_row_image`, `binlog_row_metadata`), the server's own
//! id, the current database and user, and the user's global grants.

use sea_orm::{ConnectionTrait, DbErr, FromQueryResult, Statement};

use crate::sql::store::Store;

/// The server facts a binlog relay needs at start-up.
#[derive(Debug, Clone, PartialEq, Eq, FromQueryResult)]
pub(crate) struct BinlogPreflight {
    /// `@@log_bin`: 1 when the binlog is written.
    pub(crate) log_bin: i64,
    /// `@@binlog_format`: `ROW` is required.
    pub(crate) binlog_format: String,
    /// `@@binlog_row_image`: `FULL` is required (every column of an insert).
    pub(crate) binlog_row_image: String,
    /// `@@binlog_row_metadata`: `FULL` is required (column names in the table maps).
    pub(crate) binlog_row_metadata: String,
    /// `@@server_id`: the relay's replica id must differ.
    pub(crate) server_id: i64,
    /// `DATABASE()`: where an unqualified outbox table lives.
    pub(crate) database: Option<String>,
    /// `CURRENT_USER()`: the account whose grants apply.
    pub(crate) user: String,
    /// `@@gtid_binlog_pos`: the last GTID of each domain in the server's binlog.
    pub(crate) binlog_position: String,
}

impl Store {
    /// `VERSION()`: MariaDB's carries `-MariaDB` (MySQL's binlog is another protocol).
    pub(crate) async fn server_version<C: ConnectionTrait>(
        &self,
        conn: &C,
    ) -> Result<String, DbErr> {
        conn.query_one_raw(Statement::from_string(
            self.backend,
            "SELECT VERSION() AS version",
        ))
        .await?
        .ok_or_else(|| DbErr::RecordNotFound("VERSION() returned no row".into()))?
        .try_get("", "version")
    }

    /// Reads the [`BinlogPreflight`] facts and the current user's grants (`SHOW GRANTS`,
    /// one statement per row).
    pub(crate) async fn binlog_preflight<C: ConnectionTrait>(
        &self,
        conn: &C,
    ) -> Result<(BinlogPreflight, Vec<String>), DbErr> {
        let sql = "SELECT CAST(@@log_bin AS SIGNED) AS log_bin, \
                   CAST(@@binlog_format AS CHAR) AS binlog_format, \
                   CAST(@@binlog_row_image AS CHAR) AS binlog_row_image, \
                   CAST(@@binlog_row_metadata AS CHAR) AS binlog_row_metadata, \
                   CAST(@@server_id AS SIGNED) AS server_id, \
                   DATABASE() AS `database`, CURRENT_USER() AS user, \
                   CAST(@@gtid_binlog_pos AS CHAR) AS binlog_position";
        let row = conn
            .query_one_raw(Statement::from_string(self.backend, sql))
            .await?
            .ok_or_else(|| DbErr::RecordNotFound("the preflight query returned no row".into()))?;
        let preflight = BinlogPreflight::from_query_result(&row, "")?;
        let grants = conn
            .query_all_raw(Statement::from_string(self.backend, "SHOW GRANTS"))
            .await?
            .iter()
            .map(|row| row.try_get_by_index::<String>(0))
            .collect::<Result<_, _>>()?;
        Ok((preflight, grants))
    }
}
