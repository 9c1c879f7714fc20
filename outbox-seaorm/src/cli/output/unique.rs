//! What `outbox unique` prints: the unique jobs' keys, newest first.

use std::io::{self, Write};

use serde_json::json;

use crate::record::UniqueKeyRecord;

/// `outbox unique`: the table, then `N key(s)`; or a JSON array.
pub(crate) fn list(
    out: &mut (dyn Write + Send),
    rows: &[UniqueKeyRecord],
    json: bool,
) -> io::Result<()> {
    if json {
        let values: Vec<_> = rows
            .iter()
            .map(|row| {
                json!({
                    "event_type": row.event_type,
                    "key": row.key,
                    "message_id": row.message_id,
                    "expires_at": row.expires_at,
                    "created_at": row.created_at,
                    "holding": row.holding,
                })
            })
            .collect();
        let text = serde_json::to_string_pretty(&values).map_err(io::Error::other)?;
        return writeln!(out, "{text}");
    }
    writeln!(out, "EVENT TYPE\tKEY\tHOLDER\tUNTIL\tTAKEN AT\tHOLDS")?;
    for row in rows {
        writeln!(
            out,
            "{}\t{}\t{}\t{}\t{}\t{}",
            row.event_type,
            row.key,
            row.message_id,
            row.expires_at
                .map_or_else(|| "while pending".to_owned(), |at| at.to_rfc3339()),
            row.created_at.to_rfc3339(),
            if row.holding { "yes" } else { "no" },
        )?;
    }
    writeln!(out, "{} key(s)", rows.len())
}
