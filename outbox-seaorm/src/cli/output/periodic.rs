//! What `outbox periodic` prints: each periodic job's schedule, next run and last run.

use std::io::{self, Write};

use serde_json::json;

use crate::record::PeriodicRecord;

/// `outbox periodic`: the table, then `N periodic job(s)`; or a JSON array.
pub(crate) fn list(
    out: &mut (dyn Write + Send),
    rows: &[PeriodicRecord],
    json: bool,
) -> io::Result<()> {
    if json {
        let values: Vec<_> = rows
            .iter()
            .map(|row| {
                json!({
                    "name": row.name,
                    "schedule": row.schedule,
                    "next_run_at": row.next_run_at,
                    "last_run_at": row.last_run_at,
                    "last_message_id": row.last_message_id,
                })
            })
            .collect();
        let text = serde_json::to_string_pretty(&values).map_err(io::Error::other)?;
        return writeln!(out, "{text}");
    }
    writeln!(out, "NAME\tSCHEDULE\tNEXT RUN\tLAST RUN\tLAST MESSAGE ID")?;
    for row in rows {
        writeln!(
            out,
            "{}\t{}\t{}\t{}\t{}",
            row.name,
            row.schedule,
            row.next_run_at.to_rfc3339(),
            row.last_run_at
                .map_or_else(|| "-".to_owned(), |at| at.to_rfc3339()),
            row.last_message_id
                .map_or_else(|| "-".to_owned(), |id| id.to_string()),
        )?;
    }
    writeln!(out, "{} periodic job(s)", rows.len())
}
