use outbox_kernel::IntegrationEvent;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

const NAME: &str = "bookstore.ordering.order-placed.v1";

#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = NAME, key = order_id)]
pub struct OrderPlacedV1 {
    pub order_id: u64,
}

#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = concat!("bookstore.ordering.", "order-paid.v1"), key = order_id)]
pub struct OrderPaidV1 {
    pub order_id: u64,
}

#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name, key = order_id)]
pub struct OrderShippedV1 {
    pub order_id: u64,
}

fn main() {}
