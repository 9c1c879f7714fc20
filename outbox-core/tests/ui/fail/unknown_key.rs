use outbox_kernel::IntegrationEvent;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "bookstore.ordering.order-placed.v1", key = order_id, agregate = "order")]
pub struct OrderPlacedV1 {
    pub order_id: u64,
}

#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "bookstore.ordering.order-paid.v1", key = order_id, version = 2)]
pub struct OrderPaidV1 {
    pub order_id: u64,
}

fn main() {}
