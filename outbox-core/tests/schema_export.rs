//! Schema export: determinism, layout, JSON Schema 2020-12 validity, AsyncAPI document.

// Helpers outside `#[test]` functions panic on unexpected errors, like the tests do.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use outbox_kernel::__private::schema_for;
use outbox_kernel::schema::{
    self, ExportOptions, ExportedFile, SchemaError, asyncapi_document, export, render,
};
use outbox_kernel::{ContractRegistration, ContractRegistry};
use pretty_assertions::assert_eq;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Value, json};
use uuid::Uuid;

/// An amount of money.
#[derive(Serialize, JsonSchema)]
struct MoneyV1 {
    /// Decimal amount in the major unit.
    amount: String,
    /// ISO 4217 code.
    currency: String,
}

/// One line of an order.
#[derive(Serialize, JsonSchema)]
struct OrderedBookV1 {
    book_id: String,
    quantity: u32,
    unit_price: MoneyV1,
}

/// Where an order stands.
#[derive(Serialize, JsonSchema)]
#[allow(dead_code)] // only its schema matters
#[serde(rename_all = "kebab-case")]
enum OrderStatusV1 {
    Placed,
    Paid,
}

/// An order was placed.
///
/// Published once per order.
#[derive(Serialize, JsonSchema)]
struct OrderPlacedV1 {
    order_id: Uuid,
    books: Vec<OrderedBookV1>,
    status: OrderStatusV1,
    note: Option<String>,
}

/// A book was added to the catalogue.
#[derive(Serialize, JsonSchema)]
struct BookAddedV1 {
    book_id: String,
    title: String,
    price: MoneyV1,
}

static ORDER_PLACED: ContractRegistration = ContractRegistration {
    event_type: "export-test.ordering.order-placed.v1",
    name: "export-test.ordering.order-placed",
    version: 1,
    aggregate_type: "order",
    key_field: "order_id",
    rust_type: "schema_export::OrderPlacedV1",
    description: "An order was placed.\n\nPublished once per order.",
    schema: schema_for::<OrderPlacedV1>,
};

static BOOK_ADDED: ContractRegistration = ContractRegistration {
    event_type: "export-test.catalog.book-added.v1",
    name: "export-test.catalog.book-added",
    version: 1,
    aggregate_type: "book",
    key_field: "book_id",
    rust_type: "schema_export::BookAddedV1",
    description: "A book was added to the catalogue.",
    schema: schema_for::<BookAddedV1>,
};

static BAD_NAME: ContractRegistration = ContractRegistration {
    event_type: "../escape.v1",
    name: "../escape",
    version: 1,
    aggregate_type: "x",
    key_field: "x",
    rust_type: "schema_export::Bad",
    description: "",
    schema: schema_for::<BookAddedV1>,
};

fn registry() -> ContractRegistry {
    ContractRegistry::from_registrations([&ORDER_PLACED, &BOOK_ADDED]).unwrap()
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&fs::read(path).unwrap()).unwrap()
}

fn files_in(dir: &Path) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for entry in walk(dir) {
        found.insert(
            entry
                .strip_prefix(dir)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/"),
        );
    }
    found
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

fn example_order() -> Value {
    serde_json::to_value(OrderPlacedV1 {
        order_id: Uuid::now_v7(),
        books: vec![OrderedBookV1 {
            book_id: "dune".into(),
            quantity: 2,
            unit_price: MoneyV1 {
                amount: "12.50".into(),
                currency: "EUR".into(),
            },
        }],
        status: OrderStatusV1::Paid,
        note: None,
    })
    .unwrap()
}

