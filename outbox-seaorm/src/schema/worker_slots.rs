//! The worker keys' concurrency slots beside the outbox table (`<outbox>_worker_slots`): one
//! row per worker key and slot, `0` to the key's limit − 1. A relay's batch locks free slots
//! of a limited key (`FOR UPDATE SKIP LOCKED`) for as long as it holds that many claimed
//! rows of the key; see
//! [`OutboxBuilder::worker_key_limit`](crate::OutboxBuilder::worker_key_limit).

use sea_orm::DbBackend;
use sea_orm::sea_query::{Alias, Index, Table};

use super::outbox::with_indexes;
use super::types::{Kind, column, mysql_options, not_null};
use crate::config::Outbox;
use crate::sql::dialect::table_ref;
use crate::table::WorkerSlotColumn;

/// The worker slots table's `CREATE TABLE IF NOT EXISTS`.
pub(super) fn statements(backend: DbBackend, outbox: &Outbox) -> Vec<String> {
    let col = |name: WorkerSlotColumn, kind| column(backend, name.as_str(), kind);
    let mut table = Table::create();
    table
        .table(table_ref(outbox.worker_slots_table()))
        .if_not_exists()
        .col(not_null(col(WorkerSlotColumn::WorkerKey, Kind::WorkerKey)))
        .col(not_null(col(WorkerSlotColumn::Slot, Kind::Int)))
        .primary_key(
            Index::create()
                .col(Alias::new(WorkerSlotColumn::WorkerKey.as_str()))
                .col(Alias::new(WorkerSlotColumn::Slot.as_str())),
        );
    mysql_options(&mut table, backend);
    with_indexes(backend, table, Vec::new())
}
