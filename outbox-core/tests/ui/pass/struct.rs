use outbox_kernel::IntegrationEvent;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "bookstore.ordering.order-placed.v1", key = order_id)]
pub struct OrderPlacedV1 {
    pub order_id: u64,
    pub total_cents: i64,
}

fn assert_contract<E: IntegrationEvent>(event: &E) -> String {
    event.aggregate_id()
}

fn main() {
    assert_eq!(
        OrderPlacedV1::EVENT_TYPE,
        "bookstore.ordering.order-placed.v1"
    );
    assert_eq!(OrderPlacedV1::NAME, "bookstore.ordering.order-placed");
    assert_eq!(OrderPlacedV1::VERSION, 1);
    assert_eq!(OrderPlacedV1::AGGREGATE_TYPE, "order");
    assert_eq!(OrderPlacedV1::KEY_FIELD, "order_id");
    let event = OrderPlacedV1 {
        order_id: 42,
        total_cents: 1999,
    };
    assert_eq!(assert_contract(&event), "42");
}
