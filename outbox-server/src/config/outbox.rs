//! The `Outbox` of a `[[relay]]`: its tables, column naming, partitions, write mode,
//! whether a transaction pooler stands in front of its database, and the metric label
//! `relay = <name>`, checked by the library's own builder.

use outbox_seaorm::table::{ColumnNaming, TableName};
use outbox_seaorm::{Outbox, WriteMode};

use super::file::FileRelay;
use super::problem::Problems;
use super::value::choice;

/// The relay's `Outbox`: tables, naming, partitions, write mode, metric label.
pub(crate) fn check_outbox(
    file: &FileRelay,
    name: Option<&str>,
    path: &str,
    problems: &mut Problems,
) -> Option<Outbox> {
    let before = problems.len();
    let mut builder = Outbox::builder();
    for (key, table) in [
        ("outbox_table", &file.outbox_table),
        ("inbox_table", &file.inbox_table),
    ] {
        if let Some(table) = table {
            match TableName::new(table) {
                Err(error) => problems.add(format!("{path}.{key}"), error.to_string()),
                Ok(_) if key == "outbox_table" => builder = builder.outbox_table(table),
                Ok(_) => builder = builder.inbox_table(table),
            }
        }
    }
    if let Some(text) = &file.column_naming
        && let Some(naming) = choice(
            problems,
            &format!("{path}.column_naming"),
            text,
            &[
                ("standard", ColumnNaming::Standard),
                ("debezium", ColumnNaming::Debezium),
            ],
        )
    {
        builder = builder.column_naming(naming);
    }
    if let Some(partitions) = file.partitions {
        builder = builder.partitions(partitions);
    }
    if let Some(pooled) = file.transaction_pooling {
        if pooled && file.method.as_deref() == Some("log") {
            problems.add(
                format!("{path}.transaction_pooling"),
                "the log relay replicates through database_url, which must reach PostgreSQL \
                 directly, not through a pooler",
            );
        }
        builder = builder.transaction_pooling(pooled);
    }
    if let Some(log) = &file.log {
        let mode = match log.write_mode.as_deref() {
            None | Some("table") => {
                if log.message_prefix.is_some() {
                    problems.add(
                        format!("{path}.log.message_prefix"),
                        "only for `write_mode = \"message\"`",
                    );
                }
                Some(WriteMode::table())
            }
            Some("table_removed_after_insert") => Some(WriteMode::table_removed_after_insert()),
            Some("message") => Some(match &log.message_prefix {
                Some(prefix) => WriteMode::message_with_prefix(prefix.clone()),
                None => WriteMode::message(),
            }),
            Some(other) => {
                problems.add(
                    format!("{path}.log.write_mode"),
                    format!(
                        "`{other}` is not one of `table`, `table_removed_after_insert`, `message`"
                    ),
                );
                None
            }
        };
        if let Some(mode) = mode {
            builder = builder.write_mode(mode);
        }
    }
    if let Some(name) = name {
        builder = builder.metric_label("relay", name);
    }
    if problems.len() > before {
        return None;
    }
    match builder.build() {
        Ok(outbox) => Some(outbox),
        Err(error) => {
            let key = match &error {
                outbox_seaorm::ConfigError::Partitions { .. } => "partitions",
                outbox_seaorm::ConfigError::WriteMode { .. } => "log.write_mode",
                outbox_seaorm::ConfigError::SameTable { .. } => "inbox_table",
                _ => "outbox_table",
            };
            problems.add(format!("{path}.{key}"), error.to_string());
            None
        }
    }
}
