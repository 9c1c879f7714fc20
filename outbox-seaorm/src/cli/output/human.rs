//! Text for people (`--format human`, and the commands that have no other format):
//! tab-separated tables with a count line under them, aligned `field:   value` lists for one
//! row or dead letter, and one line per operator action.

use std::io::{self, Write};
use std::time::Duration;

use crate::inbox::dead_letter::{ConsumerDeadLetter, DeadLetterStatus, StoredMessage};
use crate::inbox::parked::ParkedMessage;
use crate::ops::{OperatorAction, StatusReport};
use crate::record::OutboxRecord;

use super::text::{EnvelopeView, cell, or_dash, pretty};

/// `outbox status`: one field a line, the dead and failed counts broken down by event type.
pub(crate) fn status(out: &mut (dyn Write + Send), report: &StatusReport) -> io::Result<()> {
    writeln!(out, "outbox:            {}", report.outbox)?;
    writeln!(out, "write mode:        {}", report.write_mode)?;
    let age = |age: Option<Duration>| {
        age.map_or_else(
            || "-".to_owned(),
            |age| format!("{:.1}s", age.as_secs_f64()),
        )
    };
    writeln!(
        out,
        "pending:           {} (in backoff: {}, held back: {})",
        report.pending, report.in_backoff, report.held
    )?;
    writeln!(
        out,
        "oldest claimable:  {}",
        age(report.oldest_claimable_age)
    )?;
    writeln!(out, "oldest held back:  {}", age(report.oldest_held_age))?;
    writeln!(out, "dead:              {}", report.dead())?;
    for (event_type, count) in &report.dead_by_event_type {
        writeln!(out, "  {event_type}  {count}")?;
    }
    writeln!(out, "failed:            {}", report.failed())?;
    for (event_type, count) in &report.failed_by_event_type {
        writeln!(out, "  {event_type}  {count}")?;
    }
    if !report.pending_by_worker_key.is_empty() {
        writeln!(out, "pending by worker key:")?;
        for (key, status) in &report.pending_by_worker_key {
            writeln!(
                out,
                "  {key}  {} (oldest claimable: {})",
                status.pending,
                status.oldest_claimable_age.map_or_else(
                    || "-".to_owned(),
                    |age| format!("{:.1}s", age.as_secs_f64())
                )
            )?;
        }
    }
    writeln!(out, "skipped:           {}", report.skipped)?;
    writeln!(
        out,
        "live relays:       {}",
        if report.live_relays.is_empty() {
            "-".to_owned()
        } else {
            report.live_relays.join(", ")
        }
    )?;
    match &report.log_relay {
        Some(log) => super::log_relay::status(out, log, report.write_mode),
        None => Ok(()),
    }
}

/// `outbox dead list`: the table of rows, then `N {label} row(s)`.
pub(crate) fn records(
    out: &mut (dyn Write + Send),
    rows: &[OutboxRecord],
    label: &str,
) -> io::Result<()> {
    writeln!(
        out,
        "SEQ\tMESSAGE ID\tEVENT TYPE\tAGGREGATE\tATTEMPTS\tLAST ERROR"
    )?;
    for row in rows {
        writeln!(
            out,
            "{}\t{}\t{}\t{}/{}\t{}\t{}",
            row.seq,
            row.envelope.message_id,
            row.envelope.event_type,
            row.envelope.aggregate_type,
            row.envelope.aggregate_id,
            row.attempts,
            row.last_error.as_deref().unwrap_or("")
        )?;
    }
    writeln!(out, "{} {label} row(s)", rows.len())
}

/// `outbox dead show`: the row's fields, then its operator log.
pub(crate) fn record(
    out: &mut (dyn Write + Send),
    record: &OutboxRecord,
    log: &[OperatorAction],
) -> io::Result<()> {
    let e = &record.envelope;
    writeln!(out, "message id:   {}", e.message_id)?;
    writeln!(out, "event type:   {}", e.event_type)?;
    writeln!(out, "aggregate:    {}/{}", e.aggregate_type, e.aggregate_id)?;
    writeln!(
        out,
        "seq:          {} (partition {})",
        record.seq, record.partition
    )?;
    writeln!(out, "status:       {}", record.status)?;
    writeln!(out, "attempts:     {}", record.attempts)?;
    if record.worker_key.is_some() || !record.retryable {
        writeln!(
            out,
            "worker key:   {}",
            record.worker_key.as_deref().unwrap_or("-")
        )?;
        writeln!(out, "retryable:    {}", record.retryable)?;
    }
    writeln!(
        out,
        "last error:   {}",
        record.last_error.as_deref().unwrap_or("-")
    )?;
    writeln!(out, "created at:   {}", record.created_at.to_rfc3339())?;
    writeln!(out, "payload:      {}", e.payload)?;
    for action in log {
        writeln!(out, "log:          {}", action_line(action))?;
    }
    Ok(())
}

