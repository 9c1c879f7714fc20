use outbox_core::IntegrationEvent;
use outbox_seaorm::{UnitOfWork, inbox_handler};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "bookstore.ordering.order-placed.v1", key = order_id)]
pub struct OrderPlacedV1 {
    pub order_id: String,
}

#[inbox_handler(consumer = "inventory.reserve-stock")]
async fn reserve_stock(_uow: &UnitOfWork, _event: OrderPlacedV1) {}

/// An alias hides the error type.
#[inbox_handler(consumer = "inventory.release-stock")]
async fn release_stock(_uow: &UnitOfWork, _event: OrderPlacedV1) -> std::io::Result<()> {
    Ok(())
}

fn main() {
    let _ = reserve_stock;
    let _ = release_stock;
}
