use outbox_kernel::IntegrationEvent;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "bookstore.ordering.order-placed.v1", key = order_id, crate = outbox_kernel, crate = outbox_kernel)]
pub struct OrderPlacedV1 {
    pub order_id: u64,
}

// Across two attributes, too.
#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "bookstore.ordering.order-paid.v1", key = order_id, crate = outbox_kernel)]
#[integration_event(crate = "outbox_kernel")]
pub struct OrderPaidV1 {
    pub order_id: u64,
}

#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "bookstore.ordering.order-shipped.v1", key = order_id, crate = 5)]
pub struct OrderShippedV1 {
    pub order_id: u64,
}

#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "bookstore.ordering.order-lost.v1", key = order_id, crate = "outbox core")]
pub struct OrderLostV1 {
    pub order_id: u64,
}

#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "bookstore.ordering.order-found.v1", key = order_id, crate)]
pub struct OrderFoundV1 {
    pub order_id: u64,
}

fn main() {}
