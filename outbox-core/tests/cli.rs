//! The `schemas` command line: `run_from` (the real registry, the process's stdout) and
//! `run_with` (an injected registry and captured output).

// Helpers outside `#[test]` functions panic on unexpected errors, like the tests do.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::path::Path;
use std::process::ExitCode;

use outbox_kernel::__private::schema_for;
use outbox_kernel::cli::{self, EXIT_CHECK_FAILED, EXIT_ERROR, EXIT_OK, run_from, run_with};
use outbox_kernel::{ContractRegistration, ContractRegistry, RegistryError};
use serde_json::{Value, json};

mod before {
    use schemars::JsonSchema;
    use serde::Serialize;

    #[derive(Serialize, JsonSchema)]
    pub struct MoneyV1 {
        pub amount: String,
        pub currency: String,
    }

    /// A book was added to the catalogue.
    #[derive(Serialize, JsonSchema)]
    pub struct BookAddedV1 {
        pub book_id: String,
        pub price: MoneyV1,
    }

    #[derive(Serialize, JsonSchema)]
    #[serde(rename_all = "kebab-case")]
    #[allow(dead_code)] // only its schema matters
    pub enum Format {
        Paperback,
        Hardcover,
    }

    /// A book was reprinted.
    #[derive(Serialize, JsonSchema)]
    pub struct BookReprintedV1 {
        pub book_id: String,
        pub format: Format,
    }
}

mod after {
    use schemars::JsonSchema;
    use serde::Serialize;

    #[derive(Serialize, JsonSchema)]
    pub struct MoneyV1 {
        pub amount: String,
    }

    /// A book was added to the catalogue.
    #[derive(Serialize, JsonSchema)]
    pub struct BookAddedV1 {
        pub book_id: String,
        pub price: MoneyV1,
    }

    #[derive(Serialize, JsonSchema)]
    #[serde(rename_all = "kebab-case")]
    #[allow(dead_code)] // only its schema matters
    pub enum Format {
        Paperback,
        Hardcover,
        Ebook,
    }

    /// A book was reprinted.
    #[derive(Serialize, JsonSchema)]
    pub struct BookReprintedV1 {
        pub book_id: String,
        pub format: Format,
    }
}

const BOOK_ADDED: &str = "cli-test.catalog.book-added.v1";
const BOOK_REPRINTED: &str = "cli-test.catalog.book-reprinted.v1";

macro_rules! registration {
    ($event_type:expr, $name:expr, $ty:ty) => {
        ContractRegistration {
            event_type: $event_type,
            name: $name,
            version: 1,
            aggregate_type: "book",
            key_field: "book_id",
            rust_type: stringify!($ty),
            description: "",
            schema: schema_for::<$ty>,
        }
    };
}

static ADDED_BEFORE: ContractRegistration = registration!(
    BOOK_ADDED,
    "cli-test.catalog.book-added",
    before::BookAddedV1
);
static ADDED_AFTER: ContractRegistration = registration!(
    BOOK_ADDED,
    "cli-test.catalog.book-added",
    after::BookAddedV1
);
static REPRINTED_BEFORE: ContractRegistration = registration!(
    BOOK_REPRINTED,
    "cli-test.catalog.book-reprinted",
    before::BookReprintedV1
);
static REPRINTED_AFTER: ContractRegistration = registration!(
    BOOK_REPRINTED,
    "cli-test.catalog.book-reprinted",
    after::BookReprintedV1
);
static ADDED_TWIN: ContractRegistration = registration!(
    BOOK_ADDED,
    "cli-test.catalog.book-added",
    after::BookReprintedV1
);

// What `run_from` sees through `ContractRegistry::collect`.
outbox_kernel::__private::inventory::submit! {
    registration!(BOOK_ADDED, "cli-test.catalog.book-added", before::BookAddedV1)
}

/// Output of one `run_with` call.
struct Run {
    code: u8,
    out: String,
    err: String,
}

