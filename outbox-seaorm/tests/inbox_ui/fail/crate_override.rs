use outbox_core::IntegrationEvent;
use outbox_seaorm::{UnitOfWork, inbox_handler};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "bookstore.ordering.order-placed.v1", key = order_id)]
pub struct OrderPlacedV1 {
    pub order_id: String,
}

#[inbox_handler(consumer = "inventory.reserve-stock", crate = outbox_seaorm, crate = outbox_seaorm)]
async fn reserve_stock(_uow: &UnitOfWork, _event: OrderPlacedV1) -> Result<(), std::io::Error> {
    Ok(())
}

#[inbox_handler(consumer = "inventory.release-stock", crate = 5)]
async fn release_stock(_uow: &UnitOfWork, _event: OrderPlacedV1) -> Result<(), std::io::Error> {
    Ok(())
}

#[inbox_handler(consumer = "inventory.count-stock", crate = "outbox seaorm")]
async fn count_stock(_uow: &UnitOfWork, _event: OrderPlacedV1) -> Result<(), std::io::Error> {
    Ok(())
}

#[inbox_handler(consumer = "inventory.audit-stock", crate)]
async fn audit_stock(_uow: &UnitOfWork, _event: OrderPlacedV1) -> Result<(), std::io::Error> {
    Ok(())
}

fn main() {
    let _ = reserve_stock;
    let _ = release_stock;
    let _ = count_stock;
    let _ = audit_stock;
}
