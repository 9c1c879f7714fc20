//! Two Rust types claiming one event type make the registry refuse to build, naming both.
//! This test binary links two such types on purpose.

use outbox_kernel::__private::schema_for;
use outbox_kernel::{ContractRegistration, ContractRegistry, IntegrationEvent, RegistryError};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

mod billing {
    use super::*;

    /// Billing's idea of a paid order.
    #[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
    #[integration_event(name = "shop.ordering.order-paid.v1", key = order_id)]
    pub struct OrderPaid {
        pub order_id: u64,
    }
}

mod ordering {
    use super::*;

    /// Ordering's idea of a paid order, with the same event type by mistake.
    #[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
    #[integration_event(name = "shop.ordering.order-paid.v1", key = order_id)]
    pub struct OrderPaidV1 {
        pub order_id: u64,
        pub amount: u64,
    }
}

/// A contract without a clash.
#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "shop.ordering.order-shipped.v1", key = order_id)]
struct OrderShippedV1 {
    order_id: u64,
}

#[test]
fn collect_names_both_claimants() {
    let error = ContractRegistry::collect().unwrap_err();
    assert_eq!(
        error,
        RegistryError::DuplicateEventType {
            event_type: "shop.ordering.order-paid.v1".into(),
            first: "registry_duplicates::billing::OrderPaid".into(),
            second: "registry_duplicates::ordering::OrderPaidV1".into(),
        }
    );
    let message = error.to_string();
    assert!(
        message.contains("registry_duplicates::billing::OrderPaid`"),
        "{message}"
    );
    assert!(
        message.contains("registry_duplicates::ordering::OrderPaidV1"),
        "{message}"
    );
    assert_eq!(OrderShippedV1::EVENT_TYPE, "shop.ordering.order-shipped.v1");
}

static B: ContractRegistration = ContractRegistration {
    event_type: "shop.catalog.book-added.v1",
    name: "shop.catalog.book-added",
    version: 1,
    aggregate_type: "book",
    key_field: "book_id",
    rust_type: "catalog::BookAddedV1",
    description: "",
    schema: schema_for::<u64>,
};

static A: ContractRegistration = ContractRegistration {
    event_type: "shop.billing.invoice-sent.v1",
    name: "shop.billing.invoice-sent",
    version: 1,
    aggregate_type: "invoice",
    key_field: "invoice_id",
    rust_type: "billing::InvoiceSentV1",
    description: "",
    schema: schema_for::<u64>,
};

static A_AGAIN: ContractRegistration = ContractRegistration {
    rust_type: "legacy::InvoiceSent",
    ..A
};

#[test]
fn explicit_registrations_are_sorted_and_checked() {
    let registry = ContractRegistry::from_registrations([&B, &A]).unwrap();
    let types: Vec<_> = registry.contracts().iter().map(|c| c.event_type).collect();
    assert_eq!(
        types,
        ["shop.billing.invoice-sent.v1", "shop.catalog.book-added.v1"]
    );
    assert_eq!(
        registry
            .get("shop.catalog.book-added.v1")
            .map(|c| c.rust_type),
        Some("catalog::BookAddedV1")
    );
    assert!(registry.get("shop.catalog.book-removed.v1").is_none());
    assert_eq!(registry.len(), 2);

    assert_eq!(
        ContractRegistry::from_registrations([&A_AGAIN, &B, &A]).unwrap_err(),
        RegistryError::DuplicateEventType {
            event_type: "shop.billing.invoice-sent.v1".into(),
            first: "billing::InvoiceSentV1".into(),
            second: "legacy::InvoiceSent".into(),
        }
    );
}
