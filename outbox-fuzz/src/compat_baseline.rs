//! A baseline folder's `index.json`, loaded by [`ContractSet::load`]: the event types it
//! lists name the schema files that are read next, so a hostile index must not reach a
//! file outside the folder.

use std::path::PathBuf;
use std::sync::OnceLock;

use outbox_core::compat::{CompatError, ContractSet};

/// A baseline folder of this process with one schema file, `schemas/a.b.c.v1.json`.
fn folder() -> &'static PathBuf {
    static FOLDER: OnceLock<PathBuf> = OnceLock::new();
    FOLDER.get_or_init(|| {
        crate::scratch_folder(
            "outbox-fuzz-baseline",
            "schemas/a.b.c.v1.json",
            br#"{"type":"object"}"#,
        )
    })
}

/// Writes `data` as `index.json` of the folder and loads it.
///
/// # Panics
/// When a loaded set names a contract whose schema file is not the one in the folder.
pub fn run(data: &[u8]) {
    let dir = folder();
    std::fs::write(dir.join("index.json"), data).expect("index.json is written");
    match ContractSet::load(dir) {
        Ok(set) => {
            for contract in set.iter() {
                assert_eq!(
                    contract.entry.event_type, "a.b.c.v1",
                    "only that file exists"
                );
                assert_eq!(contract.schema, serde_json::json!({"type": "object"}));
            }
        }
        Err(
            CompatError::Read { .. }
            | CompatError::Parse { .. }
            | CompatError::InvalidEventType { .. }
            | CompatError::DuplicateEventType { .. }
            | CompatError::NewerFormat { .. },
        ) => {}
        Err(other) => panic!("unexpected error: {other}"),
    }
}
