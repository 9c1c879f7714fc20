use outbox_kernel::DomainEvent;

pub struct OrderPlaced;
pub struct OrderPlacedV1;

#[derive(DomainEvent)]
pub enum OrderingEvent {
    #[domain_event(contracts = OrderPlacedV1)]
    OrderPlaced(OrderPlaced),
    #[domain_event(locale)]
    PricesRecalculated,
    #[domain_event(skip)]
    Viewed,
}

fn main() {}
