//! The keywords that only annotate (a change is a compatible note), the keywords the checker
//! interprets, and the comparison of every other keyword: a change the checker cannot
//! interpret is breaking, since it cannot be proven compatible.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::findings::Findings;
use crate::compat::report::{ChangeKind, Severity};

/// Keywords that only annotate: a change is a compatible note.
pub(super) const ANNOTATIONS: &[&str] = &[
    "title",
    "description",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "contentEncoding",
    "contentMediaType",
];

/// Keywords interpreted by the comparison (or irrelevant to it).
const INTERPRETED: &[&str] = &[
    "$schema",
    "$id",
    "$ref",
    "$defs",
    "definitions",
    "$comment",
    "$anchor",
    "type",
    "enum",
    "const",
    "format",
    "pattern",
    "multipleOf",
    "uniqueItems",
    "maximum",
    "exclusiveMaximum",
    "maxLength",
    "maxItems",
    "maxProperties",
    "maxContains",
    "minimum",
    "exclusiveMinimum",
    "minLength",
    "minItems",
    "minProperties",
    "minContains",
    "properties",
    "required",
    "additionalProperties",
    "unevaluatedProperties",
    "items",
    "prefixItems",
    "anyOf",
    "oneOf",
    "allOf",
];

/// Compares the annotations of two nodes: each change is a compatible note.
pub(super) fn annotations(
    findings: &mut Findings<'_>,
    o: &Map<String, Value>,
    n: &Map<String, Value>,
    path: &str,
) {
    for &keyword in ANNOTATIONS {
        let (before, after) = (o.get(keyword), n.get(keyword));
        if before == after {
            continue;
        }
        let detail = match (before, after) {
            (None, Some(a)) => format!("`{keyword}` added: {}", excerpt(a)),
            (Some(b), None) => format!("`{keyword}` removed (was {})", excerpt(b)),
            (Some(b), Some(a)) => {
                format!("`{keyword}` changed from {} to {}", excerpt(b), excerpt(a))
            }
            (None, None) => continue,
        };
        findings.report(
            Severity::Compatible,
            ChangeKind::AnnotationChanged,
            path,
            detail,
        );
    }
}

/// Reports every keyword that changed and that the checker neither interprets nor knows as
/// an annotation or an `x-` extension.
pub(super) fn other_keywords(
    findings: &mut Findings<'_>,
    o: &Map<String, Value>,
    n: &Map<String, Value>,
    path: &str,
) {
    let keywords: BTreeSet<&String> = o.keys().chain(n.keys()).collect();
    for keyword in keywords {
        let interpreted = INTERPRETED.contains(&keyword.as_str())
            || ANNOTATIONS.contains(&keyword.as_str())
            || keyword.starts_with("x-");
        if interpreted || o.get(keyword) == n.get(keyword) {
            continue;
        }
        findings.report(
            Severity::Breaking,
            ChangeKind::KeywordChanged,
            path,
            format!(
                "`{keyword}` changed; the checker does not interpret it and cannot prove \
                 the change compatible"
            ),
        );
    }
}

/// A short rendering of an annotation value: at most 60 characters of its JSON.
fn excerpt(value: &Value) -> String {
    const LIMIT: usize = 60;
    let text = value.to_string();
    if text.chars().count() <= LIMIT {
        text
    } else {
        let cut: String = text.chars().take(LIMIT).collect();
        format!("{cut}…")
    }
}
