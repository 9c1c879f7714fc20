//! The inbox row of a handled message (its statement is `sql::inbox::receive`) and the span
//! a handler runs in.

use outbox_core::Envelope;

pub(crate) use crate::sql::inbox::receive::insert;

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
