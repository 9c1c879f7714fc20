//! One key of one event type in `<outbox>_unique`: who holds it (locked), whether that job
//! still waits, its release, and the attempt to take it.
//!
//! ```sql
//! INSERT INTO outbox_unique (…) VALUES (…) ON CONFLICT DO NOTHING
//!   -- MariaDB: ON DUPLICATE KEY UPDATE event_type = event_type, then the holder read back
//! -- taken: done. Otherwise:
//! SELECT message_id, expires_at FROM outbox_unique
//!   WHERE event_type = :type AND unique_key = :key FOR UPDATE
//! SELECT 1 AS waiting FROM outbox WHERE message_id = :holder AND status = 'pending'
//! SELECT 1 AS waiting FROM outbox_scheduled WHERE message_id = :holder
//!   -- MariaDB: LOCK IN SHARE MODE, a current read
//! -- the holder is done (or its window passed):
//! DELETE FROM outbox_unique WHERE event_type = :type AND unique_key = :key
//! INSERT … (as above)
//! ```
//!
//! Two commits taking one key at once meet at the primary key: the second waits for the
//! first, and finds the key taken when the first commits. (PostgreSQL reads at `READ
//! COMMITTED`, the unit of work's default.)

use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, DbBackend, DbErr};
use uuid::Uuid;

use crate::config::Outbox;
use crate::sql::dialect::{self, quote, read_opt_uuid, read_timestamp, required};
use crate::sql::statement::Sql;
use crate::table::UniqueColumn;

/// The job holding a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Holder {
    /// Its message id.
    pub(crate) message_id: Uuid,
    /// Until when the key holds; `None`: while the job is pending.
    pub(crate) expires_at: Option<DateTime<Utc>>,
}

/// `WHERE event_type = :type AND unique_key = :key`.
fn where_key(sql: &mut Sql, backend: DbBackend, event_type: &str, key: &str) {
    let q = |c: UniqueColumn| quote(backend, c.as_str());
    sql.push(&format!(" WHERE {} = ", q(UniqueColumn::EventType)))
        .bind(dialect::text(event_type))
        .push(&format!(" AND {} = ", q(UniqueColumn::UniqueKey)))
        .bind(dialect::text(key));
}

/// How [`job_waiting`] reads on `backend`: MariaDB with a lock, so that the read is current
/// (a plain read in a `REPEATABLE READ` transaction sees its snapshot, which may predate the
/// commit of the holder's job); PostgreSQL plainly (under `READ COMMITTED` each statement
/// sees what committed before it); SQLite plainly (one writer at a time).
fn current_read(backend: DbBackend) -> &'static str {
    match backend {
        DbBackend::MySql => " LOCK IN SHARE MODE",
        _ => "",
    }
}

/// The holder of `key`, locked until the transaction ends.
pub(crate) async fn lock_holder<C: ConnectionTrait>(
    conn: &C,
    outbox: &Outbox,
    event_type: &str,
    key: &str,
) -> Result<Option<Holder>, DbErr> {
    let backend = conn.get_database_backend();
    let q = |c: UniqueColumn| quote(backend, c.as_str());
    let mut sql = Sql::new(backend);
    sql.push(&format!(
        "SELECT {}, {} FROM ",
        q(UniqueColumn::MessageId),
        q(UniqueColumn::ExpiresAt)
    ))
    .table(outbox.unique_table());
    where_key(&mut sql, backend, event_type, key);
    if backend != DbBackend::Sqlite {
        sql.push(" FOR UPDATE");
    }
    let Some(row) = conn.query_one_raw(sql.build()).await? else {
        return Ok(None);
    };
    let message_id = UniqueColumn::MessageId.as_str();
    Ok(Some(Holder {
        message_id: required(read_opt_uuid(&row, "", message_id)?, message_id)?,
        expires_at: read_timestamp(&row, UniqueColumn::ExpiresAt.as_str())?,
    }))
}

