//! The periodic jobs' table beside the outbox table (`<outbox>_periodic`): one row per
//! periodic job, its schedule as last seen, its next run and its last run. The relays lock
//! a job's row to enqueue its run, which is what makes a run happen once per period across
//! relays and restarts. See [`crate::periodic`].

use sea_orm::DbBackend;
use sea_orm::sea_query::Table;

use super::outbox::with_indexes;
use super::types::{Kind, column, mysql_options, not_null, null};
use crate::config::Outbox;
use crate::sql::dialect::table_ref;
use crate::table::PeriodicColumn;

/// The periodic table's `CREATE TABLE IF NOT EXISTS`.
pub(super) fn statements(backend: DbBackend, outbox: &Outbox) -> Vec<String> {
    let col = |name: PeriodicColumn, kind| column(backend, name.as_str(), kind);
    let mut table = Table::create();
    table
        .table(table_ref(outbox.periodic_table()))
        .if_not_exists()
        .col(
            not_null(col(PeriodicColumn::Name, Kind::WorkerKey))
                .primary_key()
                .to_owned(),
        )
        .col(not_null(col(PeriodicColumn::Schedule, Kind::Key)))
        .col(not_null(col(PeriodicColumn::NextRunAt, Kind::Timestamp)))
        .col(null(col(PeriodicColumn::LastRunAt, Kind::Timestamp)))
        .col(null(col(PeriodicColumn::LastMessageId, Kind::Uuid)))
        .col(not_null(col(PeriodicColumn::UpdatedAt, Kind::Timestamp)));
    mysql_options(&mut table, backend);
    with_indexes(backend, table, Vec::new())
}
