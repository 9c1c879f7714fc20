//! The types a node accepts, and their comparison: types that no longer overlap, a narrowed
//! or widened type set, `null` removed or allowed.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::findings::Findings;
use super::resolve::{MAX_HOPS, Resolved, resolve};
use crate::compat::report::{ChangeKind, Severity};

/// Every JSON Schema type: what a node without a type restriction accepts.
const ALL_TYPES: [&str; 7] = [
    "array", "boolean", "integer", "null", "number", "object", "string",
];

/// The JSON Schema type of a value (`integer` for numbers stored without a fraction).
fn value_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The types a schema accepts; `None` when unrestricted.
fn accepted_types(root: &Value, resolved: &Resolved, depth: usize) -> Option<BTreeSet<String>> {
    let mut types = match &resolved.schema {
        Value::Bool(false) => Some(BTreeSet::new()),
        Value::Object(map) => types_of(root, map, depth),
        _ => None,
    }?;
    if resolved.nullable {
        types.insert("null".to_owned());
    }
    Some(types)
}

fn types_of(root: &Value, map: &Map<String, Value>, depth: usize) -> Option<BTreeSet<String>> {
    match map.get("type") {
        Some(Value::String(t)) => return Some(BTreeSet::from([t.clone()])),
        Some(Value::Array(ts)) => {
            return Some(
                ts.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect(),
            );
        }
        _ => {}
    }
    if let Some(value) = map.get("const") {
        return Some(BTreeSet::from([value_type(value).to_owned()]));
    }
    if let Some(Value::Array(values)) = map.get("enum") {
        return Some(values.iter().map(|v| value_type(v).to_owned()).collect());
    }
    if depth >= MAX_HOPS {
        return None;
    }
    let variants = ["anyOf", "oneOf"]
        .into_iter()
        .find_map(|k| map.get(k).and_then(Value::as_array))?;
    let mut union = BTreeSet::new();
    for variant in variants {
        union.extend(accepted_types(root, &resolve(root, variant), depth + 1)?);
    }
    Some(union)
}

/// Whether a type set accepts values of type `t` (`number` accepts `integer`).
fn accepts(types: Option<&BTreeSet<String>>, t: &str) -> bool {
    types.is_none_or(|set| set.contains(t) || (t == "integer" && set.contains("number")))
}

fn show_types(types: Option<&BTreeSet<String>>) -> String {
    match types {
        None => "any type".to_owned(),
        Some(set) if set.is_empty() => "no value".to_owned(),
        Some(set) => set
            .iter()
            .map(|t| format!("`{t}`"))
            .collect::<Vec<_>>()
            .join(" | "),
    }
}

/// Compares accepted types; returns `false` when they no longer overlap (nothing more to
/// compare).
pub(super) fn compare(
    findings: &mut Findings<'_>,
    old: &Resolved,
    new: &Resolved,
    path: &str,
    depth: usize,
) -> bool {
    let old_types = accepted_types(findings.old_root, old, depth);
    let new_types = accepted_types(findings.new_root, new, depth);
    let old_list: Vec<&str> = match &old_types {
        Some(set) => set.iter().map(String::as_str).collect(),
        None => ALL_TYPES.to_vec(),
    };
    let new_list: Vec<&str> = match &new_types {
        Some(set) => set.iter().map(String::as_str).collect(),
        None => ALL_TYPES.to_vec(),
    };
    let removed: Vec<&str> = old_list
        .iter()
        .copied()
        .filter(|t| !accepts(new_types.as_ref(), t))
        .collect();
    let added: Vec<&str> = new_list
        .iter()
        .copied()
        .filter(|t| !accepts(old_types.as_ref(), t))
        .collect();
    let (old_shown, new_shown) = (
        show_types(old_types.as_ref()),
        show_types(new_types.as_ref()),
    );
    let old_non_null = old_list.iter().any(|t| *t != "null");
    let new_non_null = new_list.iter().any(|t| *t != "null");
    let overlap = old_list
        .iter()
        .any(|t| *t != "null" && accepts(new_types.as_ref(), t))
        || new_list
            .iter()
            .any(|t| *t != "null" && accepts(old_types.as_ref(), t));
    if old_non_null && new_non_null && !overlap {
        findings.report(
            Severity::Breaking,
            ChangeKind::TypeChanged,
            path,
            format!("type changed from {old_shown} to {new_shown}"),
        );
        return false;
    }
    if removed.contains(&"null") {
        findings.report(
            Severity::Breaking,
            ChangeKind::NullRemoved,
            path,
            "no longer nullable: messages already written with `null` here become \
             invalid"
                .to_owned(),
        );
    }
    if removed.iter().any(|t| *t != "null") {
        findings.report(
            Severity::Breaking,
            ChangeKind::TypeNarrowed,
            path,
            format!(
                "type narrowed from {old_shown} to {new_shown}: values of type {} are no \
                 longer accepted",
                removed
                    .iter()
                    .filter(|t| **t != "null")
                    .map(|t| format!("`{t}`"))
                    .collect::<Vec<_>>()
                    .join(" | ")
            ),
        );
    }
    if added.contains(&"null") {
        findings.report(
            Severity::Warning,
            ChangeKind::NullAdded,
            path,
            "became nullable: consumers that expect a value may receive `null`".to_owned(),
        );
    }
    if added.iter().any(|t| *t != "null") {
        findings.report(
            Severity::Warning,
            ChangeKind::TypeWidened,
            path,
            format!(
                "type widened from {old_shown} to {new_shown}: existing consumers may \
                 reject the new values"
            ),
        );
    }
    true
}
