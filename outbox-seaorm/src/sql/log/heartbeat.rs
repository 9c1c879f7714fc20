//! The idle-database heartbeat: a transactional logical message that the log relay's own
//! stream receives and acknowledges, so the slot moves on while the outbox is idle (PG 15
//! skips empty transactions: without it, other tables' writes pin WAL behind the slot).

use sea_orm::{ConnectionTrait, DbErr};

use crate::sql::dialect::text;
use crate::sql::store::Store;

impl Store {
    /// Writes a transactional logical message with `prefix` and an empty body.
    pub(crate) async fn emit_heartbeat<C: ConnectionTrait>(
        &self,
        conn: &C,
        prefix: &str,
    ) -> Result<(), DbErr> {
        let mut sql = self.sql();
        sql.push("SELECT pg_logical_emit_message(true, ")
            .bind(text(prefix))
            .push(", '')::text");
        conn.query_one_raw(sql.build()).await?;
        Ok(())
    }
}
