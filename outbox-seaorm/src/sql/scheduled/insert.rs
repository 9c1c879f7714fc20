//! A commit's multi-row `INSERT` into the scheduled table: the outbox row's bound values
//! (`next_attempt_at` the due time), the key, and the literals `'scheduled', 0`.

use chrono::{DateTime, Utc};
use outbox_core::Envelope;
use sea_orm::sea_query::Value;
use sea_orm::{ConnectionTrait, DatabaseTransaction, DbBackend, DbErr, Statement};

use crate::backend::max_bind_parameters;
use crate::config::Outbox;
use crate::error::CommitError;
use crate::sql::columns::INSERT_BOUND;
use crate::sql::dialect::{quote, quote_table};
use crate::sql::insert::{ALL_BOUND, PreparedRow, chunk, prepare_due, push_values};
use crate::status::OutboxStatus;
use crate::table::SCHEDULE_KEY_COLUMN;

/// Bound values per scheduled row: the outbox row's and the key.
const COLUMNS: usize = INSERT_BOUND + 1;

/// The literals after the bound values: `status`, `attempts`.
const LITERALS: [&str; 2] = [OutboxStatus::Scheduled.as_sql_literal(), "0"];

/// One scheduled row's values: the envelope's, due at `due`, named by `key`.
pub(crate) fn prepare_scheduled(
    backend: DbBackend,
    outbox: &Outbox,
    envelope: Envelope,
    created_at: DateTime<Utc>,
    due: DateTime<Utc>,
    key: Option<String>,
) -> Result<PreparedRow, CommitError> {
    let mut row = prepare_due(backend, outbox, envelope, created_at, due)?;
    row.bytes += key.as_ref().map_or(0, String::len);
    row.values.push(Value::String(key));
    Ok(row)
}

/// `INSERT INTO <scheduled> (<bound columns>, schedule_key, status, attempts) VALUES …` for
/// `rows` rows.
fn insert_text(backend: DbBackend, outbox: &Outbox, rows: usize) -> String {
    let c = outbox.columns();
    let columns = ALL_BOUND
        .iter()
        .map(|column| column.name(c))
        .chain([SCHEDULE_KEY_COLUMN, c.status, c.attempts])
        .map(|name| quote(backend, name))
        .collect::<Vec<_>>()
        .join(", ");
    let mut text = format!(
        "INSERT INTO {} ({columns}) VALUES ",
        quote_table(backend, outbox.scheduled_table())
    );
    for row in 0..rows {
        if row > 0 {
            text.push_str(", ");
        }
        push_values(&mut text, backend, row * COLUMNS, 1, &LITERALS);
    }
    text
}

/// Inserts the scheduled rows on the transaction, one multi-row `INSERT` per chunk.
/// Returns the number of statements executed.
pub(crate) async fn insert_scheduled(
    txn: &DatabaseTransaction,
    outbox: &Outbox,
    rows: Vec<PreparedRow>,
) -> Result<usize, DbErr> {
    let backend = txn.get_database_backend();
    let per_chunk = outbox
        .chunk_rows()
        .min(max_bind_parameters(backend) / COLUMNS)
        .max(1);
    let chunks = chunk(rows, per_chunk, outbox.chunk_bytes());
    let count = chunks.len();
    for rows in chunks {
        let sql = insert_text(backend, outbox, rows.len());
        let values: Vec<Value> = rows.into_iter().flat_map(|row| row.values).collect();
        txn.execute_raw(Statement::from_sql_and_values(backend, sql, values))
            .await?;
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_follows_the_bound_columns() {
        let text = insert_text(DbBackend::Postgres, &Outbox::default(), 2);
        assert!(
            text.starts_with("INSERT INTO \"outbox_scheduled\" (\"message_id\", \"event_type\", ")
        );
        assert!(
            text.contains("\"priority\", \"schedule_key\", \"status\", \"attempts\") VALUES ($1, ")
        );
        assert!(text.contains("$18, $19, 'scheduled', 0), ($20, "));
        assert!(text.ends_with("$37, $38, 'scheduled', 0)"));
        let mysql = insert_text(DbBackend::MySql, &Outbox::default(), 3);
        assert_eq!(mysql.matches('?').count(), 3 * COLUMNS);
    }
}
