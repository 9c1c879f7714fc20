//! MariaDB's binlog position now (`@@gtid_binlog_pos`): how far a binlog relay's stored
//! position is behind the server.

use sea_orm::{ConnectionTrait, DbErr, Statement};

use crate::sql::store::Store;

impl Store {
    /// `@@gtid_binlog_pos`: the last GTID of each domain in the server's binlog.
    pub(crate) async fn binlog_position<C: ConnectionTrait>(
        &self,
        conn: &C,
    ) -> Result<String, DbErr> {
        let sql = "SELECT CAST(@@gtid_binlog_pos AS CHAR) AS binlog_position";
        conn.query_one_raw(Statement::from_string(self.backend, sql))
            .await?
            .ok_or_else(|| DbErr::RecordNotFound("@@gtid_binlog_pos returned no row".into()))?
            .try_get("", "binlog_position")
    }
}
