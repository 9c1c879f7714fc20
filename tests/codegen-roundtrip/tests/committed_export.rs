//! The committed export under `schemas/` is exactly what the producer types export (so the
//! generated consumer types are made from the types under test), and the consumer's copies
//! are not registered as contracts of this crate (`consumed`).

use std::fs;
use std::path::{Path, PathBuf};

use outbox_core::ContractRegistry;
use outbox_core::schema::{ExportOptions, render};

fn committed() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas")
}

#[test]
fn committed_export_matches_the_producer_types() {
    outbox_codegen_roundtrip::producer::__outbox_contracts_anchor();
    let registry = ContractRegistry::collect().expect("no duplicate event types");
    let rendered = render(&registry, &ExportOptions::default()).expect("rendered");
    let mut stale = Vec::new();
    for file in &rendered {
        let path = committed().join(&file.path);
        let on_disk = fs::read(&path).unwrap_or_default();
        if on_disk != file.contents {
            stale.push(file.path.display().to_string());
            if std::env::var_os("UPDATE_SCHEMAS").is_some() {
                fs::create_dir_all(path.parent().expect("a parent")).expect("folder");
                fs::write(&path, &file.contents).expect("written");
            }
        }
    }
    assert!(
        stale.is_empty(),
        "{stale:?} differ from a fresh export of src/producer.rs; rewrite them with \
         `UPDATE_SCHEMAS=1 cargo test -p outbox-codegen-roundtrip --test committed_export`"
    );
}

/// The generated types carry `consumed`: the registry holds the producer's contracts only,
/// although both sides' types are linked into this test.
#[test]
fn consumed_copies_are_not_registered() {
    outbox_codegen_roundtrip::producer::__outbox_contracts_anchor();
    let registry = ContractRegistry::collect().expect("no duplicate event types");
    let types: Vec<&str> = registry.contracts().iter().map(|c| c.rust_type).collect();
    assert_eq!(types.len(), 7, "{types:?}");
    assert!(
        types
            .iter()
            .all(|t| t.starts_with("outbox_codegen_roundtrip::producer::")),
        "{types:?}"
    );
}
