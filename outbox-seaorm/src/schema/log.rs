//! The log relay's tables (PostgreSQL and MariaDB, see [`crate::relay::log`]):
//!
//! - `<outbox>_log_slots`: one row per slot — the lease that elects the one active log
//!   relay of the slot (`owner`, `lease_expires_at`), when this outbox's relay created the
//!   server's slot (`slot_created_at`: a slot of that name without it belongs to someone
//!   else), whether the rows that were in the table when the slot was created have been
//!   published (`backfilled_at`), and the last acknowledged position (`acknowledged_lsn`:
//!   an LSN on PostgreSQL, for status output; on MariaDB the GTID state of every domain,
//!   `text` there since a server with many domains can exceed 255 characters, and where the
//!   binlog stream resumes);
//! - `<outbox>_log_dead_letters`: the events a log relay gave up on (the envelope as JSON,
//!   its error), and under `DeadLetterPolicy::Block` the later events of their aggregates,
//!   parked in order until an operator requeues or skips the dead one.

use sea_orm::DbBackend;
use sea_orm::sea_query::{Alias, Index, Table};

use super::outbox::with_indexes;
use super::types::{Kind, column, mysql_options, not_null, null};
use crate::config::Outbox;
use crate::sql::dialect::table_ref;
use crate::table::index_name;

/// `CREATE TABLE IF NOT EXISTS` of both tables and their index; none on SQLite.
pub(crate) fn statements(backend: DbBackend, outbox: &Outbox) -> Vec<String> {
    if backend == DbBackend::Sqlite {
        return Vec::new();
    }
    let tables = &outbox.tables().relay;
    let col = |n, k| column(backend, n, k);
    let position = match backend {
        DbBackend::MySql => Kind::Text,
        _ => Kind::Key,
    };
    let mut slots = Table::create();
    slots
        .table(table_ref(&tables.log_slots))
        .if_not_exists()
        .col(not_null(col("slot", Kind::Key)).primary_key().to_owned())
        .col(not_null(col("created_at", Kind::Timestamp)))
        .col(null(col("slot_created_at", Kind::Timestamp)))
        .col(null(col("backfilled_at", Kind::Timestamp)))
        .col(null(col("owner", Kind::Key)))
        .col(not_null(col("lease_expires_at", Kind::Timestamp)))
        .col(null(col("acknowledged_lsn", position)))
        .col(null(col("acknowledged_at", Kind::Timestamp)));
    mysql_options(&mut slots, backend);
    let mut statements = with_indexes(backend, slots, Vec::new());
    let name = &tables.log_dead_letters;
    let mut dead = Table::create();
    dead.table(table_ref(name))
        .if_not_exists()
        .col(col("id", Kind::Id))
        .col(not_null(col("slot", Kind::Key)))
        .col(null(col("message_id", Kind::Uuid)))
        .col(not_null(col("event_type", Kind::Key)))
        .col(not_null(col("aggregate_type", Kind::Key)))
        .col(not_null(col("aggregate_id", Kind::Key)))
        .col(null(col("envelope", Kind::LongText)))
        .col(not_null(col("error", Kind::Text)))
        .col(not_null(col("attempts", Kind::Int)))
        .col(not_null(col("status", Kind::Status)))
        .col(not_null(col("dead_at", Kind::Timestamp)))
        .col(null(col("resolved_at", Kind::Timestamp)))
        .col(null(col("resolved_by", Kind::Key)))
        .col(null(col("reason", Kind::Text)));
    mysql_options(&mut dead, backend);
    let mut by_aggregate = Index::create();
    by_aggregate
        .name(index_name(name, "aggregate_idx"))
        .table(table_ref(name))
        .col(Alias::new("slot"))
        .col(Alias::new("aggregate_type"))
        .col(Alias::new("aggregate_id"))
        .col(Alias::new("id"));
    // A redelivered event (after a crash before the acknowledgement) is not written twice.
    let mut by_message = Index::create();
    by_message
        .name(index_name(name, "message_key"))
        .table(table_ref(name))
        .col(Alias::new("slot"))
        .col(Alias::new("message_id"))
        .unique();
    statements.extend(with_indexes(backend, dead, vec![by_aggregate, by_message]));
    statements
}