#[test]
fn layout_is_index_asyncapi_and_one_schema_per_contract() {
    let dir = tempfile::tempdir().unwrap();
    let report = export(&registry(), dir.path(), &ExportOptions::default()).unwrap();
    let expected: BTreeSet<String> = [
        "asyncapi.json",
        "index.json",
        "schemas/export-test.catalog.book-added.v1.json",
        "schemas/export-test.ordering.order-placed.v1.json",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    assert_eq!(files_in(dir.path()), expected);
    assert_eq!(report.written.len(), 4);
    assert!(report.unchanged.is_empty());
    assert!(report.removed.is_empty());
}

#[test]
fn export_twice_is_byte_identical() {
    let first = tempfile::tempdir().unwrap();
    let second = tempfile::tempdir().unwrap();
    let options = ExportOptions::default();
    export(&registry(), first.path(), &options).unwrap();
    export(&registry(), second.path(), &options).unwrap();
    // Again into the first folder: nothing to write.
    let again = export(&registry(), first.path(), &options).unwrap();
    assert!(again.written.is_empty(), "{again:?}");
    assert_eq!(again.unchanged.len(), 4);

    let names = files_in(first.path());
    assert_eq!(names, files_in(second.path()));
    for name in &names {
        let a = fs::read(first.path().join(name)).unwrap();
        let b = fs::read(second.path().join(name)).unwrap();
        assert!(a == b, "{name} differs between two exports");
    }
    // The in-memory rendering is exactly what is written.
    for file in render(&registry(), &options).unwrap() {
        assert_eq!(
            fs::read(first.path().join(&file.path)).unwrap(),
            file.contents
        );
    }
}

#[test]
fn files_are_canonical_pretty_json_with_sorted_keys_and_a_trailing_newline() {
    fn assert_sorted(value: &Value, at: &str) {
        match value {
            Value::Object(map) => {
                let keys: Vec<&String> = map.keys().collect();
                let mut sorted = keys.clone();
                sorted.sort();
                assert_eq!(keys, sorted, "keys not sorted at {at}");
                for (k, v) in map {
                    assert_sorted(v, &format!("{at}/{k}"));
                }
            }
            Value::Array(items) => items.iter().for_each(|v| assert_sorted(v, at)),
            _ => {}
        }
    }
    for ExportedFile { path, contents } in render(&registry(), &ExportOptions::default()).unwrap() {
        let text = String::from_utf8(contents).unwrap();
        assert!(
            text.ends_with("}\n"),
            "{} lacks a trailing newline",
            path.display()
        );
        assert!(!text.ends_with("\n\n"));
        assert!(
            text.contains("\n  \""),
            "{} is not pretty-printed",
            path.display()
        );
        // serde_json keeps the file's key order while parsing only with `preserve_order`;
        // check the text instead: re-rendering the parsed value must give the same bytes.
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_sorted(&value, &path.display().to_string());
        let again = schema::to_canonical_json(&value, "again").unwrap();
        assert_eq!(String::from_utf8(again).unwrap(), text);
    }
}

#[test]
fn every_schema_has_the_contract_keywords() {
    let dir = tempfile::tempdir().unwrap();
    export(&registry(), dir.path(), &ExportOptions::default()).unwrap();
    for registration in registry().contracts() {
        let schema = read_json(
            &dir.path()
                .join(schema::schema_file(registration.event_type)),
        );
        assert_eq!(
            schema["$schema"],
            "https://json-schema.org/draft/2020-12/schema"
        );
        assert_eq!(
            schema["$id"],
            format!("urn:outbox:contract:{}", registration.event_type)
        );
        assert_eq!(schema["x-event-type"], registration.event_type);
        assert_eq!(schema["x-schema-version"], json!(registration.version));
        assert_eq!(schema["x-aggregate-type"], registration.aggregate_type);
        assert_eq!(schema["x-key-field"], registration.key_field);
        assert_eq!(schema["description"], registration.description);
        assert_eq!(schema["type"], "object");
        assert!(schema["title"].is_string());
        assert!(
            schema["properties"][registration.key_field].is_object(),
            "the key field is a property"
        );
    }
    let order = read_json(
        &dir.path()
            .join("schemas/export-test.ordering.order-placed.v1.json"),
    );
    assert_eq!(order["title"], "OrderPlacedV1");
    // Nested types stay inside the file, and only the ones this contract uses.
    let defs: BTreeSet<&str> = order["$defs"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        defs,
        BTreeSet::from(["MoneyV1", "OrderStatusV1", "OrderedBookV1"])
    );
    let book = read_json(
        &dir.path()
            .join("schemas/export-test.catalog.book-added.v1.json"),
    );
    let defs: Vec<&String> = book["$defs"].as_object().unwrap().keys().collect();
    assert_eq!(defs, ["MoneyV1"]);
}

#[test]
fn every_schema_is_a_valid_draft_2020_12_schema_that_accepts_real_payloads() {
    for registration in registry().contracts() {
        let schema = schema::contract_schema(registration).unwrap();
        jsonschema::draft202012::meta::validate(&schema)
            .unwrap_or_else(|e| panic!("{} is not a 2020-12 schema: {e}", registration.event_type));
        jsonschema::draft202012::new(&schema).unwrap();
    }

    let schema = schema::contract_schema(&ORDER_PLACED).unwrap();
    let validator = jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(&schema)
        .unwrap();
    let order = example_order();
    let errors: Vec<String> = validator
        .iter_errors(&order)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:?}");

    let mut wrong = order.clone();
    wrong["books"][0]["unit_price"]
        .as_object_mut()
        .unwrap()
        .remove("currency");
    assert!(
        !validator.is_valid(&wrong),
        "a missing nested field is rejected"
    );
    let mut wrong = order.clone();
    wrong["status"] = json!("shipped");
    assert!(
        !validator.is_valid(&wrong),
        "an unknown enum value is rejected"
    );
    let mut wrong = order;
    wrong["order_id"] = json!("not-a-uuid");
    assert!(!validator.is_valid(&wrong), "the uuid format is checked");

    let book = serde_json::to_value(BookAddedV1 {
        book_id: "dune".into(),
        title: "Dune".into(),
        price: MoneyV1 {
            amount: "9.99".into(),
            currency: "EUR".into(),
        },
    })
    .unwrap();
    let schema = schema::contract_schema(&BOOK_ADDED).unwrap();
    assert!(jsonschema::draft202012::is_valid(&schema, &book));
}

