use outbox_kernel::IntegrationEvent;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "bookstore.ordering.order-placed.v1", key = orderid)]
pub struct OrderPlacedV1 {
    pub order_id: u64,
    pub customer_id: u64,
}

#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type")]
#[integration_event(name = "bookstore.ordering.order-changed.v1", key = id)]
pub enum OrderChangedV1 {
    Paid { order_id: u64 },
    Cancelled { order_id: u64 },
}

#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "bookstore.ordering.order-paid.v1", key = order::id)]
pub struct OrderPaidV1 {
    pub order_id: u64,
}

fn main() {}