fn run(args: &[&str], registrations: &[&'static ContractRegistration]) -> Run {
    let mut out = Vec::new();
    let mut err = Vec::new();
    let registrations = registrations.to_vec();
    let code = run_with(
        std::iter::once("bookstore").chain(args.iter().copied()),
        move || ContractRegistry::from_registrations(registrations),
        &mut out,
        &mut err,
    );
    Run {
        code,
        out: String::from_utf8(out).unwrap(),
        err: String::from_utf8(err).unwrap(),
    }
}

fn path(dir: &Path) -> &str {
    dir.to_str().unwrap()
}

#[test]
fn run_from_exports_then_checks_against_itself_then_fails_on_a_changed_baseline() {
    let dir = tempfile::tempdir().unwrap();
    let out = path(dir.path());
    assert_eq!(
        run_from(["bookstore", "schemas", "export", "--out", out]),
        ExitCode::from(EXIT_OK)
    );
    let schema_path = dir.path().join(format!("schemas/{BOOK_ADDED}.json"));
    assert!(schema_path.is_file());
    assert_eq!(
        run_from(["bookstore", "schemas", "check", "--baseline", out]),
        ExitCode::from(EXIT_OK)
    );

    // The baseline promised a field the code no longer has.
    let mut schema: Value = serde_json::from_slice(&fs::read(&schema_path).unwrap()).unwrap();
    schema["properties"]["isbn"] = json!({ "type": "string" });
    schema["required"]
        .as_array_mut()
        .unwrap()
        .push(json!("isbn"));
    fs::write(&schema_path, serde_json::to_vec_pretty(&schema).unwrap()).unwrap();
    assert_eq!(
        run_from(["bookstore", "schemas", "check", "--baseline", out]),
        ExitCode::from(EXIT_CHECK_FAILED)
    );
}

#[test]
fn export_then_check_against_itself_passes() {
    let dir = tempfile::tempdir().unwrap();
    let export = run(
        &["schemas", "export", "--out", path(dir.path())],
        &[&ADDED_BEFORE, &REPRINTED_BEFORE],
    );
    assert_eq!(export.code, EXIT_OK, "{}", export.err);
    assert!(
        export.out.contains("exported 2 contract(s)"),
        "{}",
        export.out
    );
    assert!(dir.path().join("index.json").is_file());
    assert!(dir.path().join("asyncapi.json").is_file());

    let check = run(
        &["schemas", "check", "--baseline", path(dir.path())],
        &[&ADDED_BEFORE, &REPRINTED_BEFORE],
    );
    assert_eq!(check.code, EXIT_OK, "{}{}", check.out, check.err);
    assert!(check.out.contains("2 unchanged"), "{}", check.out);
    assert!(
        check.out.contains("result: no breaking changes"),
        "{}",
        check.out
    );
}

#[test]
fn check_after_a_breaking_change_exits_1_and_names_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let baseline = path(dir.path());
    run(&["schemas", "export", "--out", baseline], &[&ADDED_BEFORE]);

    let check = run(
        &["schemas", "check", "--baseline", baseline],
        &[&ADDED_AFTER],
    );
    assert_eq!(check.code, EXIT_CHECK_FAILED, "{}{}", check.out, check.err);
    assert!(check.out.contains(BOOK_ADDED), "{}", check.out);
    assert!(check.out.contains("$.price.currency"), "{}", check.out);
    assert!(check.out.contains("field_removed"), "{}", check.out);
}

#[test]
fn check_renders_json() {
    let dir = tempfile::tempdir().unwrap();
    let baseline = path(dir.path());
    run(&["schemas", "export", "--out", baseline], &[&ADDED_BEFORE]);

    let check = run(
        &[
            "schemas",
            "check",
            "--baseline",
            baseline,
            "--format",
            "json",
        ],
        &[&ADDED_AFTER, &REPRINTED_BEFORE],
    );
    assert_eq!(check.code, EXIT_CHECK_FAILED, "{}", check.err);
    let report: Value = serde_json::from_str(&check.out).unwrap();
    assert_eq!(report["breaking"], true);
    assert_eq!(report["summary"]["added"], 1);
    let contracts = report["contracts"].as_array().unwrap();
    let added = contracts
        .iter()
        .find(|c| c["event_type"] == BOOK_ADDED)
        .unwrap();
    assert_eq!(added["status"], "breaking");
    assert_eq!(added["changes"][0]["path"], "$.price.currency");
    assert_eq!(added["changes"][0]["kind"], "field_removed");
    let reprinted = contracts
        .iter()
        .find(|c| c["event_type"] == BOOK_REPRINTED)
        .unwrap();
    assert_eq!(reprinted["status"], "added");
}

