//! The restrictions of a value: `format`, `pattern`, `multipleOf`, `uniqueItems` and the
//! bounds (`maximum`, `minLength`, …). Adding or tightening one narrows (breaking); removing
//! or relaxing one is a warning.

use serde_json::{Map, Value};

use super::findings::{Findings, show};
use crate::compat::report::{ChangeKind, Severity};

/// Upper bounds: adding or lowering one narrows.
const UPPER_BOUNDS: &[&str] = &[
    "maximum",
    "exclusiveMaximum",
    "maxLength",
    "maxItems",
    "maxProperties",
    "maxContains",
];

/// Lower bounds: adding or raising one narrows. The count bounds default to 0.
const LOWER_BOUNDS: &[(&str, Option<f64>)] = &[
    ("minimum", None),
    ("exclusiveMinimum", None),
    ("minLength", Some(0.0)),
    ("minItems", Some(0.0)),
    ("minProperties", Some(0.0)),
    ("minContains", Some(1.0)),
];

/// Compares the format, pattern, `multipleOf`, `uniqueItems` and bounds of two nodes.
pub(super) fn compare(
    findings: &mut Findings<'_>,
    o: &Map<String, Value>,
    n: &Map<String, Value>,
    path: &str,
) {
    match (o.get("format"), n.get("format")) {
        (None, Some(f)) => findings.report(
            Severity::Breaking,
            ChangeKind::FormatAdded,
            path,
            format!("`format` {} added", show(f)),
        ),
        (Some(before), Some(after)) if before != after => findings.report(
            Severity::Breaking,
            ChangeKind::FormatChanged,
            path,
            format!("`format` changed from {} to {}", show(before), show(after)),
        ),
        (Some(f), None) => findings.report(
            Severity::Warning,
            ChangeKind::FormatRemoved,
            path,
            format!(
                "`format` {} removed: consumers may receive other values",
                show(f)
            ),
        ),
        _ => {}
    }
    for keyword in ["pattern", "multipleOf"] {
        match (o.get(keyword), n.get(keyword)) {
            (None, Some(v)) => findings.report(
                Severity::Breaking,
                ChangeKind::ConstraintTightened,
                path,
                format!("`{keyword}` {} added", show(v)),
            ),
            (Some(before), Some(after)) if before != after => findings.report(
                Severity::Breaking,
                ChangeKind::ConstraintTightened,
                path,
                format!(
                    "`{keyword}` changed from {} to {}",
                    show(before),
                    show(after)
                ),
            ),
            (Some(v), None) => findings.report(
                Severity::Warning,
                ChangeKind::ConstraintRelaxed,
                path,
                format!("`{keyword}` {} removed", show(v)),
            ),
            _ => {}
        }
    }
    let unique = |m: &Map<String, Value>| m.get("uniqueItems") == Some(&Value::Bool(true));
    match (unique(o), unique(n)) {
        (false, true) => findings.report(
            Severity::Breaking,
            ChangeKind::ConstraintTightened,
            path,
            "`uniqueItems` added".to_owned(),
        ),
        (true, false) => findings.report(
            Severity::Warning,
            ChangeKind::ConstraintRelaxed,
            path,
            "`uniqueItems` removed".to_owned(),
        ),
        _ => {}
    }
    for &keyword in UPPER_BOUNDS {
        let (before, after) = (
            o.get(keyword).and_then(Value::as_f64),
            n.get(keyword).and_then(Value::as_f64),
        );
        bound(findings, keyword, before, after, |b, a| a < b, path);
    }
    for &(keyword, default) in LOWER_BOUNDS {
        let (before, after) = (
            o.get(keyword).and_then(Value::as_f64).or(default),
            n.get(keyword).and_then(Value::as_f64).or(default),
        );
        bound(findings, keyword, before, after, |b, a| a > b, path);
    }
}

/// Reports a bound change: adding one, or moving it so that `tighter(before, after)`,
/// is breaking; removing or loosening one is a warning.
fn bound(
    findings: &mut Findings<'_>,
    keyword: &str,
    before: Option<f64>,
    after: Option<f64>,
    tighter: impl Fn(f64, f64) -> bool,
    path: &str,
) {
    match (before, after) {
        (None, Some(a)) => findings.report(
            Severity::Breaking,
            ChangeKind::ConstraintTightened,
            path,
            format!("`{keyword}` {a} added"),
        ),
        (Some(b), None) => findings.report(
            Severity::Warning,
            ChangeKind::ConstraintRelaxed,
            path,
            format!("`{keyword}` {b} removed: consumers may receive values beyond it"),
        ),
        (Some(b), Some(a)) if tighter(b, a) => findings.report(
            Severity::Breaking,
            ChangeKind::ConstraintTightened,
            path,
            format!("`{keyword}` tightened from {b} to {a}"),
        ),
        (Some(b), Some(a)) if b != a => findings.report(
            Severity::Warning,
            ChangeKind::ConstraintRelaxed,
            path,
            format!("`{keyword}` relaxed from {b} to {a}: consumers may receive values beyond the old bound"),
        ),
        _ => {}
    }
}
