//! A contract schema (JSON Schema 2020-12, as `schemas export` writes it) rewritten in the
//! draft-07 shape typify reads (schemars 0.8's model), with every keyword checked first.
//!
//! typify reads `definitions`, `items` as an array for tuples and `additionalItems`; the
//! export writes `$defs`, `prefixItems` and `items: false`. This pass renames them, keeps the
//! keywords both drafts share, drops annotations and our `x-…` contract keywords, and refuses
//! the rest with the JSON pointer of the keyword: a keyword typify would ignore silently
//! would give a type that accepts what the schema rejects, or the reverse. It also resolves
//! every `$ref` (typify panics on one that points at nothing).

use std::path::Path;

use serde_json::{Map, Value};

use crate::error::GenerateError;

/// Keywords whose value is one subschema.
const SUBSCHEMA: &[&str] = &[
    "additionalProperties",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
    "contains",
];
/// Keywords whose value is an array of subschemas.
const SUBSCHEMA_ARRAYS: &[&str] = &["allOf", "anyOf", "oneOf"];
/// Keywords whose value is an object of subschemas.
const SUBSCHEMA_MAPS: &[&str] = &["properties", "patternProperties"];
/// Validation keywords both drafts share, whose value is data, not a schema.
const SHARED: &[&str] = &[
    "type",
    "format",
    "enum",
    "const",
    "required",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "maxProperties",
    "minProperties",
    "$ref",
];
/// Annotations typify reads (doc comments, defaults).
const ANNOTATIONS: &[&str] = &[
    "title",
    "description",
    "default",
    "deprecated",
    "readOnly",
    "writeOnly",
    "examples",
];
/// Keywords dropped: identification and comments.
const DROPPED: &[&str] = &["$schema", "$id", "$comment", "$anchor", "contentEncoding"];

/// Rewrites `schema` (the contents of `path`) for typify.
///
/// # Errors
/// [`GenerateError::UnresolvedReference`] for a `$ref` that is not `#` or an existing
/// `#/$defs/<name>`, [`GenerateError::UnsupportedConstruct`] for a keyword typify cannot
/// express, [`GenerateError::Invalid`] for a keyword whose value has the wrong shape.
pub fn rewrite(schema: &Value, path: &Path) -> Result<Value, GenerateError> {
    let defs = schema.get("$defs").and_then(Value::as_object);
    let pass = Pass { path, defs };
    let Value::Object(root) = schema else {
        return Err(pass.invalid("", "a contract schema must be an object"));
    };
    let mut out = pass.node(root, "")?;
    if let Some(defs) = defs {
        let mut definitions = Map::new();
        for (name, def) in defs {
            let pointer = format!("/$defs/{}", escape(name));
            definitions.insert(name.clone(), pass.schema(def, &pointer)?);
        }
        out.insert("definitions".to_owned(), Value::Object(definitions));
    }
    Ok(Value::Object(out))
}

/// `~` and `/` escaped for a JSON pointer segment (RFC 6901).
fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

struct Pass<'a> {
    path: &'a Path,
    defs: Option<&'a Map<String, Value>>,
}

