//! Fuzz targets: every reader of bytes that come from outside the process, each with the
//! invariants any input must keep (beyond "does not panic").
//!
//! | target | reads | invariants |
//! |---|---|---|
//! | [`cloudevents_binary`] | a broker message: CloudEvents binary-mode headers and body, as the inbox receives it | an accepted message re-encodes to itself; a refused one is captured for the dead letter within its bounds |
//! | [`envelope_json`] | an envelope in its JSON form | an accepted document re-encodes to the same envelope |
//! | [`event_type`] | an event type | an accepted one is `<name>.v<N>` with a context before its last name segment |
//! | [`payload`] | a contract's payload (`OrderPlacedV1` of the Bookstore) | an accepted payload re-encodes to the same contract |
//! | [`compat_schemas`] | two JSON Schemas compared by the compatibility check | a schema has no change against itself |
//! | [`compat_baseline`] | a baseline folder's `index.json` | loading ends with a set or a typed error |
//! | [`expectations`] | a consumer's `expectations.json` (another team's file) | loading ends with a set that names only files of the folder, or a typed error |
//!
//! cargo-fuzz runs them from `outbox-fuzz/fuzz` (see `outbox-fuzz/README.md`); `cargo test`
//! replays every input under `outbox-fuzz/corpus/<target>/` (`tests/corpus.rs`), so an input
//! that once crashed a target stays a test.

pub mod cloudevents_binary;
pub mod compat_baseline;
pub mod compat_schemas;
pub mod envelope_json;
pub mod event_type;
pub mod expectations;
pub mod message;
pub mod payload;

/// A folder of this process under the temporary directory, `<prefix>-<pid>`, holding one file
/// `file` (a relative path) with `contents`: where a target that reads a folder writes its
/// input beside a file it may legitimately reach.
fn scratch_folder(prefix: &str, file: &str, contents: &[u8]) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("{prefix}-{}", std::process::id()));
    let path = dir.join(file);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("a temporary folder");
    }
    std::fs::write(&path, contents).expect("a file in the temporary folder");
    dir
}

/// A target: reads one input, panics when an invariant breaks.
pub type Target = fn(&[u8]);

/// Every target by name (the name of its corpus folder and of its cargo-fuzz binary).
pub const TARGETS: &[(&str, Target)] = &[
    ("cloudevents_binary", cloudevents_binary::run),
    ("compat_baseline", compat_baseline::run),
    ("compat_schemas", compat_schemas::run),
    ("envelope_json", envelope_json::run),
    ("expectations", expectations::run),
    ("event_type", event_type::run),
    ("payload", payload::run),
];
