//! Writing and loading an expectations folder.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{
    EXPECTATIONS_FILE, EXPECTATIONS_FORMAT_VERSION, ExpectationSet, Expectations,
    ExpectationsError, schema_file,
};
use crate::name::{EventType, check_consumer_name};
use crate::schema::{self, SCHEMAS_DIR, SchemaError, to_canonical_json};

/// Writes an expectations folder (a complete set: stale schema files are removed). Returns
/// the files written.
///
/// # Errors
/// [`ExpectationsError::Write`].
pub fn write(
    dir: &Path,
    expectations: &Expectations,
    schemas: &[Value],
) -> Result<Vec<PathBuf>, ExpectationsError> {
    let io_error = |action: &'static str, path: &Path| {
        let path = path.to_owned();
        move |source| SchemaError::Io {
            action,
            path,
            source,
        }
    };
    let schemas_dir = dir.join(SCHEMAS_DIR);
    if schemas_dir.exists() {
        fs::remove_dir_all(&schemas_dir).map_err(io_error("remove", &schemas_dir))?;
    }
    let mut written = Vec::new();
    for (entry, schema) in expectations.contracts.iter().zip(schemas) {
        let path = dir.join(&entry.schema);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(io_error("create folder", parent))?;
        }
        fs::write(&path, to_canonical_json(schema, &entry.schema)?)
            .map_err(io_error("write", &path))?;
        written.push(path);
    }
    let path = dir.join(EXPECTATIONS_FILE);
    let value = serde_json::to_value(expectations).map_err(|source| SchemaError::Serialize {
        what: EXPECTATIONS_FILE.to_owned(),
        source,
    })?;
    fs::write(&path, to_canonical_json(&value, EXPECTATIONS_FILE)?)
        .map_err(io_error("write", &path))?;
    written.push(path);
    Ok(written)
}

fn read_bounded(path: &Path) -> Result<Vec<u8>, ExpectationsError> {
    schema::read_bounded(path).map_err(|source| ExpectationsError::Read {
        path: path.to_owned(),
        source,
    })
}

/// Loads an expectations folder. Paths come from the validated names, never from the file.
///
/// # Errors
/// [`ExpectationsError::MissingFile`], [`ExpectationsError::NewerFormat`],
/// [`ExpectationsError::Read`] or [`ExpectationsError::Invalid`] (with the JSON pointer).
pub fn load(dir: &Path) -> Result<ExpectationSet, ExpectationsError> {
    let path = dir.join(EXPECTATIONS_FILE);
    if !path.exists() {
        return Err(ExpectationsError::MissingFile {
            dir: dir.to_owned(),
        });
    }
    let invalid = |path: &Path, pointer: &str, reason: String| ExpectationsError::Invalid {
        path: path.to_owned(),
        pointer: pointer.to_owned(),
        reason,
    };
    let raw: Value = serde_json::from_slice(&read_bounded(&path)?)
        .map_err(|e| invalid(&path, "", e.to_string()))?;
    let found = raw
        .get("format_version")
        .and_then(Value::as_u64)
        .ok_or_else(|| {
            invalid(
                &path,
                "/format_version",
                "a positive integer is required".into(),
            )
        })?;
    if found > u64::from(EXPECTATIONS_FORMAT_VERSION) {
        return Err(ExpectationsError::NewerFormat { path, found });
    }
    let expectations: Expectations = serde_path_to_error::deserialize(&raw).map_err(|e| {
        let pointer = format!("/{}", e.path().to_string().replace('.', "/"));
        invalid(&path, &pointer, e.into_inner().to_string())
    })?;
    check_consumer_name(&expectations.consumer)
        .map_err(|e| invalid(&path, "/consumer", e.to_string()))?;
    let mut seen = BTreeSet::new();
    let mut schemas = Vec::with_capacity(expectations.contracts.len());
    for (i, entry) in expectations.contracts.iter().enumerate() {
        let at = |field: &str| format!("/contracts/{i}/{field}");
        EventType::parse(&entry.event_type)
            .map_err(|e| invalid(&path, &at("event_type"), e.to_string()))?;
        check_consumer_name(&entry.inbox_consumer)
            .map_err(|e| invalid(&path, &at("inbox_consumer"), e.to_string()))?;
        if !seen.insert((entry.inbox_consumer.clone(), entry.event_type.clone())) {
            return Err(invalid(
                &path,
                &format!("/contracts/{i}"),
                format!(
                    "`{}` is listed twice for `{}`",
                    entry.event_type, entry.inbox_consumer
                ),
            ));
        }
        let file = dir.join(schema_file(&entry.inbox_consumer, &entry.event_type));
        let schema: Value = serde_json::from_slice(&read_bounded(&file)?)
            .map_err(|e| invalid(&file, "", e.to_string()))?;
        if !schema.is_object() {
            return Err(invalid(&file, "", "a schema object is required".into()));
        }
        schemas.push(schema);
    }
    Ok(ExpectationSet {
        dir: dir.to_owned(),
        expectations,
        schemas,
    })
}
