//! Two JSON Schemas compared by the compatibility check's diff engine
//! ([`compare_schemas`]): a baseline file is outside input (any JSON, `$ref` cycles,
//! deep nesting).

use outbox_core::compat::compare_schemas;
use serde_json::Value;

/// Splits `data` at its first `0xFF` byte (never in UTF-8 JSON) into an old and a new
/// schema and compares them; without one, compares `data` with itself.
///
/// # Panics
/// When a schema has changes against itself.
pub fn run(data: &[u8]) {
    let (old, new) = match data.iter().position(|b| *b == 0xFF) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, data),
    };
    let Ok(old) = serde_json::from_slice::<Value>(old) else {
        return;
    };
    let Ok(new) = serde_json::from_slice::<Value>(new) else {
        return;
    };
    compare_schemas(&old, &new);
    let same = compare_schemas(&old, &old);
    assert!(same.is_empty(), "a schema against itself: {same:?}");
}
