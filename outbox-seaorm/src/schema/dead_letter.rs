//! The consumers' dead-letter table (see [`crate::inbox::dead_letter`]).

use sea_orm::DbBackend;

use super::types::ColumnTypes;
use crate::config::Outbox;
use crate::sql::dialect::{quote, quote_table};
use crate::table::derived;

/// `CREATE TABLE IF NOT EXISTS` of the dead-letter table and its index.
pub(crate) fn statements(backend: DbBackend, outbox: &Outbox) -> Vec<String> {
    let name = outbox.tables().dead_letters.clone();
    let q = |n: &str| quote(backend, n);
    let ColumnTypes {
        key,
        ts,
        id,
        uuid,
        long_text: message,
        suffix,
    } = ColumnTypes::of(backend);
    let columns = format!(
        "{} {id}, {} {uuid} NULL, {} {key} NOT NULL, {} {key} NULL, {} {key} NULL, \
         {} {key} NULL, {} {key} NOT NULL, \
         {} text NOT NULL, {} integer NOT NULL, {} {key} NOT NULL, {} {message} NOT NULL, \
         {} {key} NOT NULL, {} {ts} NOT NULL, {} {ts} NULL, {} {key} NULL, {} {ts} NULL, \
         {} {ts} NULL, {} {key} NULL, {} text NULL",
        q("id"),
        q("message_id"),
        q("consumer"),
        q("event_type"),
        q("aggregate_type"),
        q("aggregate_id"),
        q("reason"),
        q("error"),
        q("attempts"),
        q("format"),
        q("message"),
        q("status"),
        q("dead_at"),
        q("requeued_at"),
        q("requeued_by"),
        q("resolved_at"),
        q("skipped_at"),
        q("skipped_by"),
        q("skip_reason"),
    );
    let index = derived(&name, "consumer_idx").table().to_owned();
    if backend == DbBackend::MySql {
        vec![format!(
            "CREATE TABLE IF NOT EXISTS {} ({columns}, KEY {} ({}, {}, {})){suffix}",
            quote_table(backend, &name),
            q(&index),
            q("consumer"),
            q("status"),
            q("id"),
        )]
    } else {
        vec![
            format!(
                "CREATE TABLE IF NOT EXISTS {} ({columns})",
                quote_table(backend, &name)
            ),
            format!(
                "CREATE INDEX IF NOT EXISTS {} ON {} ({}, {}, {})",
                q(&index),
                quote_table(backend, &name),
                q("consumer"),
                q("status"),
                q("id"),
            ),
        ]
    }
}

/// `DROP TABLE IF EXISTS` of the dead-letter table.
#[cfg(feature = "migration")]
pub(crate) fn drop_statement(backend: DbBackend, outbox: &Outbox) -> String {
    format!(
        "DROP TABLE IF EXISTS {}",
        quote_table(backend, &outbox.tables().dead_letters)
    )
}