impl Pass<'_> {
    fn invalid(&self, pointer: &str, reason: &str) -> GenerateError {
        GenerateError::Invalid {
            path: self.path.to_owned(),
            pointer: pointer.to_owned(),
            reason: reason.to_owned(),
        }
    }

    fn unsupported(&self, pointer: &str, keyword: &str, reason: &str) -> GenerateError {
        GenerateError::UnsupportedConstruct {
            path: self.path.to_owned(),
            pointer: pointer.to_owned(),
            keyword: keyword.to_owned(),
            reason: reason.to_owned(),
        }
    }

    /// A subschema: a boolean schema or an object.
    fn schema(&self, value: &Value, pointer: &str) -> Result<Value, GenerateError> {
        match value {
            Value::Bool(_) => Ok(value.clone()),
            Value::Object(object) => Ok(Value::Object(self.node(object, pointer)?)),
            _ => Err(self.invalid(pointer, "a schema must be an object or a boolean")),
        }
    }

    fn node(
        &self,
        object: &Map<String, Value>,
        pointer: &str,
    ) -> Result<Map<String, Value>, GenerateError> {
        let mut out = Map::new();
        for (keyword, value) in object {
            let at = format!("{pointer}/{}", escape(keyword));
            let keyword = keyword.as_str();
            match keyword {
                "$defs" if pointer.is_empty() => {} // rewritten by `rewrite`
                "$defs" => {
                    return Err(self.unsupported(
                        &at,
                        keyword,
                        "definitions below the root cannot be referenced by the generator; \
                         the exporter writes them at the root only",
                    ));
                }
                "$ref" => {
                    self.check_ref(value, &at)?;
                    out.insert(keyword.to_owned(), rewrite_ref(value));
                }
                "prefixItems" => {
                    let Value::Array(items) = value else {
                        return Err(self.invalid(&at, "`prefixItems` must be an array"));
                    };
                    let items = items
                        .iter()
                        .enumerate()
                        .map(|(i, item)| self.schema(item, &format!("{at}/{i}")))
                        .collect::<Result<Vec<_>, _>>()?;
                    out.insert("items".to_owned(), Value::Array(items));
                    // 2020-12 `items` beside `prefixItems` governs the rest of the tuple.
                    if let Some(rest) = object.get("items") {
                        let rest = self.schema(rest, &format!("{pointer}/items"))?;
                        out.insert("additionalItems".to_owned(), rest);
                    }
                }
                "items" if object.contains_key("prefixItems") => {} // with prefixItems above
                "items" => {
                    if value.is_array() {
                        return Err(self.invalid(
                            &at,
                            "an array `items` is draft-07; a 2020-12 tuple uses `prefixItems`",
                        ));
                    }
                    out.insert(keyword.to_owned(), self.schema(value, &at)?);
                }
                _ if SUBSCHEMA.contains(&keyword) => {
                    out.insert(keyword.to_owned(), self.schema(value, &at)?);
                }
                _ if SUBSCHEMA_ARRAYS.contains(&keyword) => {
                    let Value::Array(variants) = value else {
                        return Err(self.invalid(&at, "an array of schemas is required"));
                    };
                    let variants = variants
                        .iter()
                        .enumerate()
                        .map(|(i, v)| self.schema(v, &format!("{at}/{i}")))
                        .collect::<Result<Vec<_>, _>>()?;
                    out.insert(keyword.to_owned(), Value::Array(variants));
                }
                _ if SUBSCHEMA_MAPS.contains(&keyword) => {
                    let Value::Object(members) = value else {
                        return Err(self.invalid(&at, "an object of schemas is required"));
                    };
                    let mut rewritten = Map::new();
                    for (name, member) in members {
                        let member_at = format!("{at}/{}", escape(name));
                        rewritten.insert(name.clone(), self.schema(member, &member_at)?);
                    }
                    out.insert(keyword.to_owned(), Value::Object(rewritten));
                }
                _ if SHARED.contains(&keyword) || ANNOTATIONS.contains(&keyword) => {
                    out.insert(keyword.to_owned(), value.clone());
                }
                _ if DROPPED.contains(&keyword) || keyword.starts_with("x-") => {}
                "unevaluatedProperties"
                | "unevaluatedItems"
                | "dependentRequired"
                | "dependentSchemas"
                | "dependencies"
                | "minContains"
                | "maxContains"
                | "$dynamicRef"
                | "$dynamicAnchor"
                | "$recursiveRef"
                | "contentSchema"
                | "contentMediaType" => {
                    return Err(self.unsupported(
                        &at,
                        keyword,
                        "no Rust type expresses it; change the contract or hand-write the \
                         consumer's type for this contract",
                    ));
                }
                _ => {
                    return Err(self.unsupported(
                        &at,
                        keyword,
                        "an unknown keyword: the generator would ignore it and the type could \
                         accept what the schema rejects",
                    ));
                }
            }
        }
        Ok(out)
    }

    fn check_ref(&self, value: &Value, pointer: &str) -> Result<(), GenerateError> {
        let unresolved = |reference: &str| GenerateError::UnresolvedReference {
            path: self.path.to_owned(),
            pointer: pointer.to_owned(),
            reference: reference.to_owned(),
        };
        let Some(reference) = value.as_str() else {
            return Err(self.invalid(pointer, "`$ref` must be a string"));
        };
        if reference == "#" {
            return Ok(());
        }
        let Some(name) = reference.strip_prefix("#/$defs/") else {
            return Err(unresolved(reference));
        };
        let name = name.replace("~1", "/").replace("~0", "~");
        if name.contains('/') || !self.defs.is_some_and(|defs| defs.contains_key(&name)) {
            return Err(unresolved(reference));
        }
        Ok(())
    }
}

/// `#/$defs/X` → `#/definitions/X` (the draft-07 spelling typify's model knows).
fn rewrite_ref(value: &Value) -> Value {
    match value.as_str().and_then(|r| r.strip_prefix("#/$defs/")) {
        Some(name) => Value::String(format!("#/definitions/{name}")),
        None => value.clone(),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::json;

    use super::rewrite;
    use crate::error::GenerateError;

    #[test]
    fn defs_and_tuples_take_the_draft_07_spelling() {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "x-event-type": "a.b.c.v1",
            "type": "object",
            "properties": {
                "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"$ref": "#/$defs/N"}],
                         "items": false, "minItems": 2, "maxItems": 2}
            },
            "$defs": {"N": {"type": "integer"}}
        });
        let out = rewrite(&schema, Path::new("f.json")).expect("rewritten");
        assert_eq!(
            out,
            json!({
                "type": "object",
                "properties": {
                    "pair": {"type": "array", "items": [{"type": "string"},
                             {"$ref": "#/definitions/N"}], "additionalItems": false,
                             "minItems": 2, "maxItems": 2}
                },
                "definitions": {"N": {"type": "integer"}}
            })
        );
    }

    #[test]
    fn a_missing_reference_names_the_file_and_the_pointer() {
        let schema = json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/Gone"}}});
        let error = rewrite(&schema, Path::new("x.json")).expect_err("unresolved");
        assert!(
            matches!(&error, GenerateError::UnresolvedReference { pointer, reference, .. }
                if pointer == "/properties/a/$ref" && reference == "#/$defs/Gone"),
            "{error}"
        );
        let remote = json!({"$ref": "https://example.com/s.json"});
        assert!(matches!(
            rewrite(&remote, Path::new("x.json")),
            Err(GenerateError::UnresolvedReference { .. })
        ));
    }

    #[test]
    fn a_keyword_without_a_rust_type_is_refused_where_it_is() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "object",
            "dependentRequired": {"x": ["y"]}}}});
        let error = rewrite(&schema, Path::new("x.json")).expect_err("unsupported");
        assert!(
            matches!(&error, GenerateError::UnsupportedConstruct { pointer, keyword, .. }
                if pointer == "/properties/a/dependentRequired" && keyword == "dependentRequired"),
            "{error}"
        );
        let unknown = json!({"type": "string", "frobnicate": true});
        assert!(matches!(
            rewrite(&unknown, Path::new("x.json")),
            Err(GenerateError::UnsupportedConstruct { keyword, .. }) if keyword == "frobnicate"
        ));
    }
}
