//! What `outbox scheduled …` prints: the waiting rows, and the changes made.

use std::io::{self, Write};

use serde_json::json;

use super::text::{cell, or_dash};
use crate::ops::OperatorAction;
use crate::record::ScheduledRecord;

/// `outbox scheduled list`: the table, then `N row(s) waiting`; or a JSON array.
pub(crate) fn list(
    out: &mut (dyn Write + Send),
    rows: &[ScheduledRecord],
    json: bool,
) -> io::Result<()> {
    if json {
        let values: Vec<_> = rows
            .iter()
            .map(|row| {
                json!({
                    "due_at": row.due_at(),
                    "key": row.key,
                    "created_at": row.record.created_at,
                    "worker_key": row.record.worker_key,
                    "envelope": row.record.envelope,
                })
            })
            .collect();
        let text = serde_json::to_string_pretty(&values).map_err(io::Error::other)?;
        return writeln!(out, "{text}");
    }
    writeln!(out, "DUE AT\tKEY\tMESSAGE ID\tEVENT TYPE\tAGGREGATE")?;
    for row in rows {
        let envelope = &row.record.envelope;
        writeln!(
            out,
            "{}\t{}\t{}\t{}\t{} {}",
            row.due_at().to_rfc3339(),
            cell(&or_dash(row.key.as_deref())),
            envelope.message_id,
            envelope.event_type,
            envelope.aggregate_type,
            cell(&envelope.aggregate_id),
        )?;
    }
    writeln!(out, "{} row(s) waiting", rows.len())
}

/// `outbox scheduled cancel | reschedule | run-now`: one line per row changed.
pub(crate) fn changed(out: &mut (dyn Write + Send), actions: &[OperatorAction]) -> io::Result<()> {
    for action in actions {
        writeln!(
            out,
            "{} {} ({}) by {}: {}{}",
            action.action,
            action.message_id,
            action.event_type,
            action.actor,
            or_dash(action.detail.as_deref()),
            action
                .reason
                .as_deref()
                .map(|reason| format!(", {}", cell(reason)))
                .unwrap_or_default()
        )?;
    }
    writeln!(out, "{} row(s) changed", actions.len())
}
