//! Fixed values (`const`, `enum`, or a `oneOf`/`anyOf` of constants), and their comparison:
//! a restriction added or removed, a value removed or added.

use serde_json::{Map, Value};

use super::findings::{Findings, show};
use super::keywords::ANNOTATIONS;
use super::resolve::resolve;
use crate::compat::report::{ChangeKind, Severity};

/// The values a schema is restricted to (`const`, `enum`, or `oneOf`/`anyOf` of constants),
/// without `null`, and whether it came from a `const`.
fn value_set(root: &Value, map: &Map<String, Value>) -> Option<(Vec<Value>, bool)> {
    if let Some(value) = map.get("const") {
        return Some((vec![value.clone()], true));
    }
    if let Some(Value::Array(values)) = map.get("enum") {
        return Some((
            values.iter().filter(|v| !v.is_null()).cloned().collect(),
            false,
        ));
    }
    let variants = ["anyOf", "oneOf"]
        .into_iter()
        .find_map(|k| map.get(k).and_then(Value::as_array))?;
    let mut values = Vec::new();
    for variant in variants {
        let resolved = resolve(root, variant);
        let variant_map = resolved.schema.as_object()?;
        let only_values = variant_map.keys().all(|k| {
            k == "type" || k == "const" || k == "enum" || ANNOTATIONS.contains(&k.as_str())
        });
        if !only_values {
            return None;
        }
        let (more, _) = value_set(root, variant_map)?;
        values.extend(more);
    }
    Some((values, false))
}

/// Compares `const` / `enum` restrictions; returns whether both sides were value sets
/// (then their variants need no separate comparison).
pub(super) fn compare(
    findings: &mut Findings<'_>,
    o: &Map<String, Value>,
    n: &Map<String, Value>,
    path: &str,
) -> bool {
    let old = value_set(findings.old_root, o);
    let new = value_set(findings.new_root, n);
    match (old, new) {
        (None, None) => false,
        (Some(_), None) => {
            findings.report(
                Severity::Warning,
                ChangeKind::ValuesUnrestricted,
                path,
                "no longer restricted to fixed values (`enum`/`const` removed): consumers \
                 may receive values they do not know"
                    .to_owned(),
            );
            true
        }
        (None, Some((values, from_const))) => {
            let shown: Vec<String> = values.iter().map(show).collect();
            if from_const {
                findings.report(
                    Severity::Breaking,
                    ChangeKind::ConstAdded,
                    path,
                    format!(
                        "`const` {} added: every other value becomes invalid",
                        shown.join(", ")
                    ),
                );
            } else {
                findings.report(
                    Severity::Breaking,
                    ChangeKind::EnumAdded,
                    path,
                    format!(
                        "restricted to the values {}: every other value becomes invalid",
                        shown.join(", ")
                    ),
                );
            }
            true
        }
        (Some((old_values, old_const)), Some((new_values, new_const))) => {
            if old_const && new_const && old_values != new_values {
                let (before, after) = (
                    old_values.first().map(show).unwrap_or_default(),
                    new_values.first().map(show).unwrap_or_default(),
                );
                findings.report(
                    Severity::Breaking,
                    ChangeKind::ConstChanged,
                    path,
                    format!("`const` changed from {before} to {after}"),
                );
                return true;
            }
            for value in old_values.iter().filter(|v| !new_values.contains(v)) {
                findings.report(
                    Severity::Breaking,
                    ChangeKind::EnumValueRemoved,
                    path,
                    format!(
                        "value {} removed: consumers handling it and messages already \
                         carrying it break",
                        show(value)
                    ),
                );
            }
            for value in new_values.iter().filter(|v| !old_values.contains(v)) {
                findings.report(
                    Severity::Warning,
                    ChangeKind::EnumValueAdded,
                    path,
                    format!(
                        "value {} added: consumers that match the values exhaustively \
                         must handle it",
                        show(value)
                    ),
                );
            }
            true
        }
    }
}
