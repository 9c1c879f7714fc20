//! Breaking-change check: a table of schema pairs, contract-level rules and baselines on disk.

// Helpers outside `#[test]` functions panic on unexpected errors, like the tests do.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::sync::mpsc;
use std::time::Duration;

use outbox_kernel::__private::schema_for;
use outbox_kernel::compat::{
    self, ChangeKind, CompatError, ContractSet, ContractStatus, Severity, compare, compare_schemas,
};
use outbox_kernel::schema::{ExportOptions, export};
use outbox_kernel::{ContractRegistration, ContractRegistry};
use serde_json::{Value, json};

use ChangeKind as K;
use Severity::{Breaking, Compatible, Warning};

/// The schema of an object with these properties, all required.
fn object(properties: Value) -> Value {
    let required: Vec<&String> = properties.as_object().unwrap().keys().collect();
    json!({ "type": "object", "properties": properties, "required": required })
}

fn with_defs(mut schema: Value, defs: Value) -> Value {
    schema["$defs"] = defs;
    schema
}

struct Case {
    name: &'static str,
    old: Value,
    new: Value,
    /// Changes that must be reported (severity, kind, path).
    expect: Vec<(Severity, ChangeKind, &'static str)>,
    /// Whether the pair is breaking overall.
    breaking: bool,
}

fn case(
    name: &'static str,
    old: Value,
    new: Value,
    expect: Vec<(Severity, ChangeKind, &'static str)>,
) -> Case {
    let breaking = expect.iter().any(|(s, _, _)| *s == Breaking);
    Case {
        name,
        old,
        new,
        expect,
        breaking,
    }
}

fn money(currency: Value) -> Value {
    object(json!({ "amount": { "type": "string" }, "currency": currency }))
}

fn order_with_books(money_def: Value) -> Value {
    with_defs(
        object(json!({
            "order_id": { "type": "string", "format": "uuid" },
            "books": { "type": "array", "items": { "$ref": "#/$defs/OrderedBookV1" } }
        })),
        json!({
            "OrderedBookV1": object(json!({
                "book_id": { "type": "string" },
                "unit_price": { "$ref": "#/$defs/MoneyV1" }
            })),
            "MoneyV1": money_def
        }),
    )
}

fn payment(card_last4: Value, with_cash: bool, with_voucher: bool) -> Value {
    let mut variants = vec![json!({
        "type": "object",
        "properties": {
            "kind": { "type": "string", "const": "card" },
            "last4": card_last4
        },
        "required": ["kind", "last4"]
    })];
    if with_cash {
        variants.push(json!({
            "type": "object",
            "properties": { "kind": { "type": "string", "const": "cash" } },
            "required": ["kind"]
        }));
    }
    if with_voucher {
        variants.push(json!({
            "type": "object",
            "properties": {
                "kind": { "type": "string", "const": "voucher" },
                "code": { "type": "string" }
            },
            "required": ["kind", "code"]
        }));
    }
    with_defs(
        object(json!({ "payment": { "$ref": "#/$defs/PaymentV1" } })),
        json!({ "PaymentV1": { "oneOf": variants } }),
    )
}

fn cases() -> Vec<Case> {
    let s = |v: Value| object(json!({ "f": v }));
    vec![
        // ---- breaking ----
        case(
            "field removed",
            object(json!({ "id": { "type": "string" }, "price": { "type": "number" } })),
            object(json!({ "id": { "type": "string" } })),
            vec![(Breaking, K::FieldRemoved, "$.price")],
        ),
        case(
            "optional field removed",
            json!({ "type": "object", "properties": { "id": { "type": "string" }, "note": { "type": "string" } }, "required": ["id"] }),
            object(json!({ "id": { "type": "string" } })),
            vec![(Breaking, K::FieldRemoved, "$.note")],
        ),
        case(
            "field added as required",
            object(json!({ "id": { "type": "string" } })),
            object(json!({ "id": { "type": "string" }, "currency": { "type": "string" } })),
            vec![(Breaking, K::FieldAddedRequired, "$.currency")],
        ),
        case(
            "optional field became required",
            json!({ "type": "object", "properties": { "id": { "type": "string" }, "note": { "type": "string" } }, "required": ["id"] }),
            object(json!({ "id": { "type": "string" }, "note": { "type": "string" } })),
            vec![(Breaking, K::FieldBecameRequired, "$.note")],
        ),
        case(
            "number narrowed to integer",
            s(json!({ "type": "number" })),
            s(json!({ "type": "integer" })),
            vec![(Breaking, K::TypeNarrowed, "$.f")],
        ),
        case(
            "type set reduced",
            s(json!({ "type": ["string", "integer"] })),
            s(json!({ "type": "string" })),
            vec![(Breaking, K::TypeNarrowed, "$.f")],
        ),
        case(
            "null removed from a nullable",
            s(json!({ "type": ["string", "null"] })),
            s(json!({ "type": "string" })),
            vec![(Breaking, K::NullRemoved, "$.f")],
        ),
        case(
            "null removed from a nullable reference",
            with_defs(
                s(json!({ "anyOf": [{ "$ref": "#/$defs/M" }, { "type": "null" }] })),
                json!({ "M": money(json!({ "type": "string" })) }),
            ),
            with_defs(
                s(json!({ "$ref": "#/$defs/M" })),
                json!({ "M": money(json!({ "type": "string" })) }),
            ),
            vec![(Breaking, K::NullRemoved, "$.f")],
        ),
        case(
            "type changed",
            s(json!({ "type": "string" })),
            s(json!({ "type": "object" })),
            vec![(Breaking, K::TypeChanged, "$.f")],
        ),
        case(
            "string format added",
            s(json!({ "type": "string" })),
            s(json!({ "type": "string", "format": "uuid" })),
            vec![(Breaking, K::FormatAdded, "$.f")],
        ),
        case(
            "string format changed",
            s(json!({ "type": "string", "format": "date" })),
            s(json!({ "type": "string", "format": "date-time" })),
            vec![(Breaking, K::FormatChanged, "$.f")],
        ),
        case(
            "maxLength lowered",
            s(json!({ "type": "string", "maxLength": 10 })),
            s(json!({ "type": "string", "maxLength": 5 })),
            vec![(Breaking, K::ConstraintTightened, "$.f")],
        ),
        case(
            "maximum added",
            s(json!({ "type": "integer" })),
            s(json!({ "type": "integer", "maximum": 100 })),
            vec![(Breaking, K::ConstraintTightened, "$.f")],
        ),
        case(
            "minLength raised",
            s(json!({ "type": "string", "minLength": 1 })),
            s(json!({ "type": "string", "minLength": 3 })),
            vec![(Breaking, K::ConstraintTightened, "$.f")],
        ),
        case(
            "minimum raised",
            s(json!({ "type": "integer", "minimum": 0 })),
            s(json!({ "type": "integer", "minimum": 1 })),
            vec![(Breaking, K::ConstraintTightened, "$.f")],
        ),
        case(
            "pattern added",
            s(json!({ "type": "string" })),
            s(json!({ "type": "string", "pattern": "^[A-Z]{3}$" })),
            vec![(Breaking, K::ConstraintTightened, "$.f")],
        ),
        case(
            "const added",
            s(json!({ "type": "string" })),
            s(json!({ "type": "string", "const": "EUR" })),
            vec![(Breaking, K::ConstAdded, "$.f")],
        ),
        case(
            "const changed",
            s(json!({ "type": "string", "const": "EUR" })),
            s(json!({ "type": "string", "const": "USD" })),
            vec![(Breaking, K::ConstChanged, "$.f")],
        ),
        case(
            "enum value removed",
            s(json!({ "type": "string", "enum": ["placed", "paid", "shipped"] })),
            s(json!({ "type": "string", "enum": ["placed", "paid"] })),
            vec![(Breaking, K::EnumValueRemoved, "$.f")],
        ),
        case(
            "documented enum variant removed (oneOf of constants)",
            s(json!({ "oneOf": [
                { "type": "string", "const": "placed", "description": "a" },
                { "type": "string", "const": "paid", "description": "b" }
            ] })),
            s(json!({ "oneOf": [
                { "type": "string", "const": "placed", "description": "a" }
            ] })),
            vec![(Breaking, K::EnumValueRemoved, "$.f")],
        ),
        case(
            "tagged variant removed",
            payment(json!({ "type": "string" }), true, false),
            payment(json!({ "type": "string" }), false, false),
            vec![(Breaking, K::VariantRemoved, "$.payment(kind=cash)")],
        ),
        case(
            "field inside a tagged variant narrowed",
            payment(json!({ "type": "string" }), true, false),
            payment(json!({ "type": "string", "maxLength": 4 }), true, false),
            vec![(
                Breaking,
                K::ConstraintTightened,
                "$.payment(kind=card).last4",
            )],
        ),
        case(
            "nested definition changed",
            order_with_books(money(json!({ "type": "string" }))),
            order_with_books(object(json!({ "amount": { "type": "string" } }))),
            vec![(Breaking, K::FieldRemoved, "$.books[].unit_price.currency")],
        ),
        case(
            "nested definition field narrowed",
            order_with_books(money(json!({ "type": "string" }))),
            order_with_books(money(json!({ "type": "string", "pattern": "^[A-Z]{3}$" }))),
            vec![(
                Breaking,
                K::ConstraintTightened,
                "$.books[].unit_price.currency",
            )],
        ),
        case(
            "additionalProperties absent to false",
            object(json!({ "id": { "type": "string" } })),
            {
                let mut v = object(json!({ "id": { "type": "string" } }));
                v["additionalProperties"] = json!(false);
                v
            },
            vec![(Breaking, K::AdditionalPropertiesTightened, "$")],
        ),
        case(
            "additionalProperties true to a schema",
            s(json!({ "type": "object", "additionalProperties": true })),
            s(json!({ "type": "object", "additionalProperties": { "type": "integer" } })),
            vec![(Breaking, K::AdditionalPropertiesTightened, "$.f")],
        ),
        case(
            "map value narrowed",
            object(
                json!({ "stock": { "type": "object", "additionalProperties": { "type": "number" } } }),
            ),
            object(
                json!({ "stock": { "type": "object", "additionalProperties": { "type": "integer" } } }),
            ),
            vec![(Breaking, K::TypeNarrowed, "$.stock.*")],
        ),
        case(
            "tuple element changed",
            s(
                json!({ "type": "array", "prefixItems": [{ "type": "integer" }, { "type": "string" }] }),
            ),
            s(
                json!({ "type": "array", "prefixItems": [{ "type": "integer" }, { "type": "boolean" }] }),
            ),
            vec![(Breaking, K::TypeChanged, "$.f[1]")],
        ),
        case(
            "array items narrowed",
            s(json!({ "type": "array", "items": { "type": ["string", "null"] } })),
            s(json!({ "type": "array", "items": { "type": "string" } })),
            vec![(Breaking, K::NullRemoved, "$.f[]")],
        ),
        case(
            "odd property names are bracketed",
            object(json!({ "unit-price": { "type": "number" } })),
            object(json!({ "unit-price": { "type": "integer" } })),
            vec![(Breaking, K::TypeNarrowed, "$[\"unit-price\"]")],
        ),
        case(
            "uninterpreted keyword changed",
            s(json!({ "type": "string", "not": { "const": "a" } })),
            s(json!({ "type": "string", "not": { "const": "b" } })),
            vec![(Breaking, K::KeywordChanged, "$.f")],
        ),
        // ---- not breaking ----
        case(
            "identical",
            order_with_books(money(json!({ "type": "string" }))),
            order_with_books(money(json!({ "type": "string" }))),
            vec![],
        ),
        case(
            "optional field added",
            object(json!({ "id": { "type": "string" } })),
            json!({ "type": "object", "properties": { "id": { "type": "string" }, "note": { "type": "string" } }, "required": ["id"] }),
            vec![(Compatible, K::FieldAddedOptional, "$.note")],
        ),
        case(
            "optional field added to a closed object",
            json!({ "type": "object", "properties": { "id": { "type": "string" } }, "required": ["id"], "additionalProperties": false }),
            json!({ "type": "object", "properties": { "id": { "type": "string" }, "note": { "type": "string" } }, "required": ["id"], "additionalProperties": false }),
            vec![(Warning, K::FieldAddedOptional, "$.note")],
        ),
        case(
            "description changed",
            json!({ "type": "object", "description": "old words" }),
            json!({ "type": "object", "description": "new words" }),
            vec![(Compatible, K::AnnotationChanged, "$")],
        ),
        case(
            "enum value added is a warning",
            s(json!({ "type": "string", "enum": ["placed", "paid"] })),
            s(json!({ "type": "string", "enum": ["placed", "paid", "shipped"] })),
            vec![(Warning, K::EnumValueAdded, "$.f")],
        ),
        case(
            "tagged variant added is a warning",
            payment(json!({ "type": "string" }), true, false),
            payment(json!({ "type": "string" }), true, true),
            vec![(Warning, K::VariantAdded, "$.payment(kind=voucher)")],
        ),
        case(
            "integer widened to number is a warning",
            s(json!({ "type": "integer" })),
            s(json!({ "type": "number" })),
            vec![(Warning, K::TypeWidened, "$.f")],
        ),
        case(
            "became nullable is a warning",
            s(json!({ "type": "string" })),
            s(json!({ "type": ["string", "null"] })),
            vec![(Warning, K::NullAdded, "$.f")],
        ),
        case(
            "maxLength raised is a warning",
            s(json!({ "type": "string", "maxLength": 5 })),
            s(json!({ "type": "string", "maxLength": 10 })),
            vec![(Warning, K::ConstraintRelaxed, "$.f")],
        ),
        case(
            "required field made optional is a warning",
            object(json!({ "id": { "type": "string" }, "note": { "type": "string" } })),
            json!({ "type": "object", "properties": { "id": { "type": "string" }, "note": { "type": "string" } }, "required": ["id"] }),
            vec![(Warning, K::FieldBecameOptional, "$.note")],
        ),
        case(
            "enum and documented oneOf of the same constants are equal",
            s(json!({ "type": "string", "enum": ["placed", "paid"] })),
            s(json!({ "oneOf": [
                { "type": "string", "const": "placed", "description": "a" },
                { "type": "string", "const": "paid", "description": "b" }
            ] })),
            vec![],
        ),
        case(
            "nullable as a type set or as anyOf with null are equal",
            s(json!({ "type": ["string", "null"] })),
            s(json!({ "anyOf": [{ "type": "string" }, { "type": "null" }] })),
            vec![],
        ),
        case(
            "inlined definition equals its reference",
            with_defs(
                s(json!({ "$ref": "#/$defs/M" })),
                json!({ "M": money(json!({ "type": "string" })) }),
            ),
            s(money(json!({ "type": "string" }))),
            vec![],
        ),
        case(
            "renamed definition with the same shape",
            with_defs(
                s(json!({ "$ref": "#/$defs/MoneyV1" })),
                json!({ "MoneyV1": money(json!({ "type": "string" })) }),
            ),
            with_defs(
                s(json!({ "$ref": "#/$defs/Money" })),
                json!({ "Money": money(json!({ "type": "string" })) }),
            ),
            vec![],
        ),
    ]
}

#[test]
fn table_of_schema_changes() {
    let mut failures = Vec::new();
    for case in cases() {
        let changes = compare_schemas(&case.old, &case.new);
        for (severity, kind, path) in &case.expect {
            let found = changes
                .iter()
                .any(|c| c.severity == *severity && c.kind == *kind && c.path == *path);
            if !found {
                failures.push(format!(
                    "{}: expected {severity} {kind} at {path}, got {changes:#?}",
                    case.name
                ));
            }
        }
        let breaking = changes.iter().any(|c| c.severity == Breaking);
        if breaking != case.breaking {
            failures.push(format!(
                "{}: breaking = {breaking}, expected {}: {changes:#?}",
                case.name, case.breaking
            ));
        }
        if case.expect.is_empty() && !changes.is_empty() {
            failures.push(format!(
                "{}: expected no change, got {changes:#?}",
                case.name
            ));
        }
        // Comparing a schema with itself never reports anything.
        let same = compare_schemas(&case.new, &case.new);
        if !same.is_empty() {
            failures.push(format!("{}: self-comparison reported {same:#?}", case.name));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn a_nested_change_is_reported_with_a_detail_that_says_what_happened() {
    let changes = compare_schemas(
        &order_with_books(money(json!({ "type": "string" }))),
        &order_with_books(object(json!({ "amount": { "type": "string" } }))),
    );
    assert_eq!(changes.len(), 1, "{changes:#?}");
    assert_eq!(changes[0].path, "$.books[].unit_price.currency");
    assert!(
        changes[0].detail.contains("`currency` removed"),
        "{}",
        changes[0].detail
    );
}

/// Runs `f` on another thread and fails if it takes more than a few seconds.
fn within_seconds<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(10))
        .expect("the comparison did not finish: a $ref cycle is not guarded")
}

#[test]
fn reference_cycles_do_not_hang() {
    let category = |child_name: Value| {
        with_defs(
            object(json!({ "root": { "$ref": "#/$defs/Category" } })),
            json!({
                "Category": object(json!({
                    "name": child_name,
                    "children": { "type": "array", "items": { "$ref": "#/$defs/Category" } },
                    "parent": { "anyOf": [{ "$ref": "#/$defs/Category" }, { "type": "null" }] },
                    "tag": { "$ref": "#/$defs/Tag" }
                })),
                // Mutual recursion.
                "Tag": object(json!({ "category": { "$ref": "#/$defs/Category" } }))
            }),
        )
    };
    let old = category(json!({ "type": "string" }));
    let new = category(json!({ "type": "integer" }));
    let changes = within_seconds(move || compare_schemas(&old, &new));
    assert_eq!(changes.len(), 1, "{changes:#?}");
    assert_eq!(changes[0].kind, K::TypeChanged);
    assert_eq!(changes[0].path, "$.root.name");

    // A reference to itself, and references that chase each other.
    let degenerate = json!({
        "$ref": "#/$defs/A",
        "$defs": { "A": { "$ref": "#/$defs/B" }, "B": { "$ref": "#/$defs/A" } }
    });
    let copy = degenerate.clone();
    let changes = within_seconds(move || compare_schemas(&degenerate, &copy));
    assert!(changes.is_empty(), "{changes:#?}");
}

#[test]
fn an_unresolvable_reference_is_breaking_when_it_changed() {
    let old = object(json!({ "m": { "$ref": "#/$defs/Money" } }));
    let new = object(json!({ "m": { "$ref": "other.json#/Money" } }));
    let changes = compare_schemas(&old, &new);
    assert!(
        changes
            .iter()
            .any(|c| c.kind == K::ReferenceUnresolved && c.severity == Breaking && c.path == "$.m"),
        "{changes:#?}"
    );
}

// ---- contract level, with schemas built by schemars ----

mod before {
    use schemars::JsonSchema;
    use serde::Serialize;

    #[derive(Serialize, JsonSchema)]
    pub struct MoneyV1 {
        pub amount: String,
        pub currency: String,
    }

    #[derive(Serialize, JsonSchema)]
    pub struct OrderedBookV1 {
        pub book_id: String,
        pub unit_price: MoneyV1,
    }

    /// An order was placed.
    #[derive(Serialize, JsonSchema)]
    pub struct OrderPlacedV1 {
        pub order_id: uuid::Uuid,
        pub books: Vec<OrderedBookV1>,
    }

    /// A book was added.
    #[derive(Serialize, JsonSchema)]
    pub struct BookAddedV1 {
        pub book_id: String,
    }
}

mod after {
    use schemars::JsonSchema;
    use serde::Serialize;

    /// `currency` is gone.
    #[derive(Serialize, JsonSchema)]
    pub struct MoneyV1 {
        pub amount: String,
    }

    #[derive(Serialize, JsonSchema)]
    pub struct OrderedBookV1 {
        pub book_id: String,
        pub unit_price: MoneyV1,
    }

    /// An order was placed.
    #[derive(Serialize, JsonSchema)]
    pub struct OrderPlacedV1 {
        pub order_id: uuid::Uuid,
        pub books: Vec<OrderedBookV1>,
    }

    /// An order was placed (second version: prices without currency).
    #[derive(Serialize, JsonSchema)]
    pub struct OrderPlacedV2 {
        pub order_id: uuid::Uuid,
        pub books: Vec<OrderedBookV1>,
    }

    /// A book was added, with its title.
    #[derive(Serialize, JsonSchema)]
    pub struct BookAddedV1 {
        pub book_id: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub title: Option<String>,
    }
}

const ORDER_V1: &str = "compat-test.ordering.order-placed.v1";
const ORDER_V2: &str = "compat-test.ordering.order-placed.v2";
const BOOK_V1: &str = "compat-test.catalog.book-added.v1";

macro_rules! registration {
    ($event_type:expr, $version:expr, $key:expr, $ty:ty) => {
        ContractRegistration {
            event_type: $event_type,
            name: "compat-test.x.y",
            version: $version,
            aggregate_type: "order",
            key_field: $key,
            rust_type: stringify!($ty),
            description: "",
            schema: schema_for::<$ty>,
        }
    };
}

static ORDER_V1_BEFORE: ContractRegistration =
    registration!(ORDER_V1, 1, "order_id", before::OrderPlacedV1);
static ORDER_V1_AFTER: ContractRegistration =
    registration!(ORDER_V1, 1, "order_id", after::OrderPlacedV1);
static ORDER_V1_REKEYED: ContractRegistration =
    registration!(ORDER_V1, 1, "book_id", before::OrderPlacedV1);
static ORDER_V2_AFTER: ContractRegistration =
    registration!(ORDER_V2, 2, "order_id", after::OrderPlacedV2);
static BOOK_V1_BEFORE: ContractRegistration =
    registration!(BOOK_V1, 1, "book_id", before::BookAddedV1);
static BOOK_V1_AFTER: ContractRegistration =
    registration!(BOOK_V1, 1, "book_id", after::BookAddedV1);

fn set(registrations: &[&'static ContractRegistration]) -> ContractSet {
    let registry = ContractRegistry::from_registrations(registrations.iter().copied()).unwrap();
    ContractSet::from_registry(&registry).unwrap()
}

#[test]
fn changing_a_published_version_incompatibly_fails() {
    let report = compare(
        &set(&[&ORDER_V1_BEFORE, &BOOK_V1_BEFORE]),
        &set(&[&ORDER_V1_AFTER, &BOOK_V1_BEFORE]),
    );
    assert!(report.is_breaking());
    let order = report.contract(ORDER_V1).unwrap();
    assert_eq!(order.status, ContractStatus::Breaking);
    assert!(
        order.changes.iter().any(|c| c.kind == K::FieldRemoved
            && c.path == "$.books[].unit_price.currency"
            && c.severity == Breaking),
        "{order:#?}"
    );
    assert_eq!(
        report.contract(BOOK_V1).unwrap().status,
        ContractStatus::Unchanged
    );
}

#[test]
fn adding_v2_beside_v1_passes() {
    let report = compare(
        &set(&[&ORDER_V1_BEFORE]),
        &set(&[&ORDER_V1_BEFORE, &ORDER_V2_AFTER]),
    );
    assert!(!report.is_breaking(), "{report}");
    assert_eq!(
        report.contract(ORDER_V1).unwrap().status,
        ContractStatus::Unchanged
    );
    let v2 = report.contract(ORDER_V2).unwrap();
    assert_eq!(v2.status, ContractStatus::Added);
    assert_eq!(v2.changes[0].kind, K::ContractAdded);
    assert!(
        v2.changes[0].detail.contains("v1"),
        "{}",
        v2.changes[0].detail
    );
}

#[test]
fn a_new_contract_passes_and_a_removed_one_is_breaking() {
    let report = compare(&set(&[&ORDER_V1_BEFORE]), &set(&[&BOOK_V1_BEFORE]));
    assert_eq!(
        report.contract(BOOK_V1).unwrap().status,
        ContractStatus::Added
    );
    let removed = report.contract(ORDER_V1).unwrap();
    assert_eq!(removed.status, ContractStatus::Removed);
    assert_eq!(removed.changes[0].kind, K::ContractRemoved);
    assert_eq!(removed.changes[0].severity, Breaking);
    assert!(report.is_breaking());

    let only_added = compare(&set(&[]), &set(&[&BOOK_V1_BEFORE]));
    assert!(!only_added.is_breaking());
}

#[test]
fn a_compatible_change_is_listed_but_passes() {
    let report = compare(&set(&[&BOOK_V1_BEFORE]), &set(&[&BOOK_V1_AFTER]));
    assert!(!report.is_breaking(), "{report}");
    let book = report.contract(BOOK_V1).unwrap();
    assert_eq!(book.status, ContractStatus::Changed);
    assert!(
        book.changes
            .iter()
            .any(|c| c.kind == K::FieldAddedOptional && c.path == "$.title"),
        "{book:#?}"
    );
}

#[test]
fn changing_the_key_field_is_breaking() {
    let report = compare(&set(&[&ORDER_V1_BEFORE]), &set(&[&ORDER_V1_REKEYED]));
    let order = report.contract(ORDER_V1).unwrap();
    assert!(
        order
            .changes
            .iter()
            .any(|c| c.kind == K::KeyFieldChanged && c.severity == Breaking),
        "{order:#?}"
    );
}

#[test]
fn check_against_an_exported_baseline() {
    let dir = tempfile::tempdir().unwrap();
    let before = ContractRegistry::from_registrations([&ORDER_V1_BEFORE, &BOOK_V1_BEFORE]).unwrap();
    export(&before, dir.path(), &ExportOptions::default()).unwrap();

    let same = compat::check(&before, dir.path()).unwrap();
    assert!(!same.is_breaking());
    assert!(
        same.contracts
            .iter()
            .all(|c| c.status == ContractStatus::Unchanged),
        "{same}"
    );

    let after = ContractRegistry::from_registrations([&ORDER_V1_AFTER, &BOOK_V1_AFTER]).unwrap();
    let report = compat::check(&after, dir.path()).unwrap();
    assert!(report.is_breaking());

    let human = report.to_string();
    assert!(human.contains(ORDER_V1), "{human}");
    assert!(human.contains("$.books[].unit_price.currency"), "{human}");
    assert!(human.contains("result: breaking changes found"), "{human}");

    let json: Value = serde_json::from_str(&report.to_json()).unwrap();
    assert_eq!(json["breaking"], true);
    assert_eq!(json["summary"]["breaking"], 1);
    assert_eq!(json["summary"]["changed"], 1);
    let order = json["contracts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["event_type"] == ORDER_V1)
        .unwrap();
    assert_eq!(order["status"], "breaking");
    assert_eq!(order["changes"][0]["severity"], "breaking");
    assert_eq!(order["changes"][0]["kind"], "field_removed");
    assert_eq!(order["changes"][0]["path"], "$.books[].unit_price.currency");
}

#[test]
fn a_baseline_that_is_not_an_export_is_an_error() {
    let registry = ContractRegistry::from_registrations([&ORDER_V1_BEFORE]).unwrap();
    let empty = tempfile::tempdir().unwrap();
    let error = compat::check(&registry, empty.path()).unwrap_err();
    assert!(
        matches!(error, CompatError::MissingIndex { .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("schemas export"), "{error}");

    let dir = tempfile::tempdir().unwrap();
    export(&registry, dir.path(), &ExportOptions::default()).unwrap();
    fs::write(
        dir.path().join(format!("schemas/{ORDER_V1}.json")),
        "{ not json",
    )
    .unwrap();
    let error = compat::check(&registry, dir.path()).unwrap_err();
    assert!(matches!(error, CompatError::Parse { .. }), "{error:?}");
    assert!(error.to_string().contains(ORDER_V1), "{error}");

    fs::write(
        dir.path().join("index.json"),
        r#"{"format_version": 1, "contracts": [{"event_type": "../../etc/passwd.v1",
            "name": "x", "version": 1, "aggregate_type": "x", "key_field": "x",
            "rust_type": "x", "schema": "../../etc/passwd"}]}"#,
    )
    .unwrap();
    let error = compat::check(&registry, dir.path()).unwrap_err();
    assert!(
        matches!(error, CompatError::InvalidEventType { .. }),
        "{error:?}"
    );

    // A folder from a newer exporter: its layout may mean something this version misreads.
    fs::write(
        dir.path().join("index.json"),
        r#"{"format_version": 2, "contracts": []}"#,
    )
    .unwrap();
    let error = compat::check(&registry, dir.path()).unwrap_err();
    assert!(
        matches!(error, CompatError::NewerFormat { found: 2, .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("upgrade outbox"), "{error}");
}

/// A baseline (or a producer's export) comes from outside: a file over the folder limit is
/// refused before it is parsed.
#[test]
fn an_oversized_baseline_file_is_refused_unread() {
    let registry = ContractRegistry::from_registrations([&ORDER_V1_BEFORE]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    export(&registry, dir.path(), &ExportOptions::default()).unwrap();
    let huge = format!(
        "{{\"type\": \"object\", \"description\": \"{}\"}}",
        "x".repeat(9 * 1024 * 1024)
    );
    fs::write(dir.path().join(format!("schemas/{ORDER_V1}.json")), huge).unwrap();
    let error = compat::check(&registry, dir.path()).unwrap_err();
    assert!(
        matches!(&error, CompatError::Read { source, .. }
            if source.kind() == std::io::ErrorKind::FileTooLarge),
        "{error:?}"
    );
}