/// Whether the job `message_id` still waits: `pending` in the outbox table, or in the
/// scheduled table.
pub(crate) async fn job_waiting<C: ConnectionTrait>(
    conn: &C,
    outbox: &Outbox,
    message_id: Uuid,
) -> Result<bool, DbErr> {
    let backend = conn.get_database_backend();
    let c = outbox.columns();
    for (table, status) in [
        (outbox.outbox_table(), Some("pending")),
        (outbox.scheduled_table(), None),
    ] {
        let mut sql = Sql::new(backend);
        sql.push("SELECT 1 AS waiting FROM ")
            .table(table)
            .push(&format!(" WHERE {} = ", quote(backend, c.message_id)))
            .bind(dialect::uuid(backend, message_id));
        if let Some(status) = status {
            sql.push(&format!(" AND {} = '{status}'", quote(backend, c.status)));
        }
        sql.push(current_read(backend));
        if conn.query_one_raw(sql.build()).await?.is_some() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Frees `key` (its holder is done, or its window passed).
pub(crate) async fn release<C: ConnectionTrait>(
    conn: &C,
    outbox: &Outbox,
    event_type: &str,
    key: &str,
) -> Result<(), DbErr> {
    let backend = conn.get_database_backend();
    let mut sql = Sql::new(backend);
    sql.push("DELETE FROM ").table(outbox.unique_table());
    where_key(&mut sql, backend, event_type, key);
    conn.execute_raw(sql.build()).await?;
    Ok(())
}

/// Takes `key` for the job `message_id` unless it is held; returns whether it took it.
pub(crate) async fn take<C: ConnectionTrait>(
    conn: &C,
    outbox: &Outbox,
    event_type: &str,
    key: &str,
    holder: Holder,
    now: DateTime<Utc>,
) -> Result<bool, DbErr> {
    let backend = conn.get_database_backend();
    let q = |c: UniqueColumn| quote(backend, c.as_str());
    let mut sql = Sql::new(backend);
    sql.push("INSERT INTO ")
        .table(outbox.unique_table())
        .push(&format!(
            " ({}, {}, {}, {}, {}) VALUES (",
            q(UniqueColumn::EventType),
            q(UniqueColumn::UniqueKey),
            q(UniqueColumn::MessageId),
            q(UniqueColumn::ExpiresAt),
            q(UniqueColumn::CreatedAt)
        ))
        .bind(dialect::text(event_type))
        .push(", ")
        .bind(dialect::text(key))
        .push(", ")
        .bind(dialect::uuid(backend, holder.message_id))
        .push(", ");
    match holder.expires_at {
        Some(at) => sql.bind(dialect::timestamp(backend, at)),
        None => sql.push("NULL"),
    };
    sql.push(", ")
        .bind(dialect::timestamp(backend, now))
        .push(")");
    if backend == DbBackend::MySql {
        // Not `INSERT IGNORE`: its duplicate check share-locks the holder's row, and
        // several commits waiting on one key would then each hold a share lock and ask for
        // an exclusive one — a deadlock. `ON DUPLICATE KEY UPDATE` locks it exclusively at
        // once: the waiters queue. Whether the row is ours is then read back.
        let event_type_column = q(UniqueColumn::EventType);
        sql.push(&format!(
            " ON DUPLICATE KEY UPDATE {event_type_column} = {event_type_column}"
        ));
        conn.execute_raw(sql.build()).await?;
        let holder_now = lock_holder(conn, outbox, event_type, key).await?;
        return Ok(holder_now.is_some_and(|now| now.message_id == holder.message_id));
    }
    sql.push(&format!(
        " ON CONFLICT ({}, {}) DO NOTHING",
        q(UniqueColumn::EventType),
        q(UniqueColumn::UniqueKey)
    ));
    Ok(conn.execute_raw(sql.build()).await?.rows_affected() == 1)
}
