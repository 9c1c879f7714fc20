//! The consumers' parked-message table (see [`crate::inbox::parked`]).

use sea_orm::DbBackend;
use sea_orm::sea_query::{Alias, Index, Table};

use super::outbox::with_indexes;
use super::types::{Kind, column, mysql_options, not_null, null};
use crate::config::Outbox;
use crate::sql::dialect::table_ref;
use crate::table::index_name;

/// `CREATE TABLE IF NOT EXISTS` of the parked-message table and its indexes.
pub(crate) fn statements(backend: DbBackend, outbox: &Outbox) -> Vec<String> {
    let name = &outbox.tables().parked;
    let col = |n, k| column(backend, n, k);
    let mut table = Table::create();
    table
        .table(table_ref(name))
        .if_not_exists()
        .col(col("id", Kind::Id))
        .col(not_null(col("consumer", Kind::Key)))
        .col(not_null(col("aggregate_type", Kind::Key)))
        .col(not_null(col("aggregate_id", Kind::Key)))
        .col(not_null(col("message_id", Kind::Uuid)))
        .col(not_null(col("event_type", Kind::Key)))
        .col(not_null(col("message", Kind::LongText)))
        .col(not_null(col("attempts", Kind::Int)))
        .col(not_null(col("next_attempt_at", Kind::Timestamp)))
        .col(null(col("last_error", Kind::Text)))
        .col(not_null(col("parked_at", Kind::Timestamp)));
    mysql_options(&mut table, backend);
    let mut unique = Index::create();
    unique
        .name(index_name(name, "message_idx"))
        .table(table_ref(name))
        .unique()
        .col(Alias::new("consumer"))
        .col(Alias::new("message_id"));
    let mut order = Index::create();
    order
        .name(index_name(name, "aggregate_idx"))
        .table(table_ref(name))
        .col(Alias::new("consumer"))
        .col(Alias::new("aggregate_type"))
        .col(Alias::new("aggregate_id"))
        .col(Alias::new("id"));
    with_indexes(backend, table, vec![unique, order])
}
