use outbox_core::IntegrationEvent;
use outbox_seaorm::{UnitOfWork, inbox_handler};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "bookstore.ordering.order-placed.v1", key = order_id)]
pub struct OrderPlacedV1 {
    pub order_id: String,
}

/// Holds an `Rc` across an `.await`: the consumer runs handlers on a multi-threaded runtime.
#[inbox_handler(consumer = "inventory.reserve-stock")]
async fn reserve_stock(_uow: &UnitOfWork, event: OrderPlacedV1) -> Result<(), std::io::Error> {
    let order = std::rc::Rc::new(event.order_id);
    std::future::ready(()).await;
    drop(order);
    Ok(())
}

fn main() {}
