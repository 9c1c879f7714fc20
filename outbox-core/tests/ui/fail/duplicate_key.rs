use outbox_kernel::IntegrationEvent;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "bookstore.ordering.order-placed.v1", key = order_id, key = customer_id)]
pub struct OrderPlacedV1 {
    pub order_id: u64,
    pub customer_id: u64,
}

// Across two attributes, too.
#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "bookstore.ordering.order-paid.v1", key = order_id)]
#[integration_event(name = "bookstore.ordering.order-paid.v2")]
pub struct OrderPaidV1 {
    pub order_id: u64,
}

fn main() {}
