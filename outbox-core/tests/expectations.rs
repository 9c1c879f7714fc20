//! Consumer-driven contracts: a consumer's expectations written and loaded, checked against
//! a producer's contracts, and a producer's breaking changes weighed by who reads them.

use std::fs;
use std::path::Path;

use outbox_kernel::compat::{self, ChangeKind, ContractSet, Severity};
use outbox_kernel::consumed::{ConsumedContract, ConsumedContracts};
use outbox_kernel::expectations::{self, ExpectationSet, ExpectationsError};
use outbox_kernel::schema::{ExportOptions, export};
use outbox_kernel::{ContractRegistration, ContractRegistry};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

const EVENT: &str = "bookstore.ordering.order-placed.v1";

/// The producer's contract as published (the baseline).
mod before {
    use super::*;

    #[derive(Serialize, Deserialize, JsonSchema)]
    pub struct Line {
        pub book_id: String,
        pub quantity: u32,
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    pub struct OrderPlacedV1 {
        pub order_id: String,
        pub customer_id: String,
        pub books: Vec<Line>,
    }
}

/// The producer drops `customer_id` (no consumer reads it).
mod without_customer {
    use super::*;

    #[derive(Serialize, Deserialize, JsonSchema)]
    pub struct OrderPlacedV1 {
        pub order_id: String,
        pub books: Vec<super::before::Line>,
    }
}

/// The producer drops `books[].quantity` (Inventory reads it).
mod without_quantity {
    use super::*;

    #[derive(Serialize, Deserialize, JsonSchema)]
    pub struct Line {
        pub book_id: String,
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    pub struct OrderPlacedV1 {
        pub order_id: String,
        pub customer_id: String,
        pub books: Vec<Line>,
    }
}

/// Inventory's own, narrower copy: it reads the order and each line's book and quantity,
/// and a `note` it defaults when absent.
mod inventory {
    use super::*;

    #[derive(Serialize, Deserialize, JsonSchema)]
    pub struct Line {
        pub book_id: String,
        pub quantity: u32,
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    pub struct OrderPlacedV1 {
        pub order_id: String,
        pub books: Vec<Line>,
        #[serde(default)]
        pub note: Option<String>,
    }
}

/// A strict consumer: it denies unknown fields and takes quantities as `u8`.
mod strict {
    use super::*;