/// `outbox requeue`: one line per requeued row, then `N row(s) requeued`.
pub(crate) fn requeued(out: &mut (dyn Write + Send), actions: &[OperatorAction]) -> io::Result<()> {
    for action in actions {
        writeln!(out, "{}", action_line(action))?;
    }
    writeln!(out, "{} row(s) requeued", actions.len())
}

/// `outbox skip`: the recorded action.
pub(crate) fn skipped(out: &mut (dyn Write + Send), action: &OperatorAction) -> io::Result<()> {
    writeln!(out, "{}", action_line(action))
}

/// `outbox purge`: how many published rows went.
pub(crate) fn purged(
    out: &mut (dyn Write + Send),
    rows: u64,
    older_than: Duration,
) -> io::Result<()> {
    writeln!(
        out,
        "{rows} published row(s) older than {:?} deleted",
        older_than
    )
}

/// `outbox purge-inbox`: how many inbox rows went.
pub(crate) fn purged_inbox(
    out: &mut (dyn Write + Send),
    rows: u64,
    older_than: Duration,
) -> io::Result<()> {
    writeln!(
        out,
        "{rows} inbox row(s) older than {:?} deleted",
        older_than
    )
}

/// `outbox inbox-dead list`: the table of dead letters, then `N dead letter(s)`.
pub(crate) fn dead_letters(
    out: &mut (dyn Write + Send),
    letters: &[ConsumerDeadLetter],
) -> io::Result<()> {
    writeln!(
        out,
        "ID\tCONSUMER\tSTATUS\tREASON\tMESSAGE ID\tEVENT TYPE\tATTEMPTS\tDEAD AT\tERROR"
    )?;
    for letter in letters {
        writeln!(
            out,
            "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
            letter.id,
            letter.consumer,
            letter.status.as_str(),
            letter.reason,
            or_dash(letter.message_id),
            or_dash(letter.event_type.as_deref()),
            letter.attempts,
            letter.dead_at.to_rfc3339(),
            cell(&letter.error),
        )?;
    }
    writeln!(out, "{} dead letter(s)", letters.len())
}

