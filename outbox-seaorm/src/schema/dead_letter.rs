//! The consumers' dead-letter table (see [`crate::inbox::dead_letter`]).

use sea_orm::DbBackend;
use sea_orm::sea_query::{Alias, Index, Table};

use super::outbox::with_indexes;
use super::types::{Kind, column, mysql_options, not_null, null};
use crate::config::Outbox;
use crate::sql::dialect::table_ref;
use crate::table::index_name;

/// `CREATE TABLE IF NOT EXISTS` of the dead-letter table and its index.
pub(crate) fn statements(backend: DbBackend, outbox: &Outbox) -> Vec<String> {
    let name = &outbox.tables().dead_letters;
    let col = |n, k| column(backend, n, k);
    let mut table = Table::create();
    table
        .table(table_ref(name))
        .if_not_exists()
        .col(col("id", Kind::Id))
        .col(null(col("message_id", Kind::Uuid)))
        .col(not_null(col("consumer", Kind::Key)))
        .col(null(col("event_type", Kind::Key)))
        .col(null(col("aggregate_type", Kind::Key)))
        .col(null(col("aggregate_id", Kind::Key)))
        .col(not_null(col("reason", Kind::Key)))
        .col(not_null(col("error", Kind::Text)))
        .col(not_null(col("attempts", Kind::Int)))
        .col(not_null(col("format", Kind::Key)))
        .col(not_null(col("message", Kind::LongText)))
        .col(not_null(col("status", Kind::Key)))
        .col(not_null(col("dead_at", Kind::Timestamp)))
        .col(null(col("requeued_at", Kind::Timestamp)))
        .col(null(col("requeued_by", Kind::Key)))
        .col(null(col("resolved_at", Kind::Timestamp)))
        .col(null(col("skipped_at", Kind::Timestamp)))
        .col(null(col("skipped_by", Kind::Key)))
        .col(null(col("skip_reason", Kind::Text)));
    mysql_options(&mut table, backend);
    let mut by_consumer = Index::create();
    by_consumer
        .name(index_name(name, "consumer_idx"))
        .table(table_ref(name))
        .col(Alias::new("consumer"))
        .col(Alias::new("status"))
        .col(Alias::new("id"));
    with_indexes(backend, table, vec![by_consumer])
}
