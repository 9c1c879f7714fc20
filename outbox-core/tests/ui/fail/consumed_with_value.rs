use outbox_kernel::IntegrationEvent;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

// `consumed` is a flag: it takes no value.
#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "bookstore.ordering.order-placed.v1", key = order_id, consumed = true)]
pub struct OrderPlacedV1 {
    pub order_id: u64,
}

fn main() {}
