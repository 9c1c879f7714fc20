use outbox_core::IntegrationEvent;
use outbox_seaorm::{UnitOfWork, inbox_handler};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "bookstore.ordering.order-placed.v1", key = order_id)]
pub struct OrderPlacedV1 {
    pub order_id: String,
}

/// A mapper of other events.
pub struct OrderingContracts;

impl outbox_core::mapping::ContractMapper<u8> for OrderingContracts {
    fn map(
        &self,
        _event: &u8,
        _out: &mut outbox_core::mapping::ContractSink<'_>,
    ) -> Result<(), outbox_core::mapping::MapError> {
        Ok(())
    }
}

#[inbox_handler(consumer = "inventory.reserve-stock", mapper = &OrderingContracts)]
async fn reserve_stock(_uow: &UnitOfWork, _event: OrderPlacedV1) -> Result<(), std::io::Error> {
    Ok(())
}

fn main() {}
