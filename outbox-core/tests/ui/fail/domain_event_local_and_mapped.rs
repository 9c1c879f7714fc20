use outbox_kernel::DomainEvent;
use outbox_kernel::mapping::{ContractSink, MapError};

pub struct OrderPlaced;
pub struct OrderPlacedV1;

fn map_placed(_: &OrderPlaced, _: &mut ContractSink<'_>) -> Result<(), MapError> {
    Ok(())
}

#[derive(DomainEvent)]
pub enum OrderingEvent {
    #[domain_event(local, contract = OrderPlacedV1)]
    OrderPlaced(OrderPlaced),
    #[domain_event(map = map_placed, local)]
    OrderReplaced(OrderPlaced),
}

fn main() {}
