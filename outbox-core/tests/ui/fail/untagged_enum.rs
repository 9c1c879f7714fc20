use outbox_kernel::IntegrationEvent;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

// Externally tagged (serde's default).
#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "bookstore.ordering.order-changed.v1", key = order_id)]
pub enum OrderChangedV1 {
    Paid { order_id: u64 },
    Cancelled { order_id: u64 },
}

#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
#[integration_event(name = "bookstore.ordering.order-changed.v2", key = order_id)]
pub enum OrderChangedV2 {
    Paid { order_id: u64 },
    Cancelled { order_id: u64 },
}

fn main() {}
