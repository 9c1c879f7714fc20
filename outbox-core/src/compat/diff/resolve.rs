//! A schema node as the comparison sees it: its local `$ref`s followed (the referencing
//! schema's other keywords laid over the target) and a nullable `anyOf`/`oneOf` unwrapped.

use serde_json::{Map, Value};

use super::keywords::ANNOTATIONS;

/// How many `$ref`s / nullable wrappers one node may go through.
pub(super) const MAX_HOPS: usize = 32;

/// A schema node after following `$ref`s and unwrapping a nullable `anyOf`/`oneOf`.
pub(super) struct Resolved {
    /// The effective schema: an object, or `false`.
    pub(super) schema: Value,
    /// The last `$ref` followed, if any (the node's identity for cycle detection).
    pub(super) via: Option<String>,
    /// Whether a `{"type": "null"}` variant was unwrapped.
    pub(super) nullable: bool,
    /// A `$ref` that could not be resolved.
    pub(super) unresolved: Option<String>,
}

fn lookup<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let pointer = reference.strip_prefix('#')?;
    if pointer.is_empty() {
        return Some(root);
    }
    root.pointer(pointer)
}

/// `true` → `{}`; objects unchanged; `false` stays `false`.
fn normalized(schema: &Value) -> Value {
    match schema {
        Value::Bool(true) => Value::Object(Map::new()),
        other => other.clone(),
    }
}

/// The target of a `$ref` with the referencing schema's other keywords laid over it.
fn merged(target: &Value, siblings: &Map<String, Value>, skip: &str) -> Value {
    match normalized(target) {
        Value::Object(mut map) => {
            for (key, value) in siblings {
                if key != skip && key != "$ref" {
                    map.insert(key.clone(), value.clone());
                }
            }
            Value::Object(map)
        }
        other => other,
    }
}

fn is_null_schema(schema: &Value) -> bool {
    let Some(map) = schema.as_object() else {
        return false;
    };
    let is_null = map.get("type") == Some(&Value::String("null".to_owned()))
        || map.get("const") == Some(&Value::Null);
    is_null
        && map
            .keys()
            .all(|k| k == "type" || k == "const" || ANNOTATIONS.contains(&k.as_str()))
}

pub(super) fn resolve(root: &Value, node: &Value) -> Resolved {
    let mut current = normalized(node);
    let mut via = None;
    let mut nullable = false;
    for _ in 0..MAX_HOPS {
        let Value::Object(map) = &current else {
            break;
        };
        if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
            let Some(target) = lookup(root, reference) else {
                return Resolved {
                    schema: current.clone(),
                    via,
                    nullable,
                    unresolved: Some(reference.to_owned()),
                };
            };
            via = Some(reference.to_owned());
            current = merged(target, map, "$ref");
            continue;
        }
        let wrapper = ["anyOf", "oneOf"].into_iter().find_map(|keyword| {
            let variants = map.get(keyword)?.as_array()?;
            variants
                .iter()
                .any(is_null_schema)
                .then_some((keyword, variants))
        });
        let Some((keyword, variants)) = wrapper else {
            break;
        };
        nullable = true;
        let rest: Vec<Value> = variants
            .iter()
            .filter(|v| !is_null_schema(v))
            .cloned()
            .collect();
        if let [single] = rest.as_slice() {
            current = merged(single, map, keyword);
        } else {
            let mut map = map.clone();
            map.insert(keyword.to_owned(), Value::Array(rest));
            current = Value::Object(map);
            break;
        }
    }
    Resolved {
        schema: current,
        via,
        nullable,
        unresolved: None,
    }
}
