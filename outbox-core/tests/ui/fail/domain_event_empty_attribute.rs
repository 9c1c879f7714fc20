use outbox_kernel::DomainEvent;

#[derive(DomainEvent)]
pub enum OrderingEvent {
    #[domain_event()]
    OrderPlaced { order_id: u64 },
    #[domain_event]
    OrderPaid { order_id: u64 },
    #[domain_event = "local"]
    PricesRecalculated,
}

fn main() {}
