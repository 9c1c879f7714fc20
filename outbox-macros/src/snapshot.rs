//! Expansion snapshots of the macros, for their unit tests.
//!
//! Each snapshot is the `prettyplease` rendering of a macro's output for one input,
//! committed under `outbox-macros/tests/snapshots/<name>.expanded.rs`. Run with
//! `UPDATE_SNAPSHOTS=1` to rewrite them after an intended change (and review the diff).

use std::path::PathBuf;

use proc_macro2::TokenStream;
use syn::DeriveInput;

fn snapshot_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("snapshots")
        .join(format!("{name}.expanded.rs"))
}

/// `tokens` as formatted Rust source.
pub(crate) fn render(tokens: TokenStream) -> String {
    let file: syn::File = syn::parse2(tokens.clone())
        .unwrap_or_else(|e| panic!("the expansion is not a valid file ({e}):\n{tokens}"));
    prettyplease::unparse(&file)
}

/// Compares the expansion of `input` by `derive` with the snapshot `name`, or rewrites the
/// snapshot when `UPDATE_SNAPSHOTS=1`.
pub(crate) fn assert_snapshot(
    name: &str,
    derive: fn(&DeriveInput) -> TokenStream,
    input: TokenStream,
) {
    let input: DeriveInput = syn::parse2(input).expect("test input is a derive input");
    assert_rendered(name, &render(derive(&input)));
}

/// Compares `actual` (a rendered expansion) with the snapshot `name`, or rewrites the
/// snapshot when `UPDATE_SNAPSHOTS=1`.
pub(crate) fn assert_rendered(name: &str, actual: &str) {
    let path = snapshot_path(name);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some_and(|v| v == "1") {
        std::fs::write(&path, actual)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read snapshot {} ({e}); run with UPDATE_SNAPSHOTS=1 to create it",
            path.display()
        )
    });
    pretty_assertions::assert_eq!(
        expected.as_str(),
        actual,
        "expansion of `{name}` differs from {} (UPDATE_SNAPSHOTS=1 rewrites it)",
        path.display()
    );
}
