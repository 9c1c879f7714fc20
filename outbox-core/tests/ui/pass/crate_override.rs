//! `crate = …` names outbox-core by another path: a plain path, a path in a string, and a
//! re-export (the renamed dependency itself is tested in `tests/renamed-dependencies`).
#![deny(warnings)]

mod runtime {
    pub use outbox_kernel as reexported;
}

use outbox_kernel::mapping::{ContractSink, DerivedMapping};
use outbox_kernel::{ContractRegistry, DomainEvent, EnvelopeConfig, IntegrationEvent};
use outbox_kernel::{clock::SystemClock, mapping::ContractMapper};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "bookstore.ordering.order-placed.v1", key = order_id, crate = outbox_kernel)]
pub struct OrderPlacedV1 {
    pub order_id: u64,
}

#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(
    name = "bookstore.ordering.order-paid.v1",
    key = order_id,
    crate = "crate::runtime::reexported"
)]
pub struct OrderPaidV1 {
    pub order_id: u64,
}

pub struct OrderPlaced {
    pub order_id: u64,
}

impl From<&OrderPlaced> for OrderPlacedV1 {
    fn from(event: &OrderPlaced) -> Self {
        Self {
            order_id: event.order_id,
        }
    }
}

#[derive(DomainEvent)]
#[domain_event(crate = ::outbox_kernel)]
pub enum OrderingEvent {
    #[domain_event(contract = OrderPlacedV1)]
    OrderPlaced(OrderPlaced),
}

#[derive(DomainEvent)]
#[domain_event(crate = "self::runtime::reexported")]
pub enum LocalEvent {
    #[domain_event(local)]
    Noted,
}

fn main() {
    let registry = ContractRegistry::collect().expect("no duplicates");
    assert!(registry.get(OrderPlacedV1::EVENT_TYPE).is_some());
    assert!(registry.get(OrderPaidV1::EVENT_TYPE).is_some());

    let config = EnvelopeConfig::default();
    let mut sink = ContractSink::new(&config, &SystemClock);
    DerivedMapping
        .map(&OrderingEvent::OrderPlaced(OrderPlaced { order_id: 7 }), &mut sink)
        .expect("maps");
    let envelopes = sink.into_envelopes();
    assert_eq!(envelopes.len(), 1);
    assert_eq!(envelopes[0].aggregate_id, "7");
    assert!(LocalEvent::Noted.is_local());
}
