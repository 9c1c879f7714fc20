//! The segments of a change's path (see the [module docs](crate::compat)): a property's
//! name, and the label of a `oneOf`/`anyOf` variant.

use serde_json::Value;

use super::resolve::resolve;

pub(super) fn property_segment(name: &str) -> String {
    let mut chars = name.chars();
    let identifier = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if identifier {
        format!(".{name}")
    } else {
        format!("[{}]", Value::String(name.to_owned()))
    }
}

/// The label of a `oneOf`/`anyOf` variant (see the module docs), unique within its list.
pub(super) fn variant_labels(root: &Value, variants: &[Value]) -> Vec<String> {
    let labels: Vec<String> = variants
        .iter()
        .enumerate()
        .map(|(index, raw)| variant_label(root, raw).unwrap_or_else(|| format!("#{index}")))
        .collect();
    labels
        .iter()
        .enumerate()
        .map(|(index, label)| {
            if labels.iter().filter(|l| *l == label).count() > 1 {
                format!("#{index}")
            } else {
                label.clone()
            }
        })
        .collect()
}

fn variant_label(root: &Value, raw: &Value) -> Option<String> {
    let resolved = resolve(root, raw);
    let map = resolved.schema.as_object()?;
    let plain = |value: &Value| match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    if let Some(value) = map.get("const") {
        return Some(plain(value));
    }
    if let Some(properties) = map.get("properties").and_then(Value::as_object) {
        let tags: Vec<String> = properties
            .iter()
            .filter_map(|(name, schema)| {
                let resolved = resolve(root, schema);
                let value = resolved.schema.get("const")?;
                Some(format!("{name}={}", plain(value)))
            })
            .collect();
        if !tags.is_empty() {
            return Some(tags.join(","));
        }
        let required: Vec<&str> = map
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if let [name] = required.as_slice()
            && properties.len() == 1
            && properties.contains_key(*name)
        {
            return Some((*name).to_owned());
        }
    }
    if let Some(reference) = raw.get("$ref").and_then(Value::as_str) {
        return reference.rsplit('/').next().map(str::to_owned);
    }
    map.get("title").and_then(Value::as_str).map(str::to_owned)
}