/// `outbox inbox-dead show`: every field of the dead letter, then the stored message (an
/// envelope as indented JSON; a message that could not be decoded as its headers and body).
pub(crate) fn dead_letter(
    out: &mut (dyn Write + Send),
    letter: &ConsumerDeadLetter,
) -> io::Result<()> {
    let rfc3339 = |at: Option<chrono::DateTime<chrono::Utc>>| or_dash(at.map(|at| at.to_rfc3339()));
    writeln!(out, "id:           {}", letter.id)?;
    writeln!(out, "consumer:     {}", letter.consumer)?;
    writeln!(out, "status:       {}", letter.status.as_str())?;
    writeln!(out, "reason:       {}", letter.reason)?;
    writeln!(out, "error:        {}", letter.error)?;
    writeln!(out, "attempts:     {}", letter.attempts)?;
    writeln!(out, "message id:   {}", or_dash(letter.message_id))?;
    writeln!(
        out,
        "event type:   {}",
        or_dash(letter.event_type.as_deref())
    )?;
    writeln!(out, "dead at:      {}", letter.dead_at.to_rfc3339())?;
    writeln!(out, "requeued at:  {}", rfc3339(letter.requeued_at))?;
    writeln!(
        out,
        "requeued by:  {}",
        or_dash(letter.requeued_by.as_deref())
    )?;
    writeln!(out, "resolved at:  {}", rfc3339(letter.resolved_at))?;
    writeln!(
        out,
        "aggregate:    {}",
        or_dash(
            letter
                .aggregate
                .as_ref()
                .map(|(aggregate_type, id)| format!("{aggregate_type} {id}"))
        )
    )?;
    if letter.status == DeadLetterStatus::Skipped {
        writeln!(out, "skipped at:   {}", rfc3339(letter.skipped_at))?;
        writeln!(
            out,
            "skipped by:   {}",
            or_dash(letter.skipped_by.as_deref())
        )?;
        writeln!(
            out,
            "skip reason:  {}",
            or_dash(letter.skip_reason.as_deref())
        )?;
    }
    match &letter.message {
        StoredMessage::Envelope(envelope) => {
            writeln!(out, "format:       envelope")?;
            // The envelope's field order (message id first), payload indented.
            let text = serde_json::to_string_pretty(&EnvelopeView::of(envelope)?)
                .map_err(io::Error::other)?;
            writeln!(out, "message:\n{text}")?;
        }
        StoredMessage::Binary(raw) => {
            writeln!(out, "format:       binary (could not be decoded)")?;
            writeln!(out, "headers:")?;
            for (name, value) in &raw.headers {
                writeln!(out, "  {name}: {value}")?;
            }
            if raw.headers_dropped > 0 {
                writeln!(out, "  … {} more headers not stored", raw.headers_dropped)?;
            }
            writeln!(
                out,
                "body size:    {} bytes, sha256 {}",
                raw.body_bytes, raw.body_sha256
            )?;
            if raw.truncated {
                writeln!(
                    out,
                    "stored cut:   the message was larger than a dead letter keeps \
                     ({} bytes of body, {} headers of {} bytes); it cannot be \
                     redelivered",
                    crate::limits::MAX_STORED_BODY_BYTES,
                    crate::limits::MAX_STORED_HEADERS,
                    crate::limits::MAX_STORED_HEADER_BYTES,
                )?;
            }
            // A JSON body is pretty-printed; anything else as stored.
            let body = match serde_json::from_str::<serde_json::Value>(&raw.body) {
                Ok(value) => pretty(&value)?,
                Err(_) => raw.body.clone(),
            };
            writeln!(out, "body:\n{body}")?;
        }
    }
    Ok(())
}

/// `outbox inbox-dead requeue`: one dead letter requeued (`id` by `actor`).
pub(crate) fn requeued_dead_letter(
    out: &mut (dyn Write + Send),
    id: i64,
    letter: &ConsumerDeadLetter,
    actor: &str,
) -> io::Result<()> {
    writeln!(
        out,
        "requeued dead letter {id} ({}, message {}) by {actor}",
        letter.consumer,
        or_dash(letter.message_id)
    )
}

/// `outbox inbox-dead requeue`: the closing line, after every dead letter was requeued.
pub(crate) fn requeued_dead_letters(out: &mut (dyn Write + Send), count: usize) -> io::Result<()> {
    writeln!(
        out,
        "{count} dead letter(s) requeued; the running consumer redelivers them"
    )
}

/// `outbox inbox-dead skip`: the dead letter `id` skipped by `actor` for `reason`.
pub(crate) fn skipped_dead_letter(
    out: &mut (dyn Write + Send),
    id: i64,
    actor: &str,
    reason: &str,
) -> io::Result<()> {
    writeln!(
        out,
        "skipped dead letter {id} by {actor}: {reason}; the messages parked behind it are applied"
    )
}

/// `outbox inbox-dead parked`: the table of parked messages, then `N parked message(s)`.
pub(crate) fn parked(out: &mut (dyn Write + Send), parked: &[ParkedMessage]) -> io::Result<()> {
    writeln!(
        out,
        "ID\tCONSUMER\tAGGREGATE\tMESSAGE ID\tEVENT TYPE\tATTEMPTS\tNEXT ATTEMPT\tLAST ERROR"
    )?;
    for message in parked {
        writeln!(
            out,
            "{}\t{}\t{} {}\t{}\t{}\t{}\t{}\t{}",
            message.id,
            message.consumer,
            message.aggregate.0,
            message.aggregate.1,
            message.envelope.message_id,
            message.envelope.event_type,
            message.attempts,
            message.next_attempt_at.to_rfc3339(),
            cell(message.last_error.as_deref().unwrap_or("-")),
        )?;
    }
    writeln!(out, "{} parked message(s)", parked.len())
}

fn action_line(action: &OperatorAction) -> String {
    format!(
        "{} {} by {} at {} (was {}){}",
        action.action,
        action.message_id,
        action.actor,
        action.at.to_rfc3339(),
        action.previous_status,
        action
            .reason
            .as_deref()
            .map(|reason| format!(": {reason}"))
            .unwrap_or_default()
    )
}
