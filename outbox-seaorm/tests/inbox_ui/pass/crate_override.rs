//! `crate = …` names outbox-seaorm by another path: a plain path and a re-export in a string
//! (the renamed dependency itself is tested in `tests/renamed-dependencies`).
#![deny(warnings)]

mod runtime {
    pub use outbox_seaorm as reexported;
}

use outbox_core::IntegrationEvent;
use outbox_seaorm::inbox::{HandlerRegistration, InboxHandler};
use outbox_seaorm::{UnitOfWork, inbox_handler};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// An order was placed.
#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "bookstore.ordering.order-placed.v1", key = order_id)]
pub struct OrderPlacedV1 {
    pub order_id: String,
}

#[inbox_handler(consumer = "inventory.reserve-stock", crate = outbox_seaorm)]
async fn reserve_stock(_uow: &UnitOfWork, _event: OrderPlacedV1) -> Result<(), std::io::Error> {
    Ok(())
}

#[inbox_handler(consumer = "inventory.count-orders", crate = "crate::runtime::reexported")]
async fn count_orders(_uow: &UnitOfWork, _event: OrderPlacedV1) -> Result<(), std::io::Error> {
    Ok(())
}

fn main() {
    assert_eq!(
        <reserve_stock as InboxHandler>::CONSUMER,
        "inventory.reserve-stock"
    );
    assert_eq!(
        <count_orders as InboxHandler>::CONSUMER,
        "inventory.count-orders"
    );
    let mut consumers: Vec<_> = HandlerRegistration::all()
        .map(|r| (r.consumer(), r.event_type()))
        .collect();
    consumers.sort();
    assert_eq!(
        consumers,
        [
            ("inventory.count-orders", OrderPlacedV1::EVENT_TYPE),
            ("inventory.reserve-stock", OrderPlacedV1::EVENT_TYPE),
        ]
    );
}