#[test]
fn warnings_pass_unless_denied() {
    let dir = tempfile::tempdir().unwrap();
    let baseline = path(dir.path());
    run(
        &["schemas", "export", "--out", baseline],
        &[&REPRINTED_BEFORE],
    );

    let check = run(
        &["schemas", "check", "--baseline", baseline],
        &[&REPRINTED_AFTER],
    );
    assert_eq!(check.code, EXIT_OK, "{}", check.out);
    assert!(check.out.contains("`ebook` added"), "{}", check.out);
    assert!(check.out.contains("WARNING"), "{}", check.out);

    let strict = run(
        &[
            "schemas",
            "check",
            "--baseline",
            baseline,
            "--deny-warnings",
        ],
        &[&REPRINTED_AFTER],
    );
    assert_eq!(strict.code, EXIT_CHECK_FAILED, "{}", strict.out);
}

#[test]
fn export_removes_schemas_of_contracts_that_no_longer_exist() {
    let dir = tempfile::tempdir().unwrap();
    let out = path(dir.path());
    run(
        &["schemas", "export", "--out", out],
        &[&ADDED_BEFORE, &REPRINTED_BEFORE],
    );
    let stale = dir.path().join(format!("schemas/{BOOK_REPRINTED}.json"));
    assert!(stale.is_file());

    let export = run(&["schemas", "export", "--out", out], &[&ADDED_BEFORE]);
    assert_eq!(export.code, EXIT_OK);
    assert!(!stale.exists());
    assert!(export.out.contains("1 stale removed"), "{}", export.out);
    assert!(export.out.contains("1 unchanged"), "{}", export.out);

    // The removed contract is then reported by a check against the older baseline.
    let older = tempfile::tempdir().unwrap();
    run(
        &["schemas", "export", "--out", path(older.path())],
        &[&ADDED_BEFORE, &REPRINTED_BEFORE],
    );
    let check = run(
        &["schemas", "check", "--baseline", path(older.path())],
        &[&ADDED_BEFORE],
    );
    assert_eq!(check.code, EXIT_CHECK_FAILED);
    assert!(
        check.out.contains(&format!("{BOOK_REPRINTED}: removed")),
        "{}",
        check.out
    );
}

#[test]
fn list_in_both_formats() {
    let human = run(&["schemas", "list"], &[&ADDED_BEFORE, &REPRINTED_BEFORE]);
    assert_eq!(human.code, EXIT_OK);
    let lines: Vec<&str> = human.out.lines().collect();
    assert!(lines[0].starts_with("EVENT TYPE"), "{}", human.out);
    assert!(lines[1].starts_with(BOOK_ADDED), "{}", human.out);
    assert!(lines[1].contains("book_id"), "{}", human.out);
    assert!(lines[2].starts_with(BOOK_REPRINTED), "{}", human.out);
    assert_eq!(lines[3], "2 contract(s)");

    let json = run(
        &["schemas", "list", "--format", "json"],
        &[&ADDED_BEFORE, &REPRINTED_BEFORE],
    );
    assert_eq!(json.code, EXIT_OK);
    let index: Value = serde_json::from_str(&json.out).unwrap();
    let event_types: Vec<&str> = index["contracts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["event_type"].as_str().unwrap())
        .collect();
    assert_eq!(event_types, [BOOK_ADDED, BOOK_REPRINTED]);
}

#[test]
fn usage_errors_exit_2_and_help_exits_0() {
    for args in [
        &[][..],
        &["schemas"][..],
        &["schemas", "export"][..],
        &["schemas", "check", "--baseline", "x", "--format", "yaml"][..],
        &["schemas", "bogus"][..],
    ] {
        let run = run(args, &[&ADDED_BEFORE]);
        assert_eq!(run.code, EXIT_ERROR, "{args:?}: {}", run.out);
        assert!(!run.err.is_empty(), "{args:?} explains itself");
        assert!(run.out.is_empty());
    }
    let help = run(&["schemas", "--help"], &[]);
    assert_eq!(help.code, EXIT_OK);
    for word in ["list", "export", "check"] {
        assert!(help.out.contains(word), "{}", help.out);
    }
}

#[test]
fn a_broken_registry_exits_2_with_a_clear_message() {
    let run = run(&["schemas", "list"], &[&ADDED_BEFORE, &ADDED_TWIN]);
    assert_eq!(run.code, EXIT_ERROR);
    assert!(run.err.contains(BOOK_ADDED), "{}", run.err);
    assert!(run.err.contains("before::BookAddedV1"), "{}", run.err);
    assert!(run.err.contains("after::BookReprintedV1"), "{}", run.err);

    // The registry is collected only once the arguments parsed: help still works.
    let mut out = Vec::new();
    let code = run_with(
        ["bookstore", "--help"],
        || -> Result<ContractRegistry, RegistryError> { panic!("not needed for --help") },
        &mut out,
        &mut Vec::new(),
    );
    assert_eq!(code, EXIT_OK);
}

#[test]
fn a_missing_baseline_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let run = run(
        &["schemas", "check", "--baseline", path(dir.path())],
        &[&ADDED_BEFORE],
    );
    assert_eq!(run.code, EXIT_ERROR);
    assert!(run.err.contains("schemas export"), "{}", run.err);
}

