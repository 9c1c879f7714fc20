//! The periodic jobs' statements (see [`crate::periodic`]): a job's row locked for its
//! enqueue, its first row, its advance to the next run, and the rows read back for
//! operators.

mod advance;
mod list;
mod lock;
mod start;

pub(crate) use advance::LastRun;

use sea_orm::{DbErr, QueryResult};

use crate::record::PeriodicRecord;
use crate::sql::dialect::{read_opt_uuid, read_timestamp, required};
use crate::table::PeriodicColumn;

/// Reads a row of the periodic table.
fn read_record(row: &QueryResult) -> Result<PeriodicRecord, DbErr> {
    let column = |c: PeriodicColumn| c.as_str();
    Ok(PeriodicRecord {
        name: row.try_get("", column(PeriodicColumn::Name))?,
        schedule: row.try_get("", column(PeriodicColumn::Schedule))?,
        next_run_at: required(
            read_timestamp(row, column(PeriodicColumn::NextRunAt))?,
            column(PeriodicColumn::NextRunAt),
        )?,
        last_run_at: read_timestamp(row, column(PeriodicColumn::LastRunAt))?,
        last_message_id: read_opt_uuid(row, "", column(PeriodicColumn::LastMessageId))?,
        updated_at: required(
            read_timestamp(row, column(PeriodicColumn::UpdatedAt))?,
            column(PeriodicColumn::UpdatedAt),
        )?,
    })
}

/// The columns of [`read_record`], quoted for `backend`, comma-separated.
fn record_columns(backend: sea_orm::DbBackend) -> String {
    [
        PeriodicColumn::Name,
        PeriodicColumn::Schedule,
        PeriodicColumn::NextRunAt,
        PeriodicColumn::LastRunAt,
        PeriodicColumn::LastMessageId,
        PeriodicColumn::UpdatedAt,
    ]
    .iter()
    .map(|c| crate::sql::dialect::quote(backend, c.as_str()))
    .collect::<Vec<_>>()
    .join(", ")
}
