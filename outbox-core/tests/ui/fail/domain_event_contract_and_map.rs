use outbox_kernel::DomainEvent;
use outbox_kernel::mapping::{ContractSink, MapError};

pub struct OrderCancelled;
pub struct OrderCancelledV1;
pub struct RefundRequestedV1;

fn map_refund(_: &OrderCancelled, _: &mut ContractSink<'_>) -> Result<(), MapError> {
    Ok(())
}

// `contract` and `map` do not combine: the mapping function emits every contract itself.
#[derive(DomainEvent)]
pub enum OrderingEvent {
    #[domain_event(contract = OrderCancelledV1, map = map_refund, contract = RefundRequestedV1)]
    OrderCancelled(OrderCancelled),
}

fn main() {}
