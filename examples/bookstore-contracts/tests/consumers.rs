//! Ordering's gate with its consumers: Inventory handed in what it reads
//! (`examples/bookstore-inventory/expectations`, written by its `schemas expect`); a change
//! of Ordering's contracts that breaks Inventory fails the gate naming Inventory, one that
//! breaks nobody passes with a note.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use outbox_core::compat::{self, ContractSet};
use outbox_core::expectations;
use serde_json::Value;

fn committed() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas")
}

/// The consumers' expectations as Ordering receives them (in separate repositories, a copy
/// under `consumers/<name>/`).
fn consumers() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../bookstore-inventory/expectations")
}

fn schemas_tool(args: &[&str]) -> (i32, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_bookstore-schemas"))
        .args(args)
        .output()
        .expect("the binary runs");
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    (output.status.code().unwrap_or(-1), text)
}

#[test]
fn the_gate_passes_with_inventory_as_it_is() {
    let baseline = committed().display().to_string();
    let consumers = consumers().display().to_string();
    let (code, report) = schemas_tool(&[
        "schemas",
        "check",
        "--baseline",
        &baseline,
        "--consumers",
        &consumers,
    ]);
    assert_eq!(code, 0, "{report}");
    assert!(report.contains("consumer bookstore-inventory"), "{report}");
    assert!(
        report.contains("consumers: 1 checked, none breaks"),
        "{report}"
    );

    let (code, json) = schemas_tool(&[
        "schemas",
        "check",
        "--consumers",
        &consumers,
        "--format",
        "json",
    ]);
    assert_eq!(code, 0, "{json}");
    let json: Value = serde_json::from_str(&json).expect("JSON");
    assert_eq!(json["breaking"], false);
    assert_eq!(json["consumers"][0]["consumer"], "bookstore-inventory");
}

/// Ordering's next export: the committed one with `edit` applied to `OrderPlacedV1`'s schema.
fn next_export(edit: impl Fn(&mut Value)) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for file in ["index.json", "asyncapi.json"] {
        fs::copy(committed().join(file), dir.path().join(file)).expect("copy");
    }
    fs::create_dir_all(dir.path().join("schemas")).expect("folder");
    for name in ["order-placed", "order-cancelled"] {
        let file = format!("schemas/bookstore.ordering.{name}.v1.json");
        let mut schema: Value =
            serde_json::from_slice(&fs::read(committed().join(&file)).expect("read"))
                .expect("JSON");
        if name == "order-placed" {
            edit(&mut schema);
        }
        fs::write(
            dir.path().join(&file),
            serde_json::to_vec_pretty(&schema).expect("JSON"),
        )
        .expect("write");
    }
    dir
}

fn remove_field(object: &mut Value, field: &str) {
    object["properties"]
        .as_object_mut()
        .expect("properties")
        .remove(field);
    object["required"]
        .as_array_mut()
        .expect("required")
        .retain(|f| f != field);
}

/// The gate as `schemas check --baseline … --consumers …` runs it, on Ordering's next export.
fn gate(next: &Path) -> expectations::ConsumersReport {
    let baseline = ContractSet::load(&committed()).expect("baseline");
    let current = ContractSet::load(next).expect("next export");
    let sets = expectations::load_consumers(&consumers()).expect("expectations");
    expectations::with_consumers(compat::compare(&baseline, &current), &current, &sets)
}

#[test]
fn removing_a_field_inventory_reads_fails_the_gate_naming_inventory() {
    let next =
        next_export(|schema| remove_field(&mut schema["$defs"]["OrderedBookV1"], "quantity"));
    let report = gate(next.path());
    assert!(report.is_breaking(), "{report}");
    assert_eq!(report.breaking_consumers(), ["bookstore-inventory"]);
    let text = report.to_string();
    println!("{text}"); // the report the book shows (--nocapture)
    assert!(text.contains("$.books[].quantity"), "{text}");
    assert!(text.contains("read by bookstore-inventory"), "{text}");
    assert!(
        text.contains("consumers: 1 checked, 1 break: bookstore-inventory"),
        "{text}"
    );
}

/// Ordering had published an optional `gift_message` after Inventory generated its types,
/// and removes it again: a removed field fails the gate on its own, but Inventory's type does
/// not read it, so with the consumers' expectations it passes with a note.
#[test]
fn removing_a_field_inventory_does_not_read_breaks_nobody() {
    let published = next_export(|schema| {
        schema["properties"]["gift_message"] = serde_json::json!({"type": "string"});
    });
    let next = next_export(|_| {});
    let baseline = ContractSet::load(published.path()).expect("baseline");
    let current = ContractSet::load(next.path()).expect("next");
    let alone = compat::compare(&baseline, &current);
    assert!(
        alone.is_breaking(),
        "without consumers, a removed field fails the gate"
    );
    let sets = expectations::load_consumers(&consumers()).expect("expectations");
    let report = expectations::with_consumers(alone, &current, &sets);
    assert!(!report.is_breaking(), "{report}");
    let text = report.to_string();
    assert!(text.contains("$.gift_message"), "{text}");
    assert!(text.contains("no known consumer reads it"), "{text}");
}
