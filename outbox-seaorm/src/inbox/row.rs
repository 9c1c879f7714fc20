//! The inbox row insert and the handler span.

use outbox_core::Envelope;
use sea_orm::{ConnectionTrait, DbBackend, DbErr};

use crate::config::Outbox;
use crate::relay::sql::{self, Sql, quote};
use crate::table::inbox_columns as col;

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
    statement
        .bind(sql::uuid(backend, envelope.message_id))
        .push(", ");
    statement.bind(sql::text(consumer)).push(", ");
    statement
        .bind(sql::text(envelope.event_type.as_str()))
        .push(", ");
    statement.bind(sql::timestamp(backend, now)).push(", ");
    statement.bind(sql::timestamp(backend, now)).push(")");
    if backend != DbBackend::MySql {
        statement.push(" ON CONFLICT DO NOTHING");
    }
    let result = db.execute_raw(statement.build()).await?;
    Ok(result.rows_affected() == 1)
}

/// The span a handler runs in: consumer, handler, message id, event type, and the
/// envelope's `traceparent` (a field always; the OpenTelemetry parent with `otel`).
pub(crate) fn handler_span(consumer: &str, handler: &str, envelope: &Envelope) -> tracing::Span {
    let span = tracing::info_span!(
        "inbox.handle",
        consumer,
        handler,
        message_id = %envelope.message_id,
        event_type = %envelope.event_type,
        traceparent = envelope.traceparent.as_deref().unwrap_or(""),
    );
    #[cfg(feature = "otel")]
    if let Some(parent) = crate::trace::remote_parent(envelope) {
        use tracing_opentelemetry::OpenTelemetrySpanExt as _;
        // Fails only when no OpenTelemetry layer is installed: the field above remains.
        let _ = span.set_parent(parent);
    }
    span
}
