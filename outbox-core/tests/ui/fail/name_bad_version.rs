use outbox_kernel::IntegrationEvent;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "bookstore.ordering.order-placed.v0", key = order_id)]
pub struct VersionZero {
    pub order_id: u64,
}

#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "bookstore.ordering.order-placed.v01", key = order_id)]
pub struct LeadingZero {
    pub order_id: u64,
}

#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "bookstore.ordering.order-placed", key = order_id)]
pub struct NoVersion {
    pub order_id: u64,
}

fn main() {}
