use outbox_kernel::IntegrationEvent;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type")]
#[integration_event(name = "bookstore.ordering.order-changed.v1", key = order_id)]
pub enum OrderChangedV1 {
    Paid { order_id: u64, amount_cents: i64 },
    Cancelled { reason: String },
    Archived,
    Merged(MergedInto),
}

#[derive(Serialize, Deserialize, JsonSchema)]
pub struct MergedInto {
    pub order_id: u64,
}

fn main() {}
