//! Values of the producer's types, sent through the envelope and decoded with the types
//! `outbox-codegen` generated from the producer's export: every field arrives, and the
//! generated type writes back exactly the JSON the producer wrote (so no field was dropped,
//! renamed or reinterpreted). A table of edge values per construct, then property tests over
//! generated values.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use chrono::{DateTime, NaiveDate, TimeZone as _, Utc};
use outbox_codegen_roundtrip::{consumer, producer};
use outbox_core::{Envelope, IntegrationEvent};
use proptest::prelude::*;
use serde_json::{Value, json};
use uuid::Uuid;

/// Sends `value` through an envelope, decodes it as `C`, and checks that `C` holds the same
/// JSON, the same contract identity and the same aggregate id. Returns the decoded value.
fn round_trip<P, C>(value: &P) -> C
where
    P: IntegrationEvent + std::fmt::Debug,
    C: IntegrationEvent + std::fmt::Debug,
{
    assert_eq!(C::EVENT_TYPE, P::EVENT_TYPE);
    assert_eq!(C::VERSION, P::VERSION);
    assert_eq!(C::KEY_FIELD, P::KEY_FIELD);
    assert_eq!(C::AGGREGATE_TYPE, P::AGGREGATE_TYPE);
    let envelope = Envelope::from_event(value).expect("the producer's value encodes");
    let decoded: C = envelope
        .decode()
        .unwrap_or_else(|e| panic!("the generated type rejects {value:?}: {e}"));
    let sent: Value = serde_json::from_str(envelope.payload.get()).expect("JSON");
    let received = serde_json::to_value(&decoded).expect("the generated type serializes");
    pretty_assertions::assert_eq!(received, sent, "field for field");
    assert_eq!(decoded.aggregate_id(), envelope.aggregate_id);
    decoded
}

fn scalars(
    note: Option<&str>,
    nickname: Option<&str>,
    score: Option<i64>,
) -> producer::ScalarsChangedV1 {
    producer::ScalarsChangedV1 {
        item_id: Uuid::now_v7(),
        at: Utc
            .with_ymd_and_hms(2026, 12, 7, 9, 30, 15)
            .single()
            .expect("a time"),
        day: NaiveDate::from_ymd_opt(2026, 2, 28).expect("a day"),
        label: "läbel \"quoted\" ✓".to_owned(),
        active: true,
        small: u8::MAX,
        count: u32::MAX,
        big: u64::MAX,
        delta: i32::MIN,
        balance: i64::MIN,
        ratio: 0.125,
        note: note.map(str::to_owned),
        nickname: nickname.map(str::to_owned),
        score,
        extra: json!({"free": ["form", 1, null, {"nested": true}]}),
    }
}

#[test]
fn scalars_formats_and_options() {
    for value in [
        scalars(None, None, None),
        scalars(Some("a note"), Some("nick"), Some(-7)),
        scalars(Some(""), None, Some(i64::MAX)),
    ] {
        let decoded: consumer::ScalarsChangedV1 = round_trip(&value);
        // Field for field, in the generated type's own terms.
        assert_eq!(decoded.item_id, value.item_id);
        assert_eq!(decoded.at, value.at);
        assert_eq!(decoded.day, value.day);
        assert_eq!(decoded.label, value.label);
        assert_eq!(decoded.active, value.active);
        assert_eq!(decoded.small, value.small);
        assert_eq!(decoded.count, value.count);
        assert_eq!(decoded.big, value.big);
        assert_eq!(decoded.delta, value.delta);
        assert_eq!(decoded.balance, value.balance);
        assert!((decoded.ratio - value.ratio).abs() < f64::EPSILON);
        assert_eq!(decoded.note, value.note);
        assert_eq!(decoded.nickname, value.nickname);
        assert_eq!(decoded.score, value.score);
        assert_eq!(decoded.extra, value.extra);
    }
}

fn address(country: producer::CountryV1) -> producer::AddressV1 {
    producer::AddressV1 {
        street: "Keizersgracht 1".to_owned(),
        postcode: "1015 CJ".to_owned(),
        country,
    }
}

fn line(sku: &str, quantity: u32) -> producer::LineV1 {
    producer::LineV1 {
        sku: sku.to_owned(),
        quantity,
    }
}

