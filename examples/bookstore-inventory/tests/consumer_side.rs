//! The consumer team's side of the contract: its checked-in types are what Ordering's export
//! generates, its checked-in expectations are what its handlers read, and its handlers
//! decode what Ordering's latest export describes.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn here() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Ordering's export, as Inventory receives it.
fn ordering_export() -> PathBuf {
    here().join("../bookstore-contracts/schemas")
}

fn schemas_tool(args: &[&str]) -> (i32, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_inventory-schemas"))
        .args(args)
        .output()
        .expect("runs");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn generated_types_are_up_to_date() {
    let config = outbox_codegen::CodegenConfig::builder()
        .kernel_path("outbox_core")
        .only(["bookstore.ordering.order-placed.v1"])
        .build();
    let code = outbox_codegen::generate(&ordering_export(), &config).expect("generated");
    let checked_in = fs::read_to_string(here().join("src/ordering.rs")).expect("checked in");
    pretty_assertions::assert_eq!(
        checked_in,
        code.source,
        "src/ordering.rs is not what Ordering's export generates: run `cargo run -p \
         outbox-codegen --bin outbox-schemas -- generate --from \
         examples/bookstore-contracts/schemas --out examples/bookstore-inventory/src/ordering.rs \
         --kernel-path outbox_core --only bookstore.ordering.order-placed.v1`"
    );
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
fn committed_expectations_are_what_the_handlers_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().display().to_string();
    let (code, stdout, stderr) = schemas_tool(&[
        "schemas",
        "expect",
        "--name",
        "bookstore-inventory",
        "--out",
        &out,
    ]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.contains("bookstore.ordering.order-placed.v1 by inventory.reserve-stock"),
        "{stdout}"
    );
    let committed = here().join("expectations");
    assert_eq!(files_under(&committed), files_under(dir.path()));
    for file in files_under(dir.path()) {
        pretty_assertions::assert_eq!(
            fs::read_to_string(committed.join(&file)).expect("committed"),
            fs::read_to_string(dir.path().join(&file)).expect("fresh"),
            "{} differs: run `cargo run -p bookstore-inventory --bin inventory-schemas -- \
             schemas expect --name bookstore-inventory --out examples/bookstore-inventory/expectations`",
            file.display()
        );
    }
}

/// The reverse check, on the consumer's side: its handlers against Ordering's latest export.
#[test]
fn the_handlers_decode_what_ordering_exports() {
    let producer = ordering_export().display().to_string();
    let (code, stdout, stderr) = schemas_tool(&["schemas", "check", "--producer", &producer]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("none breaks"), "{stdout}");
}
