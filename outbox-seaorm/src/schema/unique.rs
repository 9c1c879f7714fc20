//! The unique jobs' keys beside the outbox table (`<outbox>_unique`): one row per event type
//! and key held by a job — its message id, and until when a windowed key holds (`NULL`:
//! while the job is pending). The primary key is what makes a second commit of the same key
//! wait for the first and then find it taken. See [`Unique`](crate::job::Unique).

use sea_orm::DbBackend;
use sea_orm::sea_query::{Alias, Index, Table};

use super::outbox::with_indexes;
use super::types::{Kind, column, mysql_options, not_null, null};
use crate::config::Outbox;
use crate::sql::dialect::table_ref;
use crate::table::UniqueColumn;

/// The unique table's `CREATE TABLE IF NOT EXISTS`.
pub(super) fn statements(backend: DbBackend, outbox: &Outbox) -> Vec<String> {
    let col = |name: UniqueColumn, kind| column(backend, name.as_str(), kind);
    let mut table = Table::create();
    table
        .table(table_ref(outbox.unique_table()))
        .if_not_exists()
        .col(not_null(col(UniqueColumn::EventType, Kind::Key)))
        .col(not_null(col(UniqueColumn::UniqueKey, Kind::Key)))
        .col(not_null(col(UniqueColumn::MessageId, Kind::Uuid)))
        .col(null(col(UniqueColumn::ExpiresAt, Kind::Timestamp)))
        .col(not_null(col(UniqueColumn::CreatedAt, Kind::Timestamp)))
        .primary_key(
            Index::create()
                .col(Alias::new(UniqueColumn::EventType.as_str()))
                .col(Alias::new(UniqueColumn::UniqueKey.as_str())),
        );
    mysql_options(&mut table, backend);
    with_indexes(backend, table, Vec::new())
}