#[test]
fn nested_types_arrays_maps_tuples_and_renames() {
    let full = producer::ShipmentPreparedV1 {
        shipment_id: Uuid::now_v7(),
        deliver_to: address(producer::CountryV1::TheNetherlands),
        return_to: Some(address(producer::CountryV1::Turkey)),
        lines: vec![line("dune", 2), line("emma", 1)],
        labels: vec!["fragile".to_owned(), "gift".to_owned()],
        tags: BTreeSet::from(["a".to_owned(), "b".to_owned()]),
        weights: BTreeMap::from([("p1".to_owned(), 1200), ("p2".to_owned(), u64::MAX)]),
        by_warehouse: HashMap::from([("ams".to_owned(), vec![line("dune", 2)])]),
        dimensions: (30, 40),
        carrier_code: "dhl".to_owned(),
    };
    let empty = producer::ShipmentPreparedV1 {
        return_to: None,
        lines: Vec::new(),
        labels: Vec::new(),
        tags: BTreeSet::new(),
        weights: BTreeMap::new(),
        by_warehouse: HashMap::new(),
        ..full.clone()
    };
    for value in [full, empty] {
        let decoded: consumer::ShipmentPreparedV1 = round_trip(&value);
        assert_eq!(decoded.shipment_id, value.shipment_id);
        assert_eq!(decoded.deliver_to.street, value.deliver_to.street);
        assert_eq!(
            decoded.return_to.as_ref().map(|a| a.postcode.clone()),
            value.return_to.as_ref().map(|a| a.postcode.clone())
        );
        assert_eq!(decoded.lines.len(), value.lines.len());
        assert_eq!(decoded.dimensions, value.dimensions);
        assert_eq!(decoded.carrier_code, value.carrier_code);
        assert_eq!(decoded.weights.len(), value.weights.len());
    }
}

#[test]
fn tagged_external_and_string_enums_in_a_closed_object() {
    use producer::{PaymentMethodV1 as Method, RefundV1 as Refund};
    let methods = [
        Method::Card {
            last4: "4242".to_owned(),
        },
        Method::Transfer {
            iban: "NL91ABNA0417164300".to_owned(),
            reference: None,
        },
        Method::Transfer {
            iban: "DE89370400440532013000".to_owned(),
            reference: Some("inv-7".to_owned()),
        },
        Method::Cash,
    ];
    let refunds = [
        Refund::None,
        Refund::Partial(250),
        Refund::Full {
            reason: "damaged".to_owned(),
        },
    ];
    let notes = [
        producer::NoteV1::Text("left at the door".to_owned()),
        producer::NoteV1::Document { id: 42 },
    ];
    let payers = [
        producer::PayerV1::Account {
            account_id: "acc-1".to_owned(),
        },
        producer::PayerV1::Guest {
            email: "ada@example.com".to_owned(),
        },
    ];
    for (i, method) in methods.iter().enumerate() {
        let value = producer::PaymentSettledV1 {
            payment_id: format!("pay-{i}"),
            method: method.clone(),
            refund: refunds[i % refunds.len()].clone(),
            country: producer::CountryV1::Germany,
            attempts: methods.to_vec(),
            note: notes[i % notes.len()].clone(),
            payer: payers[i % payers.len()].clone(),
        };
        let decoded: consumer::PaymentSettledV1 = round_trip(&value);
        assert_eq!(decoded.payment_id, value.payment_id);
        assert_eq!(decoded.attempts.len(), methods.len());
    }
}

/// `deny_unknown_fields` travels: the generated type rejects a field the schema does not have.
#[test]
fn a_closed_object_stays_closed() {
    let payload = json!({
        "payment_id": "p", "method": {"kind": "cash"}, "refund": "None",
        "country": "germany", "attempts": [], "note": {"type": "text", "value": "x"},
        "payer": {"email": "a@b"}, "surprise": 1
    });
    let decoded = serde_json::from_value::<consumer::PaymentSettledV1>(payload);
    let error = decoded
        .expect_err("an unknown field is refused")
        .to_string();
    assert!(error.contains("surprise"), "{error}");
}

/// `#[serde(flatten)]`: the flattened fields arrive as fields of the generated type.
#[test]
fn a_flattened_struct() {
    let value = producer::StockCountedV1 {
        warehouse_id: "ams".to_owned(),
        copies: 12,
        audit: producer::AuditV1 {
            changed_by: "ada".to_owned(),
            revision: 3,
        },
    };
    let decoded: consumer::StockCountedV1 = round_trip(&value);
    assert_eq!(decoded.changed_by, "ada");
    assert_eq!(decoded.revision, 3);
}

#[test]
fn a_contract_that_is_a_tagged_enum() {
    for value in [
        producer::ParcelChangedV1::Dispatched {
            parcel_id: Uuid::now_v7(),
            carrier: "postnl".to_owned(),
        },
        producer::ParcelChangedV1::Delivered {
            parcel_id: Uuid::now_v7(),
            signed_by: None,
        },
        producer::ParcelChangedV1::Delivered {
            parcel_id: Uuid::now_v7(),
            signed_by: Some("Ada".to_owned()),
        },
    ] {
        let decoded: consumer::ParcelChangedV1 = round_trip(&value);
        assert_eq!(decoded.aggregate_id(), value.aggregate_id());
    }
}

