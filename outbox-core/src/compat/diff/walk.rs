//! The walk through two schema documents: each pair of nodes resolved and compared, then
//! the walk descends into their subschemas: `properties` (fields removed, added, made
//! required or optional), `additionalProperties` / `unevaluatedProperties`, `items` and
//! `prefixItems`, `oneOf`/`anyOf` variants (matched by label) and `allOf`. `$ref` cycles
//! (recursive types) are compared once.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::findings::Findings;
use super::path::{property_segment, variant_labels};
use super::resolve::{Resolved, resolve};
use super::{constraints, keywords, types, values};
use crate::compat::report::{Change, ChangeKind, Severity};

/// How many schemas deep the comparison follows before giving up with a warning.
const MAX_DEPTH: usize = 128;

/// The property names listed in `required`.
pub(super) fn required_set(map: &Map<String, Value>) -> BTreeSet<String> {
    map.get("required")
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// `additionalProperties` / `unevaluatedProperties`: open (absent or `true`), closed
/// (`false`) or a schema.
enum Openness<'a> {
    Open,
    Closed,
    Schema(&'a Value),
}

fn openness<'a>(map: &'a Map<String, Value>, keyword: &str) -> Openness<'a> {
    match map.get(keyword) {
        None | Some(Value::Bool(true)) => Openness::Open,
        Some(Value::Bool(false)) => Openness::Closed,
        Some(Value::Object(o)) if o.is_empty() => Openness::Open,
        Some(schema) => Openness::Schema(schema),
    }
}

/// A comparison under way: the changes found, and the `$ref`s being expanded.
pub(super) struct Walk<'a> {
    findings: Findings<'a>,
    /// `$ref` pairs being compared further up: meeting one again is a cycle.
    expanding: Vec<(Option<String>, Option<String>)>,
}

impl<'a> Walk<'a> {
    /// A walk through the documents `old_root` and `new_root`.
    pub(super) fn new(old_root: &'a Value, new_root: &'a Value) -> Self {
        Self {
            findings: Findings {
                old_root,
                new_root,
                changes: Vec::new(),
            },
            expanding: Vec::new(),
        }
    }

    /// The changes found, in the order found.
    pub(super) fn into_changes(self) -> Vec<Change> {
        self.findings.changes
    }

    /// Compares the nodes `old` and `new` found at `path`, `depth` schemas down.
    pub(super) fn node(&mut self, old: &Value, new: &Value, path: String, depth: usize) {
        if depth > MAX_DEPTH {
            self.findings.report(
                Severity::Warning,
                ChangeKind::DepthLimitReached,
                &path,
                format!("schemas nest deeper than {MAX_DEPTH} levels; not compared further"),
            );
            return;
        }
        let old = resolve(self.findings.old_root, old);
        let new = resolve(self.findings.new_root, new);
        if old.unresolved.is_some() || new.unresolved.is_some() {
            if old.unresolved != new.unresolved {
                let (side, reference) = match (&old.unresolved, &new.unresolved) {
                    (Some(r), _) => ("baseline", r),
                    (None, Some(r)) => ("current", r),
                    (None, None) => return,
                };
                self.findings.report(
                    Severity::Breaking,
                    ChangeKind::ReferenceUnresolved,
                    &path,
                    format!(
                        "cannot resolve `$ref` `{reference}` in the {side} schema, so the \
                         change cannot be proven compatible"
                    ),
                );
            }
            return;
        }
        let key = (old.via.clone(), new.via.clone());
        let through_reference = key.0.is_some() || key.1.is_some();
        if through_reference && self.expanding.contains(&key) {
            return;
        }
        if through_reference {
            self.expanding.push(key);
        }
        self.resolved(&old, &new, &path, depth);
        if through_reference {
            self.expanding.pop();
        }
    }

