//! The scheduled rows' table beside the outbox table (`<outbox>_scheduled`): the outbox
//! row's columns (`status` always `scheduled`, `next_attempt_at` the due time) and
//! `schedule_key`, the user's name for the row. See [`crate::schedule`].
//!
//! Indexes: `message_id` unique; `(next_attempt_at, seq)`, which the promotion walks from
//! its start (the rows due now, earliest first); `(schedule_key)` for cancelling and
//! rescheduling by key.

use sea_orm::DbBackend;
use sea_orm::sea_query::{Alias, Index};

use super::outbox::{row_table, with_indexes};
use super::types::{Kind, column, mysql_options, null};
use crate::config::Outbox;
use crate::sql::dialect::table_ref;
use crate::status::OutboxStatus;
use crate::table::{SCHEDULE_KEY_COLUMN, index_name};

/// The scheduled table's `CREATE TABLE IF NOT EXISTS` and its indexes.
pub(super) fn statements(backend: DbBackend, outbox: &Outbox) -> Vec<String> {
    let c = outbox.columns();
    let name = outbox.scheduled_table();
    let mut table = row_table(backend, outbox, name, &[OutboxStatus::Scheduled]);
    table.col(null(column(backend, SCHEDULE_KEY_COLUMN, Kind::Key)));
    mysql_options(&mut table, backend);
    let index = |suffix: &str, columns: &[&str], unique: bool| {
        let mut index = Index::create();
        index.name(index_name(name, suffix)).table(table_ref(name));
        for column in columns {
            index.col(Alias::new(*column));
        }
        if unique {
            index.unique();
        }
        index
    };
    let indexes = vec![
        index("message_id_key", &[c.message_id], true),
        index("due_idx", &[c.next_attempt_at, c.seq], false),
        index("key_idx", &[SCHEDULE_KEY_COLUMN], false),
    ];
    with_indexes(backend, table, indexes)
}
