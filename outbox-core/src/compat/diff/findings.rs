//! The changes a comparison has found so far, with the two documents it compares, and how a
//! change's detail quotes a value.

use serde_json::Value;

use crate::compat::report::{Change, ChangeKind, Severity};

/// The two schema documents being compared (their local `$ref`s resolve against them) and
/// the changes found so far, in the order found.
pub(super) struct Findings<'a> {
    /// The baseline document.
    pub(super) old_root: &'a Value,
    /// The current document.
    pub(super) new_root: &'a Value,
    /// The changes found.
    pub(super) changes: Vec<Change>,
}

impl Findings<'_> {
    /// Records a change at `path`.
    pub(super) fn report(
        &mut self,
        severity: Severity,
        kind: ChangeKind,
        path: &str,
        detail: String,
    ) {
        self.changes.push(Change {
            severity,
            kind,
            path: path.to_owned(),
            detail,
        });
    }
}

/// A value as a change's detail quotes it: a string's text, any other value's JSON, in
/// backticks.
pub(super) fn show(value: &Value) -> String {
    match value {
        Value::String(s) => format!("`{s}`"),
        other => format!("`{other}`"),
    }
}
