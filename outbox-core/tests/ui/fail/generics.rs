use outbox_kernel::IntegrationEvent;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "bookstore.ordering.order-placed.v1", key = order_id)]
pub struct OrderPlacedV1<T> {
    pub order_id: u64,
    pub payload: T,
}

#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "bookstore.ordering.order-noted.v1", key = order_id)]
pub struct OrderNotedV1<'a> {
    pub order_id: u64,
    pub note: &'a str,
}

fn main() {}
