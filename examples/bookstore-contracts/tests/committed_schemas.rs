//! The committed schemas under `schemas/` are exactly what the code exports, and the
//! `bookstore-schemas` binary catches a breaking change against them.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use outbox_core::ContractRegistry;
use outbox_core::schema::{ExportOptions, render};
use serde_json::Value;

fn committed() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas")
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(next) = stack.pop() {
        for entry in fs::read_dir(&next).expect("readable folder") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else {
                found.push(path.strip_prefix(dir).expect("under dir").to_path_buf());
            }
        }
    }
    found.sort();
    found
}

#[test]
fn committed_schemas_match_a_fresh_export() {
    outbox_core::link_contracts!(bookstore_contracts);
    let registry = ContractRegistry::collect().unwrap();
    let rendered = render(&registry, &ExportOptions::default()).unwrap();
    let mut rendered_paths: Vec<PathBuf> = rendered.iter().map(|f| f.path.clone()).collect();
    rendered_paths.sort();
    assert_eq!(
        files_under(&committed()),
        rendered_paths,
        "the committed folder holds exactly the exported files; regenerate with \
         `cargo run -p bookstore-contracts --bin bookstore-schemas -- schemas export --out \
         examples/bookstore-contracts/schemas`"
    );
    for file in &rendered {
        let on_disk = fs::read(committed().join(&file.path)).unwrap();
        pretty_assertions::assert_eq!(
            String::from_utf8(on_disk).unwrap(),
            String::from_utf8(file.contents.clone()).unwrap(),
            "{} differs from a fresh export",
            file.path.display()
        );
    }
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
fn the_binary_lists_exports_and_checks() {
    let (code, listed) = schemas_tool(&["schemas", "list"]);
    assert_eq!(code, 0, "{listed}");
    assert!(
        listed.contains("bookstore.ordering.order-placed.v1"),
        "{listed}"
    );
    assert!(
        listed.contains("bookstore.ordering.order-cancelled.v1"),
        "{listed}"
    );

    let baseline = committed();
    let (code, report) =
        schemas_tool(&["schemas", "check", "--baseline", baseline.to_str().unwrap()]);
    assert_eq!(code, 0, "{report}");

    // Export twice into a fresh folder: byte-identical to the committed one.
    let dir = tempfile::tempdir().unwrap();
    for _ in 0..2 {
        let (code, out) =
            schemas_tool(&["schemas", "export", "--out", dir.path().to_str().unwrap()]);
        assert_eq!(code, 0, "{out}");
        for file in files_under(&baseline) {
            assert_eq!(
                fs::read(dir.path().join(&file)).unwrap(),
                fs::read(baseline.join(&file)).unwrap(),
                "{}",
                file.display()
            );
        }
    }
}

#[test]
fn removing_a_field_from_order_placed_fails_the_check_and_names_the_field() {
    // The baseline is what consumers were given; a baseline field the code no longer has is
    // exactly "a field removed from OrderPlacedV1".
    let dir = tempfile::tempdir().unwrap();
    for file in files_under(&committed()) {
        let target = dir.path().join(&file);
        fs::create_dir_all(target.parent().unwrap()).unwrap();
        fs::copy(committed().join(&file), target).unwrap();
    }
    let schema_path = dir
        .path()
        .join("schemas/bookstore.ordering.order-placed.v1.json");
    let mut schema: Value = serde_json::from_slice(&fs::read(&schema_path).unwrap()).unwrap();
    schema["properties"]["gift_message"] = serde_json::json!({"type": "string"});
    schema["required"]
        .as_array_mut()
        .unwrap()
        .push("gift_message".into());
    fs::write(&schema_path, serde_json::to_vec_pretty(&schema).unwrap()).unwrap();

    let (code, report) = schemas_tool(&[
        "schemas",
        "check",
        "--baseline",
        dir.path().to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{report}");
    assert!(report.contains("$.gift_message"), "{report}");
    assert!(
        report.contains("bookstore.ordering.order-placed.v1: breaking"),
        "{report}"
    );

    let (code, json) = schemas_tool(&[
        "schemas",
        "check",
        "--baseline",
        dir.path().to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(code, 1);
    let parsed: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(parsed["breaking"], true);
}
