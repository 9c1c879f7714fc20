use outbox_kernel::IntegrationEvent;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
pub struct OrderPlacedV1 {
    pub order_id: u64,
}

fn publish<E: IntegrationEvent>(_event: &E) {}

// The stub impl emitted with the error keeps this from failing as well.
fn main() {
    publish(&OrderPlacedV1 { order_id: 1 });
}