    fn resolved(&mut self, old: &Resolved, new: &Resolved, path: &str, depth: usize) {
        match (&old.schema, &new.schema) {
            (Value::Bool(false), Value::Bool(false)) => return,
            (Value::Bool(false), _) => {
                self.findings.report(
                    Severity::Warning,
                    ChangeKind::ConstraintRelaxed,
                    path,
                    "accepts values now (was the `false` schema)".to_owned(),
                );
                return;
            }
            (_, Value::Bool(false)) => {
                self.findings.report(
                    Severity::Breaking,
                    ChangeKind::TypeChanged,
                    path,
                    "accepts no value any more (the `false` schema)".to_owned(),
                );
                return;
            }
            _ => {}
        }
        let (Some(o), Some(n)) = (old.schema.as_object(), new.schema.as_object()) else {
            return;
        };
        if !types::compare(&mut self.findings, old, new, path, depth) {
            return;
        }
        let values_compared = values::compare(&mut self.findings, o, n, path);
        constraints::compare(&mut self.findings, o, n, path);
        self.properties(o, n, path, depth);
        for keyword in ["additionalProperties", "unevaluatedProperties"] {
            self.openness(o, n, keyword, path, depth);
        }
        self.arrays(o, n, path, depth);
        if !values_compared {
            self.variants(o, n, path, depth);
        }
        self.all_of(o, n, path, depth);
        keywords::annotations(&mut self.findings, o, n, path);
        keywords::other_keywords(&mut self.findings, o, n, path);
    }

    fn properties(
        &mut self,
        o: &Map<String, Value>,
        n: &Map<String, Value>,
        path: &str,
        depth: usize,
    ) {
        let empty = Map::new();
        let old_properties = o
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let new_properties = n
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let (old_required, new_required) = (required_set(o), required_set(n));
        let old_closed = matches!(openness(o, "additionalProperties"), Openness::Closed)
            || matches!(openness(o, "unevaluatedProperties"), Openness::Closed);
        let names: BTreeSet<&String> = old_properties.keys().chain(new_properties.keys()).collect();
        for name in names {
            let field = format!("{path}{}", property_segment(name));
            let was_required = old_required.contains(name.as_str());
            let is_required = new_required.contains(name.as_str());
            match (old_properties.get(name), new_properties.get(name)) {
                (Some(_), None) => self.findings.report(
                    Severity::Breaking,
                    ChangeKind::FieldRemoved,
                    &field,
                    format!(
                        "{} field `{name}` removed: consumers that read it break",
                        if was_required { "required" } else { "optional" }
                    ),
                ),
                (None, Some(_)) if is_required => self.findings.report(
                    Severity::Breaking,
                    ChangeKind::FieldAddedRequired,
                    &field,
                    format!("required field `{name}` added: messages already written lack it"),
                ),
                (None, Some(_)) if old_closed => self.findings.report(
                    Severity::Warning,
                    ChangeKind::FieldAddedOptional,
                    &field,
                    format!(
                        "optional field `{name}` added to an object that allowed no other \
                         properties: strict consumers reject it"
                    ),
                ),
                (None, Some(_)) => self.findings.report(
                    Severity::Compatible,
                    ChangeKind::FieldAddedOptional,
                    &field,
                    format!("optional field `{name}` added"),
                ),
                (Some(before), Some(after)) => {
                    if is_required && !was_required {
                        self.findings.report(
                            Severity::Breaking,
                            ChangeKind::FieldBecameRequired,
                            &field,
                            format!(
                                "field `{name}` became required: messages already written \
                                 may lack it"
                            ),
                        );
                    } else if was_required && !is_required {
                        self.findings.report(
                            Severity::Warning,
                            ChangeKind::FieldBecameOptional,
                            &field,
                            format!(
                                "field `{name}` became optional: consumers that expect it may \
                                 not receive it"
                            ),
                        );
                    }
                    self.node(before, after, field, depth + 1);
                }
                (None, None) => {}
            }
        }
    }

    fn openness(
        &mut self,
        o: &Map<String, Value>,
        n: &Map<String, Value>,
        keyword: &str,
        path: &str,
        depth: usize,
    ) {
        match (openness(o, keyword), openness(n, keyword)) {
            (Openness::Open, Openness::Open) | (Openness::Closed, Openness::Closed) => {}
            (Openness::Schema(before), Openness::Schema(after)) => {
                self.node(before, after, format!("{path}.*"), depth + 1);
            }
            (Openness::Open, Openness::Closed) | (Openness::Schema(_), Openness::Closed) => {
                self.findings.report(
                    Severity::Breaking,
                    ChangeKind::AdditionalPropertiesTightened,
                    path,
                    format!(
                        "`{keyword}: false` added: messages with other properties become \
                         invalid"
                    ),
                );
            }
            (Openness::Open, Openness::Schema(_)) => self.findings.report(
                Severity::Breaking,
                ChangeKind::AdditionalPropertiesTightened,
                path,
                format!("`{keyword}` restricted to a schema (was open)"),
            ),
            (Openness::Closed, _) | (Openness::Schema(_), Openness::Open) => self.findings.report(
                Severity::Warning,
                ChangeKind::AdditionalPropertiesRelaxed,
                path,
                format!("`{keyword}` relaxed: consumers may receive properties they do not know"),
            ),
        }
    }