/// Constraints travel: the generated type accepts what the schema accepts, and refuses a
/// value outside its pattern or length (a decode error, never a panic).
#[test]
fn constraints_are_enforced_by_the_generated_type() {
    let value = producer::PriceSetV1 {
        sku: "dune-01".to_owned(),
        amount: "12.50".to_owned(),
        discount: 100,
    };
    let decoded: consumer::PriceSetV1 = round_trip(&value);
    assert_eq!(decoded.sku.as_str(), "dune-01");
    assert_eq!(decoded.amount.as_str(), "12.50");
    assert_eq!(decoded.aggregate_id(), "dune-01");
    for bad in [
        json!({"sku": "dune-01", "amount": "12.5.0", "discount": 1}),
        json!({"sku": "du", "amount": "1", "discount": 1}),
        json!({"sku": "a-very-long-sku", "amount": "1", "discount": 1}),
    ] {
        assert!(
            serde_json::from_value::<consumer::PriceSetV1>(bad.clone()).is_err(),
            "{bad} is outside the schema"
        );
    }
}

#[test]
fn a_recursive_type() {
    let leaf = |name: &str| producer::CategoryV1 {
        name: name.to_owned(),
        children: Vec::new(),
    };
    let value = producer::CatalogReorganizedV1 {
        catalog_id: 7,
        root: producer::CategoryV1 {
            name: "books".to_owned(),
            children: vec![
                producer::CategoryV1 {
                    name: "fiction".to_owned(),
                    children: vec![leaf("sf"), leaf("crime")],
                },
                leaf("poetry"),
            ],
        },
    };
    let decoded: consumer::CatalogReorganizedV1 = round_trip(&value);
    assert_eq!(decoded.root.children[0].children[1].name, "crime");
}

fn country() -> impl Strategy<Value = producer::CountryV1> {
    prop_oneof![
        Just(producer::CountryV1::Germany),
        Just(producer::CountryV1::TheNetherlands),
        Just(producer::CountryV1::Turkey),
    ]
}

fn any_address() -> impl Strategy<Value = producer::AddressV1> {
    (any::<String>(), any::<String>(), country()).prop_map(|(street, postcode, country)| {
        producer::AddressV1 {
            street,
            postcode,
            country,
        }
    })
}

fn any_line() -> impl Strategy<Value = producer::LineV1> {
    (any::<String>(), any::<u32>()).prop_map(|(sku, quantity)| producer::LineV1 { sku, quantity })
}

fn any_time() -> impl Strategy<Value = DateTime<Utc>> {
    (0_i64..=253_402_300_799, 0_u32..1_000_000_000)
        .prop_map(|(secs, nanos)| DateTime::from_timestamp(secs, nanos).expect("in range"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn any_scalars_round_trip(
        at in any_time(),
        label in any::<String>(),
        (active, small, count, big) in (any::<bool>(), any::<u8>(), any::<u32>(), any::<u64>()),
        (delta, balance) in (any::<i32>(), any::<i64>()),
        ratio in -1.0e12_f64..1.0e12,
        note in any::<Option<String>>(),
        nickname in any::<Option<String>>(),
        score in any::<Option<i64>>(),
    ) {
        let value = producer::ScalarsChangedV1 {
            item_id: Uuid::now_v7(),
            at,
            day: at.date_naive(),
            label,
            active,
            small,
            count,
            big,
            delta,
            balance,
            ratio,
            note,
            nickname,
            score,
            extra: Value::Null,
        };
        let _: consumer::ScalarsChangedV1 = round_trip(&value);
    }

    #[test]
    fn any_shipment_round_trips(
        deliver_to in any_address(),
        return_to in proptest::option::of(any_address()),
        lines in proptest::collection::vec(any_line(), 0..4),
        labels in proptest::collection::vec(any::<String>(), 0..4),
        tags in proptest::collection::btree_set(any::<String>(), 0..4),
        weights in proptest::collection::btree_map(any::<String>(), any::<u64>(), 0..4),
        by_warehouse in proptest::collection::hash_map(
            any::<String>(), proptest::collection::vec(any_line(), 0..3), 0..3),
        dimensions in (any::<u32>(), any::<u32>()),
        carrier_code in any::<String>(),
    ) {
        let value = producer::ShipmentPreparedV1 {
            shipment_id: Uuid::now_v7(),
            deliver_to,
            return_to,
            lines,
            labels,
            tags,
            weights,
            by_warehouse,
            dimensions,
            carrier_code,
        };
        let _: consumer::ShipmentPreparedV1 = round_trip(&value);
    }
}
