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
async fn reserve_stock<C: IntegrationEvent>(
    _uow: &UnitOfWork,
    _event: C,
) -> Result<(), std::io::Error> {
    Ok(())
}

struct Inventory;

impl Inventory {
    #[inbox_handler(consumer = "inventory.release-stock")]
    async fn release_stock(&self, _event: OrderPlacedV1) -> Result<(), std::io::Error> {
        Ok(())
    }
}

fn main() {
    let _ = reserve_stock::<OrderPlacedV1>;
    let _ = Inventory::release_stock;
}
