//! The publication a log relay streams: `CREATE PUBLICATION <name> FOR TABLE <outbox>
//! WITH (publish = 'insert')` — inserts only, so the rows a retention cleanup or
//! `remove_after_insert` deletes never stream and the table needs no replica identity.

use sea_orm::{ConnectionTrait, DbErr, FromQueryResult};

use crate::sql::dialect::{quote, text};
use crate::sql::store::Store;

/// What an existing publication covers.
#[derive(Debug, Clone, PartialEq, Eq, FromQueryResult)]
pub(crate) struct PublicationState {
    /// Whether it publishes inserts.
    pub(crate) publishes_inserts: bool,
    /// Whether the outbox table is in it.
    pub(crate) has_outbox: bool,
    /// Whether it publishes every table (`FOR ALL TABLES`).
    pub(crate) all_tables: bool,
}

impl Store {
    /// The state of publication `name`, `None` when there is none.
    pub(crate) async fn publication<C: ConnectionTrait>(
        &self,
        conn: &C,
        name: &str,
    ) -> Result<Option<PublicationState>, DbErr> {
        let table = self.outbox.outbox_table();
        let mut sql = self.sql();
        sql.push(
            "SELECT p.pubinsert AS publishes_inserts, p.puballtables AS all_tables, \
             EXISTS (SELECT 1 FROM pg_publication_tables t WHERE t.pubname = p.pubname \
             AND t.schemaname = ",
        );
        match table.schema() {
            Some(schema) => sql.bind(text(schema)),
            None => sql.push("current_schema()"),
        };
        sql.push(" AND t.tablename = ")
            .bind(text(table.table()))
            .push(") AS has_outbox FROM pg_publication p WHERE p.pubname = ")
            .bind(text(name));
        match conn.query_one_raw(sql.build()).await? {
            Some(row) => Ok(Some(PublicationState::from_query_result(&row, "")?)),
            None => Ok(None),
        }
    }

    /// Creates publication `name` over the outbox table, inserts only. Fails with
    /// `duplicate_object` (42710) when it exists.
    pub(crate) async fn create_publication<C: ConnectionTrait>(
        &self,
        conn: &C,
        name: &str,
    ) -> Result<(), DbErr> {
        let mut sql = self.sql();
        sql.push(&format!(
            "CREATE PUBLICATION {} FOR TABLE ",
            quote(self.backend, name)
        ))
        .table(self.outbox.outbox_table())
        .push(" WITH (publish = 'insert')");
        conn.execute_raw(sql.build()).await?;
        Ok(())
    }
}
