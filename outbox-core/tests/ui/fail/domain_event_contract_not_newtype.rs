use outbox_kernel::DomainEvent;

pub struct OrderPlacedV1;
pub struct OrderPaidV1;
pub struct OrderShippedV1;

// `contract = …` converts the payload of a newtype variant; other variants use `map = …`.
#[derive(DomainEvent)]
pub enum OrderingEvent {
    #[domain_event(contract = OrderPlacedV1)]
    OrderPlaced { order_id: u64 },
    #[domain_event(contract = OrderPaidV1)]
    OrderPaid,
    #[domain_event(contract = OrderShippedV1)]
    OrderShipped(u64, String),
}

fn main() {}
