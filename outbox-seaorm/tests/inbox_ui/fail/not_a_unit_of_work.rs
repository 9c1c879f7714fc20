use outbox_core::IntegrationEvent;
use outbox_seaorm::inbox_handler;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "bookstore.ordering.order-placed.v1", key = order_id)]
pub struct OrderPlacedV1 {
    pub order_id: String,
}

#[inbox_handler(consumer = "inventory.reserve-stock")]
async fn reserve_stock(
    _db: &sea_orm::DatabaseConnection,
    _event: OrderPlacedV1,
) -> Result<(), std::io::Error> {
    Ok(())
}

fn main() {
    let _ = reserve_stock;
    let _ = outbox_seaorm::inbox::apply::<reserve_stock>;
}
