//! The consumers' parked-message table (see [`crate::inbox::parked`]).

use sea_orm::DbBackend;

use super::types::ColumnTypes;
use crate::config::Outbox;
use crate::sql::dialect::{quote, quote_table};
use crate::table::derived;

/// `CREATE TABLE IF NOT EXISTS` of the parked-message table and its indexes.
pub(crate) fn statements(backend: DbBackend, outbox: &Outbox) -> Vec<String> {
    let name = outbox.tables().parked.clone();
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
        "{} {id}, {} {key} NOT NULL, {} {key} NOT NULL, {} {key} NOT NULL, {} {uuid} NOT NULL, \
         {} {key} NOT NULL, {} {message} NOT NULL, {} integer NOT NULL, {} {ts} NOT NULL, \
         {} text NULL, {} {ts} NOT NULL",
        q("id"),
        q("consumer"),
        q("aggregate_type"),
        q("aggregate_id"),
        q("message_id"),
        q("event_type"),
        q("message"),
        q("attempts"),
        q("next_attempt_at"),
        q("last_error"),
        q("parked_at"),
    );
    let unique = derived(&name, "message_idx").table().to_owned();
    let order = derived(&name, "aggregate_idx").table().to_owned();
    let quoted = quote_table(backend, &name);
    if backend == DbBackend::MySql {
        vec![format!(
            "CREATE TABLE IF NOT EXISTS {quoted} ({columns}, UNIQUE KEY {} ({}, {}), \
             KEY {} ({}, {}, {}, {})){suffix}",
            q(&unique),
            q("consumer"),
            q("message_id"),
            q(&order),
            q("consumer"),
            q("aggregate_type"),
            q("aggregate_id"),
            q("id"),
        )]
    } else {
        vec![
            format!("CREATE TABLE IF NOT EXISTS {quoted} ({columns})"),
            format!(
                "CREATE UNIQUE INDEX IF NOT EXISTS {} ON {quoted} ({}, {})",
                q(&unique),
                q("consumer"),
                q("message_id"),
            ),
            format!(
                "CREATE INDEX IF NOT EXISTS {} ON {quoted} ({}, {}, {}, {})",
                q(&order),
                q("consumer"),
                q("aggregate_type"),
                q("aggregate_id"),
                q("id"),
            ),
        ]
    }
}

/// `DROP TABLE IF EXISTS` of the parked-message table.
#[cfg(feature = "migration")]
pub(crate) fn drop_statement(backend: DbBackend, outbox: &Outbox) -> String {
    format!(
        "DROP TABLE IF EXISTS {}",
        quote_table(backend, &outbox.tables().parked)
    )
}
