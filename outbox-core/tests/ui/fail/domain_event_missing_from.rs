use outbox_kernel::{DomainEvent, IntegrationEvent};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

mod contracts {
    use super::*;

    #[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
    #[integration_event(name = "bookstore.ordering.order-placed.v1", key = order_id)]
    pub struct OrderPlacedV1 {
        pub order_id: u64,
    }
}

pub struct OrderPlaced {
    pub order_id: u64,
}

// No `impl From<&OrderPlaced> for OrderPlacedV1`: reported on the contract.
#[derive(DomainEvent)]
pub enum OrderingEvent {
    #[domain_event(contract = contracts::OrderPlacedV1)]
    OrderPlaced(OrderPlaced),
}

fn main() {}
