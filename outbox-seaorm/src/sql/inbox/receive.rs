//! Receiving a message: the inbox row that makes a handler's transaction apply each
//! `(message_id, consumer)` once.

use outbox_core::Envelope;
use sea_orm::{ConnectionTrait, DbBackend, DbErr, Statement, Value};

use crate::config::Outbox;
use crate::sql::dialect::{self as sql, quote};
use crate::sql::statement::Sql;
use crate::table::inbox_columns as col;

/// `INSERT INTO <inbox> (message_id, consumer, event_type, received_at, processed_at)
/// VALUES (<5 placeholders>)`, `ON CONFLICT DO NOTHING` (PostgreSQL, SQLite) or `INSERT
/// IGNORE` (MariaDB). Built once per backend and kept on the [`Outbox`]: building it for
/// every message (quoting the table and five columns) was about 5 % of the client's
/// instructions per consumer transaction.
fn insert_text(backend: DbBackend, outbox: &Outbox) -> String {
    let mut statement = Sql::new(backend);
    statement.push(if backend == DbBackend::MySql {
        // `ON DUPLICATE KEY UPDATE` reports a found row as affected when the connection
        // sets CLIENT_FOUND_ROWS; `IGNORE` reports 0. The values are validated first
        // (consumer and event type lengths), so IGNORE hides nothing but the duplicate.
        "INSERT IGNORE INTO "
    } else {
        "INSERT INTO "
    });
    statement.table(outbox.inbox_table()).push(" (");
    let columns = [
        col::MESSAGE_ID,
        col::CONSUMER,
        col::EVENT_TYPE,
        col::RECEIVED_AT,
        col::PROCESSED_AT,
    ];
    for (i, name) in columns.iter().enumerate() {
        if i > 0 {
            statement.push(", ");
        }
        statement.push(&quote(backend, name));
    }
    statement.push(") VALUES (");
    for i in 0..columns.len() {
        if i > 0 {
            statement.push(", ");
        }
        // Placeholders only: the values are bound per message.
        statement.bind(Value::Int(None));
    }
    statement.push(")");
    if backend != DbBackend::MySql {
        statement.push(" ON CONFLICT DO NOTHING");
    }
    statement.build().sql
}

/// Inserts `(message_id, consumer)` unless present; `true` when inserted. On PostgreSQL
/// and MariaDB a concurrent insert of the same key waits for the first transaction and
/// then sees the conflict; SQLite has one writer at a time.
pub(crate) async fn insert<C: ConnectionTrait>(
    db: &C,
    outbox: &Outbox,
    consumer: &str,
    envelope: &Envelope,
) -> Result<bool, DbErr> {
    let backend = db.get_database_backend();
    let now = outbox.clock().now();
    let text = outbox
        .statements()
        .inbox_insert
        .get_or_init(backend, || insert_text(backend, outbox));
    let values = vec![
        sql::uuid(backend, envelope.message_id),
        sql::text(consumer),
        sql::text(envelope.event_type.as_str()),
        sql::timestamp(backend, now),
        sql::timestamp(backend, now),
    ];
    let statement = Statement::from_sql_and_values(backend, text, values);
    let result = db.execute_raw(statement).await?;
    Ok(result.rows_affected() == 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_text_per_backend() {
        let outbox = Outbox::default();
        assert_eq!(
            insert_text(DbBackend::Postgres, &outbox),
            r#"INSERT INTO "inbox" ("message_id", "consumer", "event_type", "received_at", "processed_at") VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING"#
        );
        assert_eq!(
            insert_text(DbBackend::MySql, &outbox),
            "INSERT IGNORE INTO `inbox` (`message_id`, `consumer`, `event_type`, `received_at`, `processed_at`) VALUES (?, ?, ?, ?, ?)"
        );
        let cached = crate::backend::PerBackend::<String>::default();
        let text = || {
            cached.get_or_init(DbBackend::Sqlite, || {
                insert_text(DbBackend::Sqlite, &outbox)
            })
        };
        let first = text().as_ptr();
        assert_eq!(text().as_ptr(), first);
        assert!(text().ends_with("VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"));
    }
}
