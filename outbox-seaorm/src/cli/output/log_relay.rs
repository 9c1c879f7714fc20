//! What the log relay's commands print: its part of `outbox status`, and its dead letters
//! (`outbox log-dead …`), as human text or JSON.

use std::io::{self, Write};

use super::text::{EnvelopeView, cell, or_dash};
use crate::record::log_dead_letter::LogDeadLetter;
use crate::record::log_slot::{LogRelayStatus, LogSlotStatus};

/// The log relay's part of `outbox status`: each slot, then the dead letters.
pub(crate) fn status(
    out: &mut (dyn Write + Send),
    log: &LogRelayStatus,
    write_mode: &str,
) -> io::Result<()> {
    writeln!(out, "log relay slots:")?;
    for slot in &log.slots {
        writeln!(
            out,
            "  {}  active relay: {}, streaming: {}, lag: {}, wal_status: {}, backfilled: {}, \
             acknowledged: {}",
            slot.slot,
            or_dash(slot.active_relay.as_deref()),
            if slot.streaming { "yes" } else { "no" },
            lag(slot),
            or_dash(slot.wal_status.as_deref()),
            if slot.backfilled { "yes" } else { "no" },
            or_dash(slot.acknowledged_lsn.as_deref()),
        )?;
    }
    writeln!(
        out,
        "log dead letters:  {} dead, {} parked, {} requeued",
        log.dead, log.parked, log.requeued
    )?;
    if write_mode == "table" {
        writeln!(
            out,
            "note:              the log relay leaves rows pending (retention deletes them): \
             its lag is the slot's, not the pending count"
        )?;
    }
    Ok(())
}

/// A slot's lag: bytes of WAL (PostgreSQL) or binlogged transactions (MariaDB).
fn lag(slot: &LogSlotStatus) -> String {
    match (slot.lag_bytes, slot.lag_transactions) {
        (Some(bytes), _) => format!("{bytes} bytes"),
        (None, Some(1)) => "1 transaction".to_owned(),
        (None, Some(transactions)) => format!("{transactions} transactions"),
        (None, None) => "-".to_owned(),
    }
}

/// `outbox log-dead list`: the table, then `N entries`.
pub(crate) fn dead_letters(
    out: &mut (dyn Write + Send),
    entries: &[LogDeadLetter],
    json: bool,
) -> io::Result<()> {
    if json {
        let value = serde_json::to_value(entries).map_err(io::Error::other)?;
        return writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&value).map_err(io::Error::other)?
        );
    }
    writeln!(
        out,
        "ID\tSLOT\tSTATUS\tMESSAGE ID\tEVENT TYPE\tAGGREGATE\tATTEMPTS\tDEAD AT\tERROR"
    )?;
    for entry in entries {
        writeln!(
            out,
            "{}\t{}\t{}\t{}\t{}\t{} {}\t{}\t{}\t{}",
            entry.id,
            entry.slot,
            entry.status,
            or_dash(entry.message_id),
            entry.event_type,
            entry.aggregate_type,
            entry.aggregate_id,
            entry.attempts,
            entry.dead_at.to_rfc3339(),
            cell(&entry.error),
        )?;
    }
    writeln!(
        out,
        "{} entr{}",
        entries.len(),
        if entries.len() == 1 { "y" } else { "ies" }
    )
}

/// `outbox log-dead show`: every field, then the envelope as indented JSON.
pub(crate) fn dead_letter(
    out: &mut (dyn Write + Send),
    entry: &LogDeadLetter,
    json: bool,
) -> io::Result<()> {
    if json {
        let value = serde_json::to_value(entry).map_err(io::Error::other)?;
        return writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&value).map_err(io::Error::other)?
        );
    }
    writeln!(out, "id:           {}", entry.id)?;
    writeln!(out, "slot:         {}", entry.slot)?;
    writeln!(out, "status:       {}", entry.status)?;
    writeln!(out, "error:        {}", entry.error)?;
    writeln!(out, "attempts:     {}", entry.attempts)?;
    writeln!(out, "message id:   {}", or_dash(entry.message_id))?;
    writeln!(out, "event type:   {}", entry.event_type)?;
    writeln!(
        out,
        "aggregate:    {} {}",
        entry.aggregate_type, entry.aggregate_id
    )?;
    writeln!(out, "dead at:      {}", entry.dead_at.to_rfc3339())?;
    writeln!(
        out,
        "resolved at:  {}",
        or_dash(entry.resolved_at.map(|at| at.to_rfc3339()))
    )?;
    writeln!(
        out,
        "resolved by:  {}",
        or_dash(entry.resolved_by.as_deref())
    )?;
    writeln!(out, "reason:       {}", or_dash(entry.reason.as_deref()))?;
    match &entry.envelope {
        Some(envelope) => {
            let text = serde_json::to_string_pretty(&EnvelopeView::of(envelope)?)
                .map_err(io::Error::other)?;
            writeln!(out, "envelope:\n{text}")
        }
        None => writeln!(out, "envelope:     - (the event could not be read)"),
    }
}

/// `outbox log-dead requeue` / `skip`: one line per entry changed.
pub(crate) fn acted(
    out: &mut (dyn Write + Send),
    id: i64,
    action: &str,
    actor: &str,
    reason: Option<&str>,
) -> io::Result<()> {
    writeln!(
        out,
        "log dead letter {id} {action} by {actor}{}",
        reason
            .map(|reason| format!(": {reason}"))
            .unwrap_or_default()
    )
}

/// `outbox log-reset`: what was done and what happens next.
pub(crate) fn reset(out: &mut (dyn Write + Send), slot: &str) -> io::Result<()> {
    writeln!(
        out,
        "log relay slot {slot}: position forgotten; its next start publishes the pending rows \
         from a new snapshot, then streams on"
    )
}
