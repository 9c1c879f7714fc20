//! The publication a log relay streams: `CREATE PUBLICATION <name> FOR TABLE <outbox>
//! WITH (publish = 'insert')` — inserts only, so the rows a retention cleanup or
//! `remove_after_insert` deletes never stream and the table needs no replica identity.

use sea_orm::{ConnectionTrait, DbErr, FromQueryResult};

use crate::sql::dialect::{quote, text};
use crate::sql::store::Store;
use crate::table::OutboxColumns;

/// The columns the log relay reads an envelope from (`relay::log`'s row decoding).
fn envelope_columns(c: &OutboxColumns) -> [&'static str; 12] {
    [
        c.message_id,
        c.event_type,
        c.version,
        c.aggregate_type,
        c.aggregate_id,
        c.correlation_id,
        c.causation_id,
        c.traceparent,
        c.tracestate,
        c.headers,
        c.occurred_at,
        c.payload,
    ]
}

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

    /// Creates publication `name` over the outbox table, inserts only — on PostgreSQL 15
    /// and later with a column list of the envelope's columns, so that the walsender
    /// neither formats nor sends the relay's bookkeeping columns (`status`, `attempts`,
    /// timestamps …); without a table in message mode (logical messages need a publication
    /// but no table). Fails with `duplicate_object` (42710) when it exists.
    pub(crate) async fn create_publication<C: ConnectionTrait>(
        &self,
        conn: &C,
        name: &str,
        server_major: i32,
    ) -> Result<(), DbErr> {
        let mut sql = self.sql();
        sql.push(&format!("CREATE PUBLICATION {}", quote(self.backend, name)));
        if self.outbox.write_mode().message_prefix().is_none() {
            sql.push(" FOR TABLE ").table(self.outbox.outbox_table());
            if server_major >= 15 {
                let columns = envelope_columns(self.outbox.columns())
                    .iter()
                    .map(|column| quote(self.backend, column))
                    .collect::<Vec<_>>()
                    .join(", ");
                sql.push(&format!(" ({columns})"));
            }
        }
        sql.push(" WITH (publish = 'insert')");
        conn.execute_raw(sql.build()).await?;
        Ok(())
    }
}
