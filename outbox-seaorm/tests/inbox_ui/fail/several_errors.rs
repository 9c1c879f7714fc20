use outbox_core::IntegrationEvent;
use outbox_seaorm::{UnitOfWork, inbox_handler};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "bookstore.ordering.order-placed.v1", key = order_id)]
pub struct OrderPlacedV1 {
    pub order_id: String,
}

#[inbox_handler(consumer = "Inventory", mapper, retries = 3)]
fn reserve_stock<T>(_uow: UnitOfWork, _event: &OrderPlacedV1, _extra: T) {}

fn main() {
    let _ = reserve_stock::<u8>;
}
