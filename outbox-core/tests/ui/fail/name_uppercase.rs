use outbox_kernel::IntegrationEvent;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "Bookstore.Ordering.OrderPlaced", key = order_id)]
pub struct OrderPlaced {
    pub order_id: u64,
}

#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "bookstore.ordering.orderPlaced.v1", key = order_id)]
pub struct OrderPlacedV1 {
    pub order_id: u64,
}

// The stub impl emitted with the error keeps this from failing as well.
fn main() {
    let _ = (OrderPlaced::EVENT_TYPE, OrderPlacedV1::EVENT_TYPE);
}
