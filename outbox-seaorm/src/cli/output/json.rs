//! `--format json`: each result as one pretty-printed JSON document, for tools.

use std::io::{self, Write};

use serde_json::json;

use crate::inbox::dead_letter::{ConsumerDeadLetter, StoredMessage};
use crate::inbox::parked::ParkedMessage;
use crate::ops::{OperatorAction, ScheduledSummary, StatusReport};
use crate::record::OutboxRecord;

/// `outbox status`: the report as it serializes, with `scheduled` (`waiting`, `more`,
/// `next_due`).
pub(crate) fn status(
    out: &mut (dyn Write + Send),
    report: &StatusReport,
    scheduled: &ScheduledSummary,
) -> io::Result<()> {
    let mut value = serde_json::to_value(report).map_err(io::Error::other)?;
    value["scheduled"] = json!({
        "waiting": scheduled.waiting,
        "more": scheduled.more,
        "next_due": scheduled.next_due,
    });
    json_line(out, &value)
}

/// `outbox dead list`: an array of rows.
pub(crate) fn records(out: &mut (dyn Write + Send), rows: &[OutboxRecord]) -> io::Result<()> {
    json_line(out, &rows.iter().map(record_json).collect())
}

/// `outbox dead show`: the row with its operator log.
pub(crate) fn record(
    out: &mut (dyn Write + Send),
    record: &OutboxRecord,
    log: &[OperatorAction],
) -> io::Result<()> {
    let mut value = record_json(record);
    value["operator_log"] = serde_json::to_value(log).map_err(io::Error::other)?;
    json_line(out, &value)
}

/// `outbox inbox-dead list`: an array of dead letters.
pub(crate) fn dead_letters(
    out: &mut (dyn Write + Send),
    letters: &[ConsumerDeadLetter],
) -> io::Result<()> {
    let values = letters
        .iter()
        .map(dead_letter_json)
        .collect::<io::Result<Vec<_>>>()?;
    json_line(out, &serde_json::Value::Array(values))
}

/// `outbox inbox-dead show`: one dead letter.
pub(crate) fn dead_letter(
    out: &mut (dyn Write + Send),
    letter: &ConsumerDeadLetter,
) -> io::Result<()> {
    json_line(out, &dead_letter_json(letter)?)
}

/// `outbox inbox-dead parked`: an array of parked messages (without their payloads).
pub(crate) fn parked(out: &mut (dyn Write + Send), parked: &[ParkedMessage]) -> io::Result<()> {
    let values = parked.iter().map(parked_json).collect();
    json_line(out, &serde_json::Value::Array(values))
}

fn json_line(out: &mut (dyn Write + Send), value: &serde_json::Value) -> io::Result<()> {
    let text = serde_json::to_string_pretty(value).map_err(io::Error::other)?;
    writeln!(out, "{text}")
}

fn record_json(record: &OutboxRecord) -> serde_json::Value {
    json!({
        "seq": record.seq,
        "status": record.status.as_str(),
        "attempts": record.attempts,
        "next_attempt_at": record.next_attempt_at,
        "last_error": record.last_error,
        "published_at": record.published_at,
        "created_at": record.created_at,
        "partition": record.partition,
        "worker_key": record.worker_key,
        "retryable": record.retryable,
        "envelope": record.envelope,
    })
}

fn message_json(message: &StoredMessage) -> io::Result<(&'static str, serde_json::Value)> {
    Ok(match message {
        StoredMessage::Envelope(envelope) => (
            "envelope",
            serde_json::to_value(envelope.as_ref()).map_err(io::Error::other)?,
        ),
        StoredMessage::Binary(raw) => (
            "binary",
            serde_json::to_value(raw).map_err(io::Error::other)?,
        ),
    })
}

fn dead_letter_json(letter: &ConsumerDeadLetter) -> io::Result<serde_json::Value> {
    let (format, message) = message_json(&letter.message)?;
    Ok(json!({
        "id": letter.id,
        "consumer": letter.consumer,
        "status": letter.status.as_str(),
        "reason": letter.reason,
        "error": letter.error,
        "attempts": letter.attempts,
        "message_id": letter.message_id,
        "event_type": letter.event_type,
        "dead_at": letter.dead_at,
        "requeued_at": letter.requeued_at,
        "requeued_by": letter.requeued_by,
        "resolved_at": letter.resolved_at,
        "aggregate_type": letter.aggregate.as_ref().map(|(aggregate_type, _)| aggregate_type),
        "aggregate_id": letter.aggregate.as_ref().map(|(_, id)| id),
        "skipped_at": letter.skipped_at,
        "skipped_by": letter.skipped_by,
        "skip_reason": letter.skip_reason,
        "format": format,
        "message": message,
    }))
}

fn parked_json(message: &ParkedMessage) -> serde_json::Value {
    json!({
        "id": message.id,
        "consumer": message.consumer,
        "aggregate_type": message.aggregate.0,
        "aggregate_id": message.aggregate.1,
        "message_id": message.envelope.message_id,
        "event_type": message.envelope.event_type,
        "attempts": message.attempts,
        "next_attempt_at": message.next_attempt_at,
        "last_error": message.last_error,
        "parked_at": message.parked_at,
    })
}
