//! Helpers every human-readable output shares: table cells, dashes for nothing, JSON
//! pretty-printing, and an envelope as it is shown.

use std::io;

use uuid::Uuid;

/// One line of a table cell: newlines and tabs become spaces.
pub(super) fn cell(text: &str) -> String {
    text.replace(['\n', '\r', '\t'], " ")
}

pub(super) fn or_dash<T: ToString>(value: Option<T>) -> String {
    value.map_or_else(|| "-".to_owned(), |value| value.to_string())
}

pub(super) fn pretty(value: &serde_json::Value) -> io::Result<String> {
    serde_json::to_string_pretty(value).map_err(io::Error::other)
}

/// An envelope as `inbox dead show` prints it: the envelope's fields in their order, with
/// the payload as a JSON tree so that it is indented with the rest (a `Payload` is written
/// as the text it holds).
#[derive(serde::Serialize)]
pub(super) struct EnvelopeView<'a> {
    message_id: Uuid,
    event_type: &'a str,
    version: u32,
    occurred_at: chrono::DateTime<chrono::Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    correlation_id: Option<Uuid>,
    #[serde(skip_serializing_if = "Option::is_none")]
    causation_id: Option<Uuid>,
    #[serde(skip_serializing_if = "Option::is_none")]
    traceparent: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tracestate: Option<&'a str>,
    aggregate_type: &'a str,
    aggregate_id: &'a str,
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    headers: &'a std::collections::BTreeMap<String, String>,
    payload: serde_json::Value,
}

impl<'a> EnvelopeView<'a> {
    pub(super) fn of(envelope: &'a outbox_core::Envelope) -> io::Result<Self> {
        Ok(Self {
            message_id: envelope.message_id,
            event_type: &envelope.event_type,
            version: envelope.version,
            occurred_at: envelope.occurred_at,
            correlation_id: envelope.correlation_id,
            causation_id: envelope.causation_id,
            traceparent: envelope.traceparent.as_deref(),
            tracestate: envelope.tracestate.as_deref(),
            aggregate_type: &envelope.aggregate_type,
            aggregate_id: &envelope.aggregate_id,
            headers: &envelope.headers,
            payload: envelope.payload.to_value().map_err(io::Error::other)?,
        })
    }
}
