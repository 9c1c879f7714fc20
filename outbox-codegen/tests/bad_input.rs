//! Bad export folders: each a typed error naming the file and, inside a schema, the JSON
//! pointer; never a panic.

use std::fs;
use std::path::Path;

use outbox_codegen::{CodegenConfig, GenerateError, generate};
use serde_json::{Value, json};

const EVENT: &str = "shop.ordering.order-paid.v1";

fn schema(properties: Value) -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "OrderPaidV1",
        "type": "object",
        "x-event-type": EVENT,
        "properties": properties,
        "required": ["order_id"]
    })
}

fn write_export(dir: &Path, format_version: u64, schemas: &[(&str, Value)]) {
    fs::create_dir_all(dir.join("schemas")).expect("folder");
    let contracts: Vec<Value> = schemas
        .iter()
        .map(|(event_type, _)| {
            let name = event_type
                .rsplit_once('.')
                .map(|(n, _)| n)
                .unwrap_or_default();
            json!({"event_type": event_type, "name": name, "version": 1,
                   "aggregate_type": "order", "key_field": "order_id",
                   "rust_type": "shop::X", "schema": format!("schemas/{event_type}.json")})
        })
        .collect();
    let index = json!({"format_version": format_version, "contracts": contracts});
    fs::write(dir.join("index.json"), index.to_string()).expect("index");
    for (event_type, schema) in schemas {
        fs::write(
            dir.join(format!("schemas/{event_type}.json")),
            schema.to_string(),
        )
        .expect("schema");
    }
}

fn generated(dir: &Path) -> Result<outbox_codegen::GeneratedCode, GenerateError> {
    generate(dir, &CodegenConfig::builder().build())
}

#[test]
fn a_good_folder_generates() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_export(
        dir.path(),
        1,
        &[(EVENT, schema(json!({"order_id": {"type": "string"}})))],
    );
    let code = generated(dir.path()).expect("generated");
    assert!(
        code.source.contains("pub struct OrderPaidV1"),
        "{}",
        code.source
    );
}

#[test]
fn a_folder_from_a_newer_exporter() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_export(
        dir.path(),
        2,
        &[(EVENT, schema(json!({"order_id": {"type": "string"}})))],
    );
    let error = generated(dir.path()).expect_err("newer");
    assert!(
        matches!(
            &error,
            GenerateError::NewerFormat {
                found: 2,
                supported: 1,
                ..
            }
        ),
        "{error}"
    );
    assert!(error.to_string().contains("index.json"), "{error}");
}

#[test]
fn a_folder_that_is_not_an_export() {
    let dir = tempfile::tempdir().expect("tempdir");
    let error = generated(dir.path()).expect_err("no index");
    assert!(
        matches!(error, GenerateError::MissingIndex { .. }),
        "{error}"
    );
}

#[test]
fn a_missing_reference() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broken = schema(json!({"order_id": {"type": "string"},
                               "total": {"$ref": "#/$defs/MoneyV1"}}));
    write_export(dir.path(), 1, &[(EVENT, broken)]);
    let error = generated(dir.path()).expect_err("unresolved");
    let text = error.to_string();
    assert!(
        matches!(&error, GenerateError::UnresolvedReference { pointer, .. }
            if pointer == "/properties/total/$ref"),
        "{text}"
    );
    assert!(text.contains(&format!("schemas/{EVENT}.json")), "{text}");
}

#[test]
fn a_construct_the_generator_does_not_support() {
    let dir = tempfile::tempdir().expect("tempdir");
    let unsupported = schema(json!({"order_id": {"type": "string"},
        "items": {"type": "array", "items": {"type": "string"}, "minContains": 1}}));
    write_export(dir.path(), 1, &[(EVENT, unsupported)]);
    let error = generated(dir.path()).expect_err("unsupported");
    assert!(
        matches!(&error, GenerateError::UnsupportedConstruct { pointer, keyword, .. }
            if pointer == "/properties/items/minContains" && keyword == "minContains"),
        "{error}"
    );
}

#[test]
fn a_schema_file_that_is_missing_or_not_json() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_export(
        dir.path(),
        1,
        &[(EVENT, schema(json!({"order_id": {"type": "string"}})))],
    );
    fs::write(
        dir.path().join(format!("schemas/{EVENT}.json")),
        "{ not json",
    )
    .expect("write");
    let error = generated(dir.path()).expect_err("invalid");
    assert!(matches!(error, GenerateError::Invalid { .. }), "{error}");
    fs::remove_file(dir.path().join(format!("schemas/{EVENT}.json"))).expect("remove");
    let error = generated(dir.path()).expect_err("missing");
    assert!(
        matches!(&error, GenerateError::Invalid { pointer, .. } if pointer == "/contracts/0/schema"),
        "{error}"
    );
}

#[test]
fn a_schema_for_another_contract() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut other = schema(json!({"order_id": {"type": "string"}}));
    other["x-event-type"] = json!("shop.ordering.order-shipped.v1");
    write_export(dir.path(), 1, &[(EVENT, other)]);
    let error = generated(dir.path()).expect_err("mismatch");
    assert!(
        matches!(&error, GenerateError::Invalid { pointer, .. } if pointer == "/x-event-type"),
        "{error}"
    );
}

#[test]
fn a_contract_that_is_not_exported() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_export(
        dir.path(),
        1,
        &[(EVENT, schema(json!({"order_id": {"type": "string"}})))],
    );
    let config = CodegenConfig::builder()
        .only(["shop.ordering.order-lost.v1"])
        .build();
    let error = generate(dir.path(), &config).expect_err("unknown");
    assert!(
        matches!(&error, GenerateError::UnknownContract { event_type, available, .. }
            if event_type == "shop.ordering.order-lost.v1" && available == EVENT),
        "{error}"
    );
}

#[test]
fn two_contracts_with_one_type_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let second = "shop.billing.order-paid.v1";
    let mut other = schema(json!({"order_id": {"type": "string"}}));
    other["x-event-type"] = json!(second);
    write_export(
        dir.path(),
        1,
        &[
            (EVENT, schema(json!({"order_id": {"type": "string"}}))),
            (second, other),
        ],
    );
    let error = generated(dir.path()).expect_err("clash");
    assert!(
        matches!(&error, GenerateError::TypeNameClash { type_name, .. } if type_name == "OrderPaidV1"),
        "{error}"
    );
}

#[test]
fn a_schema_without_a_type_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut untitled = schema(json!({"order_id": {"type": "string"}}));
    untitled["title"] = json!("order paid");
    write_export(dir.path(), 1, &[(EVENT, untitled)]);
    let error = generated(dir.path()).expect_err("no title");
    assert!(
        matches!(&error, GenerateError::Invalid { pointer, .. } if pointer == "/title"),
        "{error}"
    );
}

#[test]
fn an_oversized_schema_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_export(
        dir.path(),
        1,
        &[(EVENT, schema(json!({"order_id": {"type": "string"}})))],
    );
    let big = format!("{{\"pad\": \"{}\"}}", "x".repeat(9 * 1024 * 1024));
    fs::write(dir.path().join(format!("schemas/{EVENT}.json")), big).expect("write");
    let error = generated(dir.path()).expect_err("too large");
    assert!(matches!(error, GenerateError::TooLarge { .. }), "{error}");
}
