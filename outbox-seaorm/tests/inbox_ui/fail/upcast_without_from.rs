use outbox_core::IntegrationEvent;
use outbox_seaorm::{UnitOfWork, inbox_handler};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "bookstore.ordering.order-placed.v1", key = order_id)]
pub struct OrderPlacedV1 {
    pub order_id: String,
}

#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "bookstore.ordering.order-placed.v2", key = order_id)]
pub struct OrderPlacedV2 {
    pub order_id: String,
    pub express: bool,
}

/// No `From<OrderPlacedV1> for OrderPlacedV2`.
#[inbox_handler(consumer = "inventory.reserve-stock", upcast(from = OrderPlacedV1))]
async fn reserve_stock(_uow: &UnitOfWork, _event: OrderPlacedV2) -> Result<(), std::io::Error> {
    Ok(())
}

fn main() {}