#[test]
fn index_lists_every_contract() {
    let dir = tempfile::tempdir().unwrap();
    export(&registry(), dir.path(), &ExportOptions::default()).unwrap();
    let index = read_json(&dir.path().join("index.json"));
    assert_eq!(
        index,
        json!({
            "format_version": 1,
            "contracts": [
                {
                    "event_type": "export-test.catalog.book-added.v1",
                    "name": "export-test.catalog.book-added",
                    "version": 1,
                    "aggregate_type": "book",
                    "key_field": "book_id",
                    "rust_type": "schema_export::BookAddedV1",
                    "schema": "schemas/export-test.catalog.book-added.v1.json",
                    "description": "A book was added to the catalogue."
                },
                {
                    "event_type": "export-test.ordering.order-placed.v1",
                    "name": "export-test.ordering.order-placed",
                    "version": 1,
                    "aggregate_type": "order",
                    "key_field": "order_id",
                    "rust_type": "schema_export::OrderPlacedV1",
                    "schema": "schemas/export-test.ordering.order-placed.v1.json",
                    "description": "An order was placed.\n\nPublished once per order."
                }
            ]
        })
    );
}

#[test]
fn asyncapi_has_one_channel_message_and_send_operation_per_contract() {
    let dir = tempfile::tempdir().unwrap();
    let options = ExportOptions::default()
        .with_title("Bookstore events")
        .with_version("2.3.0")
        .with_description("What the bookstore tells other teams.");
    export(&registry(), dir.path(), &options).unwrap();
    let doc = read_json(&dir.path().join("asyncapi.json"));
    assert_eq!(doc["asyncapi"], "3.0.0");
    assert_eq!(doc["info"]["title"], "Bookstore events");
    assert_eq!(doc["info"]["version"], "2.3.0");
    assert_eq!(
        doc["info"]["description"],
        "What the bookstore tells other teams."
    );
    assert_eq!(doc["defaultContentType"], "application/json");

    let registry = registry();
    let event_types: BTreeSet<&str> = registry.contracts().iter().map(|c| c.event_type).collect();
    let keys = |v: &Value| -> BTreeSet<String> { v.as_object().unwrap().keys().cloned().collect() };
    let expected: BTreeSet<String> = event_types.iter().map(|s| s.to_string()).collect();
    assert_eq!(keys(&doc["channels"]), expected);
    assert_eq!(keys(&doc["components"]["messages"]), expected);
    assert_eq!(
        keys(&doc["operations"]),
        event_types.iter().map(|e| format!("send.{e}")).collect()
    );

    for registration in registry.contracts() {
        let id = registration.event_type;
        let channel = &doc["channels"][id];
        assert_eq!(channel["address"], id);
        let message_ref = channel["messages"][id]["$ref"].as_str().unwrap();
        assert_eq!(message_ref, format!("#/components/messages/{id}"));
        let message = resolve_pointer(&doc, message_ref);
        assert_eq!(message["name"], id);
        assert_eq!(message["contentType"], "application/json");
        assert_eq!(
            message["correlationId"]["location"],
            "$message.header#/ce-correlationid"
        );

        // The payload is a relative reference to a file that was written.
        let payload_ref = message["payload"]["$ref"].as_str().unwrap();
        assert_eq!(payload_ref, format!("schemas/{id}.json"));
        let payload = read_json(&dir.path().join(payload_ref));
        assert_eq!(payload["x-event-type"], id);

        // CloudEvents binary-mode headers.
        let headers = &message["headers"];
        jsonschema::draft202012::meta::validate(headers).unwrap();
        let properties = &headers["properties"];
        assert_eq!(properties["ce-type"]["const"], id);
        assert_eq!(properties["ce-specversion"]["const"], "1.0");
        assert_eq!(properties["content-type"]["const"], "application/json");
        assert_eq!(properties["ce-id"]["format"], "uuid");
        assert_eq!(properties["ce-time"]["format"], "date-time");
        assert_eq!(
            properties["ce-aggregatetype"]["const"],
            registration.aggregate_type
        );
        assert!(
            properties["ce-subject"]["description"]
                .as_str()
                .unwrap()
                .contains(registration.key_field),
            "ce-subject documents the key field"
        );
        for name in [
            "ce-source",
            "ce-correlationid",
            "ce-causationid",
            "traceparent",
            "tracestate",
            "ce-dataschema",
        ] {
            assert!(properties[name].is_object(), "header {name} is described");
        }
        let required: Vec<&str> = headers["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        for name in [
            "ce-id",
            "ce-type",
            "ce-source",
            "ce-specversion",
            "ce-subject",
        ] {
            assert!(required.contains(&name), "{name} is required");
        }
        assert!(!required.contains(&"ce-correlationid"));
        let headers_validator = jsonschema::draft202012::new(headers).unwrap();
        let good = json!({
            "ce-id": Uuid::now_v7().to_string(),
            "ce-type": id,
            "ce-source": properties["ce-source"]["const"],
            "ce-specversion": "1.0",
            "ce-time": "2026-01-02T03:04:05.123456789Z",
            "ce-subject": "42",
            "ce-dataschema": format!("urn:outbox:contract:{id}"),
            "ce-aggregatetype": registration.aggregate_type,
            "content-type": "application/json",
            "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "x-tenant": "acme"
        });
        let errors: Vec<String> = headers_validator
            .iter_errors(&good)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{errors:?}");

        let operation = &doc["operations"][format!("send.{id}")];
        assert_eq!(operation["action"], "send");
        assert_eq!(operation["channel"]["$ref"], format!("#/channels/{id}"));
        let op_message = operation["messages"][0]["$ref"].as_str().unwrap();
        assert_eq!(op_message, format!("#/channels/{id}/messages/{id}"));
        assert!(resolve_pointer(&doc, op_message).is_object());
    }
}

