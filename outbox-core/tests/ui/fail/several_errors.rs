use outbox_kernel::IntegrationEvent;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

// Every problem is reported, not only the first one.
#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "Bookstore.ordering.order-placed.v1", key = id, aggregate = "Order")]
pub enum OrderChangedV1<T> {
    Paid { order_id: u64, extra: T },
    Cancelled { order_id: u64 },
}

// darling reports every syntax problem of the attribute at once.
#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(nmae = "bookstore.ordering.order-paid.v1", key = order_id, key = id, aggregate = 1)]
pub struct OrderPaidV1 {
    pub order_id: u64,
}

fn main() {}