    fn arrays(&mut self, o: &Map<String, Value>, n: &Map<String, Value>, path: &str, depth: usize) {
        match (o.get("items"), n.get("items")) {
            (Some(before), Some(after)) => {
                self.node(before, after, format!("{path}[]"), depth + 1);
            }
            (None, Some(_)) => self.findings.report(
                Severity::Breaking,
                ChangeKind::ConstraintTightened,
                path,
                "`items` restricted (was any item)".to_owned(),
            ),
            (Some(_), None) => self.findings.report(
                Severity::Warning,
                ChangeKind::ConstraintRelaxed,
                path,
                "`items` no longer restricted".to_owned(),
            ),
            (None, None) => {}
        }
        let empty = Vec::new();
        let before = o
            .get("prefixItems")
            .and_then(Value::as_array)
            .unwrap_or(&empty);
        let after = n
            .get("prefixItems")
            .and_then(Value::as_array)
            .unwrap_or(&empty);
        for (index, (b, a)) in before.iter().zip(after).enumerate() {
            self.node(b, a, format!("{path}[{index}]"), depth + 1);
        }
        for index in after.len()..before.len() {
            self.findings.report(
                Severity::Breaking,
                ChangeKind::TupleElementRemoved,
                &format!("{path}[{index}]"),
                format!("tuple element {index} removed"),
            );
        }
        for index in before.len()..after.len() {
            self.findings.report(
                Severity::Warning,
                ChangeKind::TupleElementAdded,
                &format!("{path}[{index}]"),
                format!("tuple element {index} added"),
            );
        }
    }

    fn variants(
        &mut self,
        o: &Map<String, Value>,
        n: &Map<String, Value>,
        path: &str,
        depth: usize,
    ) {
        let list = |m: &Map<String, Value>| {
            ["oneOf", "anyOf"]
                .into_iter()
                .find_map(|k| m.get(k).and_then(Value::as_array).map(|v| (k, v.clone())))
        };
        match (list(o), list(n)) {
            (None, None) => {}
            (None, Some((keyword, _))) => self.findings.report(
                Severity::Breaking,
                ChangeKind::ConstraintTightened,
                path,
                format!("`{keyword}` added: values must now match one of its variants"),
            ),
            (Some((keyword, _)), None) => self.findings.report(
                Severity::Warning,
                ChangeKind::ConstraintRelaxed,
                path,
                format!("`{keyword}` removed"),
            ),
            (Some((_, before)), Some((_, after))) => {
                let old_labels = variant_labels(self.findings.old_root, &before);
                let new_labels = variant_labels(self.findings.new_root, &after);
                for (label, old_variant) in old_labels.iter().zip(&before) {
                    let variant_path = format!("{path}({label})");
                    match new_labels.iter().position(|l| l == label) {
                        Some(i) => self.node(old_variant, &after[i], variant_path, depth + 1),
                        None => self.findings.report(
                            Severity::Breaking,
                            ChangeKind::VariantRemoved,
                            &variant_path,
                            format!("variant `{label}` removed: messages already written with it become invalid"),
                        ),
                    }
                }
                for label in new_labels.iter().filter(|l| !old_labels.contains(l)) {
                    self.findings.report(
                        Severity::Warning,
                        ChangeKind::VariantAdded,
                        &format!("{path}({label})"),
                        format!(
                            "variant `{label}` added: consumers that match the variants \
                             exhaustively must handle it"
                        ),
                    );
                }
            }
        }
    }

    fn all_of(&mut self, o: &Map<String, Value>, n: &Map<String, Value>, path: &str, depth: usize) {
        let empty = Vec::new();
        let before = o.get("allOf").and_then(Value::as_array).unwrap_or(&empty);
        let after = n.get("allOf").and_then(Value::as_array).unwrap_or(&empty);
        for (b, a) in before.iter().zip(after) {
            self.node(b, a, path.to_owned(), depth + 1);
        }
        if after.len() > before.len() {
            self.findings.report(
                Severity::Breaking,
                ChangeKind::ConstraintTightened,
                path,
                format!("{} `allOf` schema(s) added", after.len() - before.len()),
            );
        } else if before.len() > after.len() {
            self.findings.report(
                Severity::Warning,
                ChangeKind::ConstraintRelaxed,
                path,
                format!("{} `allOf` schema(s) removed", before.len() - after.len()),
            );
        }
    }
}