    #[derive(Serialize, Deserialize, JsonSchema)]
    pub struct Line {
        pub book_id: String,
        pub quantity: u8,
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct OrderPlacedV1 {
        pub order_id: String,
        pub books: Vec<Line>,
    }
}

macro_rules! registration {
    ($name:ident, $ty:ty) => {
        static $name: ContractRegistration = ContractRegistration {
            event_type: EVENT,
            name: "bookstore.ordering.order-placed",
            version: 1,
            aggregate_type: "order",
            key_field: "order_id",
            rust_type: "bookstore_contracts::OrderPlacedV1",
            description: "",
            schema: outbox_kernel::__private::schema_for::<$ty>,
        };
    };
}

registration!(BEFORE, before::OrderPlacedV1);
registration!(WITHOUT_CUSTOMER, without_customer::OrderPlacedV1);
registration!(WITHOUT_QUANTITY, without_quantity::OrderPlacedV1);

macro_rules! consumed {
    ($name:ident, $consumer:literal, $ty:ty) => {
        static $name: ConsumedContract = ConsumedContract {
            consumer: $consumer,
            handler: concat!("consumer::", $consumer),
            event_type: EVENT,
            aggregate_type: "order",
            key_field: "order_id",
            schema: outbox_kernel::__private::reading_schema_for::<$ty>,
        };
    };
}

consumed!(
    INVENTORY,
    "inventory.reserve-stock",
    inventory::OrderPlacedV1
);
consumed!(STRICT, "audit.record-order", strict::OrderPlacedV1);

fn registry(registration: &'static ContractRegistration) -> ContractRegistry {
    ContractRegistry::from_registrations([registration]).expect("one contract")
}

/// Writes `consumed` as consumer `name` under `dir/name`, and loads it back.
fn hand_in(dir: &Path, name: &str, consumed: &'static ConsumedContract) -> ExpectationSet {
    let (file, schemas) =
        expectations::collect(name, &ConsumedContracts::from_registrations([consumed]))
            .expect("collected");
    let folder = dir.join(name);
    expectations::write(&folder, &file, &schemas).expect("written");
    expectations::load(&folder).expect("loaded")
}

#[test]
fn the_fields_a_consumer_reads_come_from_its_type() {
    let dir = tempfile::tempdir().expect("tempdir");
    let set = hand_in(dir.path(), "bookstore-inventory", &INVENTORY);
    let entry = &set.expectations.contracts[0];
    assert_eq!(entry.event_type, EVENT);
    assert_eq!(entry.inbox_consumer, "inventory.reserve-stock");
    let reads: Vec<(&str, bool)> = entry
        .reads
        .iter()
        .map(|r| (r.path.as_str(), r.required))
        .collect();
    assert_eq!(
        reads,
        [
            ("$.books", true),
            ("$.books[].book_id", true),
            ("$.books[].quantity", true),
            ("$.note", false),
            ("$.order_id", true),
        ]
    );
    // Deterministic: writing again gives the same bytes.
    let first = fs::read(dir.path().join("bookstore-inventory/expectations.json")).expect("file");
    hand_in(dir.path(), "bookstore-inventory", &INVENTORY);
    let second = fs::read(dir.path().join("bookstore-inventory/expectations.json")).expect("file");
    assert_eq!(first, second);
}

#[test]
fn a_consumer_against_the_producer_it_was_written_for_passes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let inventory = hand_in(dir.path(), "bookstore-inventory", &INVENTORY);
    let current = ContractSet::from_registry(&registry(&BEFORE)).expect("rendered");
    let report = expectations::check_all(&current, &[inventory]);
    assert!(!report.is_breaking(), "{report}");
    let notes = &report.consumers[0].contracts[0].changes;
    assert!(
        notes
            .iter()
            .any(|c| c.kind == ChangeKind::FieldAddedOptional
                && c.path == "$.note"
                && c.severity == Severity::Compatible),
        "the optional field the producer does not send is a note: {notes:?}"
    );
}

#[test]
fn removing_a_field_no_consumer_reads_passes_with_a_note() {
    let dir = tempfile::tempdir().expect("tempdir");
    let baseline = dir.path().join("baseline");
    export(&registry(&BEFORE), &baseline, &ExportOptions::default()).expect("baseline");
    let inventory = hand_in(
        &dir.path().join("consumers"),
        "bookstore-inventory",
        &INVENTORY,
    );

    let after = registry(&WITHOUT_CUSTOMER);
    let alone = compat::check(&after, &baseline).expect("checked");
    assert!(
        alone.is_breaking(),
        "without consumers, a removed field is breaking"
    );

    let current = ContractSet::from_registry(&after).expect("rendered");
    let report = expectations::with_consumers(alone, &current, &[inventory]);
    assert!(!report.is_breaking(), "{report}");
    let text = report.to_string();
    assert!(
        text.contains("$.customer_id") && text.contains("no known consumer reads it"),
        "{text}"
    );
    assert!(text.contains("consumers: 1 checked, none breaks"), "{text}");
}

#[test]
fn removing_a_field_a_consumer_reads_fails_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let baseline = dir.path().join("baseline");
    export(&registry(&BEFORE), &baseline, &ExportOptions::default()).expect("baseline");
    let consumers = dir.path().join("consumers");
    hand_in(&consumers, "bookstore-inventory", &INVENTORY);
    let sets = expectations::load_consumers(&consumers).expect("loaded");

