use outbox_kernel::DomainEvent;
use outbox_kernel::mapping::{ContractSink, MapError};

pub struct OrderPlaced;
pub struct OrderShipped;

// Takes the wrong payload.
fn map_placed(_: &OrderShipped, _: &mut ContractSink<'_>) -> Result<(), MapError> {
    Ok(())
}

// Returns nothing.
fn map_shipped(_: &OrderShipped, _: &mut ContractSink<'_>) {}

// A struct variant's function receives the whole event, not the fields.
fn map_cancelled(_: &u64, _: &mut ContractSink<'_>) -> Result<(), MapError> {
    Ok(())
}

#[derive(DomainEvent)]
pub enum OrderingEvent {
    #[domain_event(map = map_placed)]
    OrderPlaced(OrderPlaced),
    #[domain_event(map = map_shipped)]
    OrderShipped(OrderShipped),
    #[domain_event(map = map_cancelled)]
    OrderCancelled { order_id: u64 },
}

fn main() {}
