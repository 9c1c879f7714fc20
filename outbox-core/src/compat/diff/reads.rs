//! The fields a schema declares, as change paths: what a consumer's type reads.
//!
//! The walk follows the same paths as the comparison (`properties`, `items`, `prefixItems`,
//! `additionalProperties`, `oneOf`/`anyOf` variants by label, `allOf`), so that a change the
//! comparison reports at `$.books[].quantity` matches the read of `$.books[].quantity`.

use std::collections::BTreeMap;

use serde_json::Value;

use super::path::{property_segment, variant_labels};
use super::resolve::resolve;
use super::walk::required_set;

/// How deep the walk follows nested schemas (recursive types stop at their first repeat).
const MAX_DEPTH: usize = 64;

/// Every field path `schema` declares, with whether it is required where it is (a field
/// under an optional one is required only when its parent is present).
pub(crate) fn field_reads(schema: &Value) -> BTreeMap<String, bool> {
    let mut reads = BTreeMap::new();
    let mut expanding = Vec::new();
    walk(schema, schema, super::ROOT, 0, &mut expanding, &mut reads);
    reads
}

fn walk(
    root: &Value,
    node: &Value,
    path: &str,
    depth: usize,
    expanding: &mut Vec<String>,
    reads: &mut BTreeMap<String, bool>,
) {
    if depth > MAX_DEPTH {
        return;
    }
    let resolved = resolve(root, node);
    if let Some(via) = &resolved.via {
        if expanding.contains(via) {
            return;
        }
        expanding.push(via.clone());
    }
    let schema = &resolved.schema;
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        let required = schema.as_object().map(required_set).unwrap_or_default();
        for (name, sub) in properties {
            let field = format!("{path}{}", property_segment(name));
            let is_required = required.contains(name);
            reads
                .entry(field.clone())
                .and_modify(|r| *r |= is_required)
                .or_insert(is_required);
            walk(root, sub, &field, depth + 1, expanding, reads);
        }
    }
    if let Some(items) = schema.get("items").filter(|i| i.is_object()) {
        walk(
            root,
            items,
            &format!("{path}[]"),
            depth + 1,
            expanding,
            reads,
        );
    }
    if let Some(tuple) = schema.get("prefixItems").and_then(Value::as_array) {
        for (i, item) in tuple.iter().enumerate() {
            walk(
                root,
                item,
                &format!("{path}[{i}]"),
                depth + 1,
                expanding,
                reads,
            );
        }
    }
    if let Some(values) = schema.get("additionalProperties").filter(|v| v.is_object()) {
        walk(
            root,
            values,
            &format!("{path}.*"),
            depth + 1,
            expanding,
            reads,
        );
    }
    for keyword in ["oneOf", "anyOf"] {
        if let Some(variants) = schema.get(keyword).and_then(Value::as_array) {
            let labels = variant_labels(root, variants);
            for (variant, label) in variants.iter().zip(labels) {
                walk(
                    root,
                    variant,
                    &format!("{path}({label})"),
                    depth + 1,
                    expanding,
                    reads,
                );
            }
        }
    }
    if let Some(parts) = schema.get("allOf").and_then(Value::as_array) {
        for part in parts {
            walk(root, part, path, depth + 1, expanding, reads);
        }
    }
    if resolved.via.is_some() {
        expanding.pop();
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::field_reads;

    #[test]
    fn nested_arrays_maps_variants_and_recursion() {
        let schema = json!({
            "type": "object",
            "properties": {
                "order_id": {"type": "string"},
                "books": {"type": "array", "items": {"$ref": "#/$defs/Line"}},
                "stock": {"type": "object", "additionalProperties": {"type": "integer"}},
                "payment": {"oneOf": [
                    {"type": "object", "properties": {"kind": {"const": "card"},
                     "last4": {"type": "string"}}, "required": ["kind", "last4"]}
                ]},
                "tree": {"$ref": "#/$defs/Node"}
            },
            "required": ["order_id", "books"],
            "$defs": {
                "Line": {"type": "object", "properties": {"quantity": {"type": "integer"}},
                         "required": ["quantity"]},
                "Node": {"type": "object", "properties": {"children": {"type": "array",
                         "items": {"$ref": "#/$defs/Node"}}}}
            }
        });
        let reads = field_reads(&schema);
        let listed: Vec<(&str, bool)> = reads.iter().map(|(p, r)| (p.as_str(), *r)).collect();
        assert_eq!(
            listed,
            [
                ("$.books", true),
                ("$.books[].quantity", true),
                ("$.order_id", true),
                ("$.payment", false),
                ("$.payment(kind=card).kind", true),
                ("$.payment(kind=card).last4", true),
                ("$.stock", false),
                ("$.tree", false),
                ("$.tree.children", false),
            ]
        );
    }
}
