//! A consumer's `expectations.json`, loaded by [`expectations::load`]: it comes from another
//! team, and the names it lists choose the schema files read next, so a hostile file must not
//! reach a file outside the folder.

use std::path::PathBuf;
use std::sync::OnceLock;

use outbox_core::expectations::{self, ExpectationsError};

/// An expectations folder of this process with one schema file,
/// `schemas/inventory.reserve-stock/a.b.c.v1.json`.
fn folder() -> &'static PathBuf {
    static FOLDER: OnceLock<PathBuf> = OnceLock::new();
    FOLDER.get_or_init(|| {
        crate::scratch_folder(
            "outbox-fuzz-expectations",
            "schemas/inventory.reserve-stock/a.b.c.v1.json",
            br#"{"type":"object"}"#,
        )
    })
}

/// Writes `data` as `expectations.json` of the folder and loads it.
///
/// # Panics
/// When a loaded set names an expectation whose schema file is not the one in the folder, or
/// loading fails with an error other than a typed refusal of the file.
pub fn run(data: &[u8]) {
    let dir = folder();
    std::fs::write(dir.join(expectations::EXPECTATIONS_FILE), data)
        .expect("expectations.json is written");
    match expectations::load(dir) {
        Ok(set) => {
            assert_eq!(set.schemas.len(), set.expectations.contracts.len());
            for (entry, schema) in set.expectations.contracts.iter().zip(&set.schemas) {
                assert_eq!(entry.event_type, "a.b.c.v1", "only that file exists");
                assert_eq!(entry.inbox_consumer, "inventory.reserve-stock");
                assert_eq!(schema, &serde_json::json!({"type": "object"}));
            }
        }
        Err(
            ExpectationsError::Read { .. }
            | ExpectationsError::Invalid { .. }
            | ExpectationsError::NewerFormat { .. },
        ) => {}
        Err(other) => panic!("unexpected error: {other}"),
    }
}
