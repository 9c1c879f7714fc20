//! A producer's export folder, read: `index.json` (its format version checked) and the schema
//! file of each contract, each bounded in size.

use std::io;
use std::path::{Path, PathBuf};

use outbox_core::name::EventType;
use outbox_core::schema::{
    self, INDEX_FILE, INDEX_FORMAT_VERSION, IndexEntry, MAX_FOLDER_FILE_BYTES, schema_file,
};
use serde_json::Value;

use crate::error::GenerateError;

/// One exported contract: its index entry, its schema and the file it came from.
#[derive(Debug, Clone)]
pub struct ExportedContract {
    /// The `index.json` entry.
    pub entry: IndexEntry,
    /// The schema file's JSON.
    pub schema: Value,
    /// The schema file.
    pub path: PathBuf,
}

/// Reads a file of at most [`MAX_FOLDER_FILE_BYTES`] (the kernel's bounded read).
fn read_bounded(path: &Path) -> Result<Vec<u8>, GenerateError> {
    schema::read_bounded(path).map_err(|source| {
        if source.kind() == io::ErrorKind::FileTooLarge {
            GenerateError::TooLarge {
                path: path.to_owned(),
                size: MAX_FOLDER_FILE_BYTES + 1,
                limit: MAX_FOLDER_FILE_BYTES,
            }
        } else {
            GenerateError::Read {
                path: path.to_owned(),
                source,
            }
        }
    })
}

fn parse_json(path: &Path, bytes: &[u8]) -> Result<Value, GenerateError> {
    serde_json::from_slice(bytes).map_err(|e| GenerateError::Invalid {
        path: path.to_owned(),
        pointer: String::new(),
        reason: e.to_string(),
    })
}

/// Reads every contract of the export folder `dir`, sorted by event type.
///
/// # Errors
/// [`GenerateError::MissingIndex`], [`GenerateError::NewerFormat`] (a folder from a newer
/// exporter), [`GenerateError::Read`], [`GenerateError::TooLarge`] or
/// [`GenerateError::Invalid`] (with the JSON pointer of the offending value).
pub fn read(dir: &Path) -> Result<Vec<ExportedContract>, GenerateError> {
    let index_path = dir.join(INDEX_FILE);
    if !index_path.exists() {
        return Err(GenerateError::MissingIndex {
            dir: dir.to_owned(),
        });
    }
    let index = parse_json(&index_path, &read_bounded(&index_path)?)?;
    let invalid = |pointer: &str, reason: String| GenerateError::Invalid {
        path: index_path.clone(),
        pointer: pointer.to_owned(),
        reason,
    };
    let found = index
        .get("format_version")
        .and_then(Value::as_u64)
        .ok_or_else(|| invalid("/format_version", "a positive integer is required".into()))?;
    if found > u64::from(INDEX_FORMAT_VERSION) {
        return Err(GenerateError::NewerFormat {
            path: index_path,
            found,
            supported: INDEX_FORMAT_VERSION,
        });
    }
    let entries = index
        .get("contracts")
        .and_then(Value::as_array)
        .ok_or_else(|| invalid("/contracts", "an array is required".into()))?;
    let mut contracts = Vec::with_capacity(entries.len());
    for (i, entry) in entries.iter().enumerate() {
        let pointer = format!("/contracts/{i}");
        let entry: IndexEntry =
            serde_json::from_value(entry.clone()).map_err(|e| invalid(&pointer, e.to_string()))?;
        EventType::parse(&entry.event_type)
            .map_err(|e| invalid(&format!("{pointer}/event_type"), e.to_string()))?;
        // The path comes from the validated event type, never from the file.
        let path = dir.join(schema_file(&entry.event_type));
        let schema = match read_bounded(&path) {
            Err(GenerateError::Read { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
                return Err(invalid(
                    &format!("{pointer}/schema"),
                    format!("its schema file `{}` is missing", path.display()),
                ));
            }
            other => parse_json(&path, &other?)?,
        };
        check_identity(&entry, &schema, &path)?;
        contracts.push(ExportedContract {
            entry,
            schema,
            path,
        });
    }
    contracts.sort_by(|a, b| a.entry.event_type.cmp(&b.entry.event_type));
    Ok(contracts)
}

/// The schema file describes the contract the index says it does.
fn check_identity(entry: &IndexEntry, schema: &Value, path: &Path) -> Result<(), GenerateError> {
    let invalid = |pointer: &str, reason: String| GenerateError::Invalid {
        path: path.to_owned(),
        pointer: pointer.to_owned(),
        reason,
    };
    if !schema.is_object() {
        return Err(invalid("", "a contract schema must be an object".into()));
    }
    let declared = schema.get("x-event-type").and_then(Value::as_str);
    if declared != Some(entry.event_type.as_str()) {
        return Err(invalid(
            "/x-event-type",
            format!(
                "expected `{}` (the index's event type), found {declared:?}",
                entry.event_type
            ),
        ));
    }
    Ok(())
}