fn resolve_pointer<'a>(doc: &'a Value, reference: &str) -> &'a Value {
    let pointer = reference.strip_prefix('#').unwrap();
    doc.pointer(pointer)
        .unwrap_or_else(|| panic!("{reference} does not resolve"))
}

#[test]
fn asyncapi_document_has_defaults() {
    let doc = asyncapi_document(&registry(), &ExportOptions::default()).unwrap();
    assert_eq!(doc["info"]["title"], "Integration events");
    assert_eq!(doc["info"]["version"], "1.0.0");
    assert!(doc["info"].get("description").is_none());
}

#[test]
fn export_keeps_stale_schemas_unless_asked_to_prune_them() {
    let dir = tempfile::tempdir().unwrap();
    export(&registry(), dir.path(), &ExportOptions::default()).unwrap();
    let stale = dir
        .path()
        .join("schemas/export-test.catalog.book-added.v1.json");
    let notes = dir.path().join("schemas/README.md");
    fs::write(&notes, "kept").unwrap();
    let only_orders = ContractRegistry::from_registrations([&ORDER_PLACED]).unwrap();

    let kept = export(&only_orders, dir.path(), &ExportOptions::default()).unwrap();
    assert!(stale.exists());
    assert!(kept.removed.is_empty());

    let pruned = export(
        &only_orders,
        dir.path(),
        &ExportOptions::default().with_prune_stale_schemas(true),
    )
    .unwrap();
    assert!(!stale.exists());
    assert_eq!(
        pruned.removed,
        [Path::new("schemas/export-test.catalog.book-added.v1.json")]
    );
    assert!(notes.exists(), "only schemas/*.json files are pruned");
    let index = read_json(&dir.path().join("index.json"));
    assert_eq!(index["contracts"].as_array().unwrap().len(), 1);
}

#[test]
fn an_event_type_outside_the_grammar_is_rejected_before_it_becomes_a_path() {
    let registry = ContractRegistry::from_registrations([&BAD_NAME]).unwrap();
    let error = render(&registry, &ExportOptions::default()).unwrap_err();
    assert!(
        matches!(&error, SchemaError::InvalidEventType { event_type, .. } if event_type == "../escape.v1"),
        "{error:?}"
    );
    let dir = tempfile::tempdir().unwrap();
    assert!(export(&registry, dir.path(), &ExportOptions::default()).is_err());
    assert!(!dir.path().join("escape.v1.json").exists());
}

#[test]
fn export_into_an_unwritable_place_names_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("occupied");
    fs::write(&file, "not a folder").unwrap();
    let error = export(&registry(), &file, &ExportOptions::default()).unwrap_err();
    assert!(matches!(error, SchemaError::Io { .. }), "{error:?}");
    assert!(error.to_string().contains("occupied"), "{error}");
}
