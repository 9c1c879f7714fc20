//! What the stream carries turned into envelopes: a replicated outbox row (PostgreSQL's
//! text format, as `pgoutput` sends it) into the [`Envelope`] the polling relay would have
//! read from the same row, and a message-mode logical message (the envelope's JSON) back
//! into its envelope. The relay computes nothing, it carries what was committed.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use outbox_core::envelope::EnvelopeParts;
use outbox_core::{Envelope, EnvelopeConfig, Payload};
use uuid::Uuid;

use super::change::Row;
use crate::table::OutboxColumns;

/// A row whose envelope cannot be read, with what is known of it: dead-lettered, never
/// published, never retried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UnreadableRow {
    /// The message id, when it could be read.
    pub(crate) message_id: Option<Uuid>,
    /// The event type column as written.
    pub(crate) event_type: String,
    /// The aggregate type column as written.
    pub(crate) aggregate_type: String,
    /// The aggregate id column as written.
    pub(crate) aggregate_id: String,
    /// Why it cannot be read.
    pub(crate) error: String,
}

/// Reads `row` under the column naming `columns`.
pub(crate) fn envelope(row: &Row, columns: &OutboxColumns) -> Result<Envelope, UnreadableRow> {
    let text = |name: &str| row.text(name).unwrap_or_default().to_owned();
    let event_type = text(columns.event_type);
    let aggregate_type = text(columns.aggregate_type);
    let aggregate_id = text(columns.aggregate_id);
    let message_id = row
        .text(columns.message_id)
        .and_then(|id| Uuid::parse_str(id).ok());
    let unreadable = |error: String| UnreadableRow {
        message_id,
        event_type: event_type.clone(),
        aggregate_type: aggregate_type.clone(),
        aggregate_id: aggregate_id.clone(),
        error,
    };
    let parts = (|| {
        let message_id =
            message_id.ok_or_else(|| column_error(columns.message_id, "not a UUID"))?;
        let occurred_at = timestamp(row.text(columns.occurred_at))
            .ok_or_else(|| column_error(columns.occurred_at, "not a timestamp"))?;
        let correlation_id = optional_uuid(row, columns.correlation_id)?;
        let causation_id = optional_uuid(row, columns.causation_id)?;
        let headers = headers(row.text(columns.headers))
            .ok_or_else(|| column_error(columns.headers, "not a JSON object"))?;
        let payload = Payload::from_json(row.text(columns.payload).unwrap_or("null"))
            .map_err(|error| column_error(columns.payload, error))?;
        let version: Option<u32> = row.text(columns.version).and_then(|v| v.parse().ok());
        Ok::<_, String>((
            EnvelopeParts {
                message_id,
                event_type: event_type.clone(),
                occurred_at,
                correlation_id,
                causation_id,
                traceparent: row.text(columns.traceparent).map(str::to_owned),
                tracestate: row.text(columns.tracestate).map(str::to_owned),
                aggregate_type: aggregate_type.clone(),
                aggregate_id: aggregate_id.clone(),
                headers,
                payload,
            },
            version,
        ))
    })();
    let (parts, stored_version) = parts.map_err(unreadable)?;
    let envelope = Envelope::from_parts(parts)
        .map_err(|error| unreadable(column_error(columns.event_type, error)))?;
    if stored_version != Some(envelope.version) {
        return Err(unreadable(format!(
            "outbox column `{}`: {stored_version:?} disagrees with event type `{event_type}`",
            columns.version
        )));
    }
    Ok(envelope)
}

/// Reads a message-mode logical message: the envelope's JSON, at most the payload limit
/// plus the metadata limit of `config` long, validated like a decoded envelope.
pub(crate) fn message_envelope(
    content: &[u8],
    config: &EnvelopeConfig,
) -> Result<Envelope, UnreadableRow> {
    let limit = config.max_payload_bytes() + config.max_metadata_bytes();
    (*config)
        .with_max_payload_bytes(limit)
        .decode_json(content)
        .map_err(|error| {
            // What can still be read of a message that does not decode, for the dead letter:
            // the key fields come before the payload, so a bounded prefix holds them.
            let prefix = String::from_utf8_lossy(content.get(..KEY_PREFIX).unwrap_or(content));
            let field = |name: &str| string_field(&prefix, name).unwrap_or_default();
            UnreadableRow {
                message_id: Uuid::parse_str(&field("message_id")).ok(),
                event_type: field("event_type"),
                aggregate_type: field("aggregate_type"),
                aggregate_id: field("aggregate_id"),
                error: format!("logical message: {error}"),
            }
        })
}

