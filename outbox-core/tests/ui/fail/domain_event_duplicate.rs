use outbox_kernel::DomainEvent;
use outbox_kernel::mapping::{ContractSink, MapError};

pub struct OrderCancelled;
pub struct OrderCancelledV1;
pub struct RefundRequestedV1;

fn map_a(_: &OrderCancelled, _: &mut ContractSink<'_>) -> Result<(), MapError> {
    Ok(())
}

#[derive(DomainEvent)]
pub enum OrderingEvent {
    // One attribute per variant.
    #[domain_event(contract = OrderCancelledV1)]
    #[domain_event(contract = RefundRequestedV1)]
    OrderCancelled(OrderCancelled),
    // One `map`.
    #[domain_event(map = map_a, map = map_a)]
    OrderVoided(OrderCancelled),
    // Each contract once.
    #[domain_event(contract = OrderCancelledV1, contract = RefundRequestedV1, contract = OrderCancelledV1)]
    OrderRevoked(OrderCancelled),
    #[domain_event(local, local)]
    PricesRecalculated,
}

fn main() {}