    let after = registry(&WITHOUT_QUANTITY);
    let alone = compat::check(&after, &baseline).expect("checked");
    let current = ContractSet::from_registry(&after).expect("rendered");
    let report = expectations::with_consumers(alone, &current, &sets);
    assert!(report.is_breaking());
    assert_eq!(report.breaking_consumers(), ["bookstore-inventory"]);
    let text = report.to_string();
    assert!(text.contains("read by bookstore-inventory"), "{text}");
    assert!(text.contains("consumer bookstore-inventory"), "{text}");
    let json: serde_json::Value = serde_json::from_str(&report.to_json()).expect("JSON");
    assert_eq!(json["breaking"], true);
    assert_eq!(json["breaking_consumers"][0], "bookstore-inventory");
    assert_eq!(
        json["consumers"][0]["contracts"][0]["changes"][0]["path"],
        "$.books[].quantity"
    );
}

#[test]
fn a_strict_consumer_breaks_on_what_a_lenient_one_accepts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let consumers = dir.path().join("consumers");
    hand_in(&consumers, "audit", &STRICT);
    hand_in(&consumers, "bookstore-inventory", &INVENTORY);
    let sets = expectations::load_consumers(&consumers).expect("loaded");
    let current = ContractSet::from_registry(&registry(&BEFORE)).expect("rendered");
    let report = expectations::check_all(&current, &sets);
    assert_eq!(report.breaking_consumers(), ["audit"], "{report}");
    let changes = &report.consumers[0].contracts[0].changes;
    // It denies unknown fields, and the producer sends `customer_id`.
    assert!(
        changes
            .iter()
            .any(|c| c.path == "$.customer_id" && c.severity == Severity::Breaking),
        "{changes:?}"
    );
    // It takes quantities as u8; the producer sends u32.
    assert!(
        changes
            .iter()
            .any(|c| c.path == "$.books[].quantity" && c.severity == Severity::Breaking),
        "{changes:?}"
    );
}

#[test]
fn an_expectation_for_a_contract_the_producer_no_longer_exports() {
    let dir = tempfile::tempdir().expect("tempdir");
    let inventory = hand_in(dir.path(), "bookstore-inventory", &INVENTORY);
    let current = ContractSet::default();
    let report = expectations::check_all(&current, &[inventory]);
    let change = &report.consumers[0].contracts[0].changes[0];
    assert_eq!(change.kind, ChangeKind::ContractRemoved);
    assert!(
        change.detail.contains("no longer exports"),
        "{}",
        change.detail
    );
    assert!(report.is_breaking());
}

#[test]
fn bad_expectation_folders_are_clear_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = expectations::load(dir.path()).expect_err("no file");
    assert!(
        matches!(missing, ExpectationsError::MissingFile { .. }),
        "{missing}"
    );

    let folder = dir.path().join("inventory");
    hand_in(dir.path(), "inventory", &INVENTORY);
    let file = folder.join("expectations.json");
    let text = fs::read_to_string(&file).expect("file");

    fs::write(
        &file,
        text.replace("\"format_version\": 1", "\"format_version\": 9"),
    )
    .expect("w");
    let newer = expectations::load(&folder).expect_err("newer");
    assert!(
        matches!(newer, ExpectationsError::NewerFormat { found: 9, .. }),
        "{newer}"
    );

    fs::write(
        &file,
        text.replace(
            "\"event_type\": \"bookstore.",
            "\"event_type\": \"Bookstore.",
        ),
    )
    .expect("w");
    let invalid = expectations::load(&folder).expect_err("invalid event type");
    assert!(
        matches!(&invalid, ExpectationsError::Invalid { pointer, .. }
            if pointer == "/contracts/0/event_type"),
        "{invalid}"
    );

    fs::write(&file, text.replace("\"reads\"", "\"read\"")).expect("w");
    let shape = expectations::load(&folder).expect_err("missing field");
    assert!(
        matches!(shape, ExpectationsError::Invalid { .. }),
        "{shape}"
    );

    // Two folders describing one consumer.
    fs::write(&file, &text).expect("w");
    let copy = dir.path().join("inventory-copy");
    hand_in(dir.path(), "inventory-copy", &INVENTORY);
    let copy_file = copy.join("expectations.json");
    let copied = fs::read_to_string(&copy_file).expect("file");
    fs::write(
        &copy_file,
        copied.replace("\"inventory-copy\"", "\"inventory\""),
    )
    .expect("w");
    let twice = expectations::load_consumers(dir.path()).expect_err("two folders, one name");
    assert!(
        twice.to_string().contains("one folder per consumer"),
        "{twice}"
    );
}

#[test]
fn no_handler_no_expectations() {
    let error = expectations::collect("inventory", &ConsumedContracts::from_registrations([]))
        .expect_err("nothing to expect");
    assert!(matches!(error, ExpectationsError::NoHandlers), "{error}");
}