#[test]
fn the_command_embeds_in_a_bigger_command_line() {
    use clap::{Parser, Subcommand};

    #[derive(Parser)]
    struct Ops {
        #[command(subcommand)]
        command: OpsCommand,
    }

    #[derive(Subcommand)]
    enum OpsCommand {
        Schemas(cli::SchemasCommand),
        Status,
    }

    let dir = tempfile::tempdir().unwrap();
    let ops = Ops::try_parse_from(["ops", "schemas", "export", "--out", path(dir.path())]).unwrap();
    let OpsCommand::Schemas(command) = ops.command else {
        panic!("parsed the wrong subcommand");
    };
    let registry = ContractRegistry::from_registrations([&ADDED_BEFORE]).unwrap();
    let mut out = Vec::new();
    let outcome = command.execute(&registry, &mut out).unwrap();
    assert_eq!(outcome, cli::Outcome::Success);
    assert_eq!(outcome.exit_code(), ExitCode::SUCCESS);
    assert!(dir.path().join("asyncapi.json").is_file());
}

#[test]
fn an_empty_registry_refuses_export_and_check_instead_of_emptying_the_folder() {
    let dir = tempfile::tempdir().unwrap();
    let baseline = dir.path().join("baseline");
    fs::create_dir_all(baseline.join("schemas")).unwrap();
    fs::write(baseline.join("schemas/keep.json"), "{}").unwrap();
    let empty = || ContractRegistry::from_registrations([]);
    for args in [
        vec![
            "tool",
            "schemas",
            "export",
            "--out",
            baseline.to_str().unwrap(),
        ],
        vec![
            "tool",
            "schemas",
            "check",
            "--baseline",
            baseline.to_str().unwrap(),
        ],
    ] {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        assert_eq!(
            run_with(args.clone(), empty, &mut out, &mut err),
            EXIT_ERROR
        );
        let err = String::from_utf8(err).unwrap();
        assert!(err.contains("link_contracts!"), "{args:?}: {err}");
    }
    assert!(
        baseline.join("schemas/keep.json").exists(),
        "nothing pruned"
    );

    let (mut out, mut err) = (Vec::new(), Vec::new());
    assert_eq!(
        run_with(["tool", "schemas", "list"], empty, &mut out, &mut err),
        EXIT_OK
    );
    assert!(String::from_utf8(out).unwrap().contains("link_contracts!"));
}

/// `schemas check` needs something to check against; `--producer` is the consumer's side
/// and goes alone.
#[test]
fn check_needs_a_baseline_consumers_or_a_producer() {
    let none = run(&["schemas", "check"], &[&ADDED_BEFORE]);
    assert_eq!(none.code, EXIT_ERROR, "{}", none.err);
    assert!(none.err.contains("--baseline"), "{}", none.err);
    let both = run(
        &["schemas", "check", "--producer", "a", "--consumers", "b"],
        &[&ADDED_BEFORE],
    );
    assert_eq!(both.code, EXIT_ERROR, "{}", both.err);
    assert!(both.err.contains("cannot be used with"), "{}", both.err);
}

/// A binary without inbox handlers has nothing to expect; a consumers folder that is not one
/// is named.
#[test]
fn expect_without_handlers_and_a_folder_without_expectations_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let expect = run(
        &[
            "schemas",
            "expect",
            "--name",
            "inventory",
            "--out",
            path(dir.path()),
        ],
        &[],
    );
    assert_eq!(expect.code, EXIT_ERROR, "{}", expect.err);
    assert!(expect.err.contains("no inbox handler"), "{}", expect.err);

    let empty = tempfile::tempdir().unwrap();
    let check = run(
        &["schemas", "check", "--consumers", path(empty.path())],
        &[&ADDED_BEFORE],
    );
    assert_eq!(check.code, EXIT_ERROR, "{}", check.err);
    assert!(
        check.err.contains("is not an expectations folder"),
        "{}",
        check.err
    );
}
