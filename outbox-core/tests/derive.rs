//! Run-time behaviour of `#[derive(IntegrationEvent)]`: the constants, `aggregate_id` and the
//! registration of each contract in `ContractRegistry`.

use outbox_kernel::{ContractRegistration, ContractRegistry, IntegrationEvent};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// An order was placed by a customer.
///
/// Carries the order's total.
#[derive(Debug, IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "derive-test.ordering.order-placed.v1", key = order_id)]
pub(crate) struct OrderPlacedV1 {
    pub(crate) order_id: u64,
    pub(crate) total_cents: i64,
}

#[derive(Debug, IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case")]
#[integration_event(
    name = "derive-test.shipping.shipment-changed.v2",
    key = shipment_id,
    aggregate = "parcel"
)]
pub(crate) enum ShipmentChangedV2 {
    Dispatched {
        shipment_id: String,
        carrier: String,
    },
    Delivered {
        signed_by: String,
        shipment_id: String,
    },
}

mod nested {
    use super::*;

    /// A copy of a book was shelved.
    #[derive(Debug, IntegrationEvent, Serialize, Deserialize, JsonSchema)]
    #[serde(tag = "type", content = "data")]
    #[integration_event(name = "derive-test.catalog.copy-changed.v10", key = "book_copy_id")]
    pub(crate) enum CopyChangedV10 {
        Shelved { book_copy_id: u32, shelf: String },
        Lent { book_copy_id: u32 },
    }

    #[derive(Debug, IntegrationEvent, Serialize, Deserialize, JsonSchema)]
    #[integration_event(name = "derive-test.catalog.keyword-key.v1", key = r#type)]
    pub(crate) struct RawKeyV1 {
        pub(crate) r#type: String,
    }
}

use nested::{CopyChangedV10, RawKeyV1};

fn registration(event_type: &str) -> &'static ContractRegistration {
    let registry = ContractRegistry::collect().expect("no duplicate event types");
    registry
        .get(event_type)
        .unwrap_or_else(|| panic!("`{event_type}` is not registered; registry: {registry:?}"))
}

#[test]
fn struct_constants_and_aggregate_id() {
    assert_eq!(
        OrderPlacedV1::EVENT_TYPE,
        "derive-test.ordering.order-placed.v1"
    );
    assert_eq!(OrderPlacedV1::NAME, "derive-test.ordering.order-placed");
    assert_eq!(OrderPlacedV1::VERSION, 1);
    assert_eq!(OrderPlacedV1::AGGREGATE_TYPE, "order");
    assert_eq!(OrderPlacedV1::KEY_FIELD, "order_id");
    let event = OrderPlacedV1 {
        order_id: 42,
        total_cents: 1999,
    };
    assert_eq!(event.aggregate_id(), "42");
}

#[test]
fn enum_aggregate_id_per_variant() {
    assert_eq!(ShipmentChangedV2::AGGREGATE_TYPE, "parcel");
    assert_eq!(ShipmentChangedV2::KEY_FIELD, "shipment_id");
    assert_eq!(ShipmentChangedV2::VERSION, 2);
    let dispatched = ShipmentChangedV2::Dispatched {
        shipment_id: "s-1".into(),
        carrier: "post".into(),
    };
    let delivered = ShipmentChangedV2::Delivered {
        signed_by: "Ann".into(),
        shipment_id: "s-2".into(),
    };
    assert_eq!(dispatched.aggregate_id(), "s-1");
    assert_eq!(delivered.aggregate_id(), "s-2");

    assert_eq!(CopyChangedV10::VERSION, 10);
    assert_eq!(CopyChangedV10::AGGREGATE_TYPE, "book-copy");
    assert_eq!(CopyChangedV10::KEY_FIELD, "book_copy_id");
    let shelved = CopyChangedV10::Shelved {
        book_copy_id: 7,
        shelf: "A3".into(),
    };
    assert_eq!(shelved.aggregate_id(), "7");
    assert_eq!(CopyChangedV10::Lent { book_copy_id: 8 }.aggregate_id(), "8");
}

#[test]
fn raw_identifier_key() {
    assert_eq!(RawKeyV1::KEY_FIELD, "type");
    assert_eq!(RawKeyV1::AGGREGATE_TYPE, "type");
    let event = RawKeyV1 {
        r#type: "t-1".into(),
    };
    assert_eq!(event.aggregate_id(), "t-1");
}

#[test]
fn registers_the_struct_with_its_doc_comment_and_schema() {
    let reg = registration("derive-test.ordering.order-placed.v1");
    assert_eq!(reg.event_type, OrderPlacedV1::EVENT_TYPE);
    assert_eq!(reg.name, "derive-test.ordering.order-placed");
    assert_eq!(reg.version, 1);
    assert_eq!(reg.aggregate_type, "order");
    assert_eq!(reg.key_field, "order_id");
    assert_eq!(reg.rust_type, "derive::OrderPlacedV1");
    assert_eq!(
        reg.description,
        "An order was placed by a customer.\n\nCarries the order's total."
    );

    let schema = (reg.schema)().to_value();
    assert_eq!(schema["description"], reg.description, "{schema:#}");
    assert_eq!(schema["title"], "OrderPlacedV1", "{schema:#}");
    assert_eq!(
        schema["properties"]["order_id"]["type"], "integer",
        "{schema:#}"
    );
    assert_eq!(reg.json_schema().to_value(), schema);
}

#[test]
fn registers_enums_with_their_module_path() {
    let reg = registration("derive-test.catalog.copy-changed.v10");
    assert_eq!(reg.rust_type, "derive::nested::CopyChangedV10");
    assert_eq!(reg.description, "A copy of a book was shelved.");
    assert_eq!(reg.aggregate_type, "book-copy");
    assert_eq!(reg.version, 10);
    assert_eq!(
        (reg.schema)().to_value()["description"],
        "A copy of a book was shelved."
    );

    let reg = registration("derive-test.shipping.shipment-changed.v2");
    assert_eq!(reg.rust_type, "derive::ShipmentChangedV2");
    assert_eq!(reg.aggregate_type, "parcel");
    assert_eq!(reg.key_field, "shipment_id");
    assert_eq!(reg.description, "", "no doc comment, no description");
    let schema = (reg.schema)().to_value();
    assert!(schema.get("description").is_none(), "{schema:#}");
    assert!(schema.get("oneOf").is_some(), "{schema:#}");
}

#[test]
fn every_derived_contract_is_registered_once() {
    let registry = ContractRegistry::collect().expect("no duplicate event types");
    let ours: Vec<&str> = registry
        .contracts()
        .iter()
        .map(|c| c.event_type)
        .filter(|t| t.starts_with("derive-test."))
        .collect();
    assert_eq!(
        ours,
        [
            "derive-test.catalog.copy-changed.v10",
            "derive-test.catalog.keyword-key.v1",
            "derive-test.ordering.order-placed.v1",
            "derive-test.shipping.shipment-changed.v2",
        ]
    );
}
