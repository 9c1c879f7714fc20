//! The export as other languages' tools read it: the AsyncAPI document parses with AsyncAPI's
//! own parser (`@asyncapi/parser`, the one its generator and Modelina use) with every payload
//! `$ref` resolved, and the JSON Schemas generate TypeScript with json-schema-to-typescript.
//! Both run on Node.js from `tests/node` (pinned by its package-lock.json, installed by
//! `scripts/provision`).

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `node` and the installed tools, or `None` after the loud skip / panic of a missing tool.
fn node(test: &str) -> Option<PathBuf> {
    let node = outbox_tests::program(
        "Node.js",
        &["/usr/bin/node", "/usr/local/bin/node"],
        "it comes with this machine kind",
        test,
    )?;
    let tools = root().join("tests/node/node_modules/@asyncapi/parser");
    outbox_tests::program(
        "the Node.js tools of tests/node",
        &[tools.join("package.json").to_str().unwrap_or_default()],
        "`bash scripts/provision` runs `npm ci` in tests/node",
        test,
    )?;
    Some(node)
}

fn run(node: &Path, script: &str, args: &[PathBuf]) -> (bool, String) {
    let output = Command::new(node)
        .arg(root().join("tests/node").join(script))
        .args(args)
        .output()
        .expect("node runs");
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    (output.status.success(), text)
}

#[test]
fn the_asyncapi_documents_parse_with_asyncapis_parser() {
    let Some(node) = node("the_asyncapi_documents_parse_with_asyncapis_parser") else {
        return;
    };
    for (export, messages) in [
        ("examples/bookstore-contracts/schemas", 2),
        ("tests/codegen-roundtrip/schemas", 7),
    ] {
        let (ok, text) = run(
            &node,
            "validate-asyncapi.mjs",
            &[root().join(export).join("asyncapi.json")],
        );
        assert!(ok, "{export}: {text}");
        assert!(
            text.contains(&format!(
                "valid: {messages} channel(s), {messages} message(s)"
            )),
            "{export}: {text}"
        );
    }
    // The parser does catch a broken document: a payload `$ref` to a missing file.
    let dir = tempfile::tempdir().expect("tempdir");
    let document =
        std::fs::read_to_string(root().join("examples/bookstore-contracts/schemas/asyncapi.json"))
            .expect("document");
    std::fs::write(dir.path().join("asyncapi.json"), document).expect("copy");
    let (ok, text) = run(
        &node,
        "validate-asyncapi.mjs",
        &[dir.path().join("asyncapi.json")],
    );
    assert!(
        !ok,
        "the schema files are missing, the parser must say so: {text}"
    );
}

#[test]
fn the_schemas_generate_typescript() {
    let Some(node) = node("the_schemas_generate_typescript") else {
        return;
    };
    let schemas = root().join("examples/bookstore-contracts/schemas/schemas");
    let (ok, text) = run(
        &node,
        "generate-typescript.mjs",
        &[schemas.join("bookstore.ordering.order-placed.v1.json")],
    );
    assert!(ok, "{text}");
    for expected in [
        "export interface OrderPlacedV1 {",
        "books: [OrderedBookV1, ...OrderedBookV1[]];",
        "order_id: string;",
        "export interface MoneyV1 {",
        " * A customer placed an order: Inventory reserves stock for its books.",
    ] {
        assert!(text.contains(expected), "missing `{expected}` in:\n{text}");
    }
    let (ok, text) = run(
        &node,
        "generate-typescript.mjs",
        &[schemas.join("bookstore.ordering.order-cancelled.v1.json")],
    );
    assert!(ok, "{text}");
    assert!(
        text.contains("\"customer-request\" | \"payment-failed\" | \"out-of-stock\""),
        "{text}"
    );
}