/// Bytes of an unreadable message searched for its key fields.
const KEY_PREFIX: usize = 4 * 1024;

/// The string value of the first `"name":` in `json` (which may be cut short or broken
/// after it).
fn string_field(json: &str, name: &str) -> Option<String> {
    let key = format!("\"{name}\"");
    let after = &json[json.find(&key)? + key.len()..];
    let value = after.trim_start().strip_prefix(':')?;
    serde_json::Deserializer::from_str(value)
        .into_iter::<String>()
        .next()?
        .ok()
}

fn column_error(column: &str, error: impl std::fmt::Display) -> String {
    format!("outbox column `{column}`: {error}")
}

fn optional_uuid(row: &Row, column: &str) -> Result<Option<Uuid>, String> {
    row.text(column)
        .map(|id| Uuid::parse_str(id).map_err(|error| column_error(column, error)))
        .transpose()
}

/// A `timestamptz` in the ISO `DateStyle` (`2026-12-04 21:24:20.123456+00`, offsets with
/// minutes `+05:30`).
fn timestamp(text: Option<&str>) -> Option<DateTime<Utc>> {
    let text = text?;
    DateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f%#z")
        .ok()
        .map(|at| at.with_timezone(&Utc))
}

/// The headers column: a JSON object of strings (a non-string value is kept as its JSON
/// text), as the polling relay reads it.
fn headers(text: Option<&str>) -> Option<BTreeMap<String, String>> {
    let Some(text) = text else {
        return Some(BTreeMap::new());
    };
    if let Ok(map) = serde_json::from_str::<BTreeMap<String, String>>(text) {
        return Some(map);
    }
    match serde_json::from_str::<serde_json::Value>(text).ok()? {
        serde_json::Value::Object(map) => Some(
            map.into_iter()
                .map(|(name, value)| match value {
                    serde_json::Value::String(text) => (name, text),
                    other => (name, other.to_string()),
                })
                .collect(),
        ),
        _ => Some(BTreeMap::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_postgres_timestamps() {
        let at = timestamp(Some("2026-12-04 21:24:20.123456+00")).expect("parses");
        assert_eq!(at.to_rfc3339(), "2026-12-04T21:24:20.123456+00:00");
        let at = timestamp(Some("2026-12-04 21:24:20+05:30")).expect("parses");
        assert_eq!(at.to_rfc3339(), "2026-12-04T15:54:20+00:00");
        assert_eq!(timestamp(Some("yesterday")), None);
    }

    #[test]
    fn reads_message_envelopes_within_their_limits() {
        let config = EnvelopeConfig::default().with_max_payload_bytes(64);
        let envelope = Envelope::from_parts(EnvelopeParts {
            message_id: Uuid::now_v7(),
            event_type: "a.b.c.v2".into(),
            occurred_at: Utc::now(),
            correlation_id: None,
            causation_id: None,
            traceparent: None,
            tracestate: None,
            aggregate_type: "t".into(),
            aggregate_id: "1".into(),
            headers: BTreeMap::new(),
            payload: Payload::from_json("{\"n\":1}").expect("json"),
        })
        .expect("valid");
        let json = envelope.to_json_vec().expect("serializes");
        assert_eq!(message_envelope(&json, &config), Ok(envelope.clone()));
        let unreadable = message_envelope(b"{\"message_id\": 1}", &config).unwrap_err();
        assert!(
            unreadable.error.starts_with("logical message:"),
            "{unreadable:?}"
        );
        let mut big = envelope;
        big.payload = Payload::from_json(format!("\"{}\"", "x".repeat(70_000))).expect("json");
        let unreadable = message_envelope(&big.to_json_vec().expect("json"), &config).unwrap_err();
        assert_eq!(
            unreadable.message_id,
            Some(big.message_id),
            "{unreadable:?}"
        );
    }

    #[test]
    fn reads_headers_like_the_polling_relay() {
        let map = headers(Some(r#"{"a": "b", "n": 1}"#)).expect("object");
        assert_eq!(map.get("a").map(String::as_str), Some("b"));
        assert_eq!(map.get("n").map(String::as_str), Some("1"));
        assert_eq!(headers(Some("[1]")), Some(BTreeMap::new()));
        assert_eq!(headers(Some("{")), None);
    }
}
