use outbox_kernel::DomainEvent;

#[derive(DomainEvent)]
pub struct OrderPlaced {
    pub order_id: u64,
}

#[derive(DomainEvent)]
pub union OrderId {
    pub numeric: u64,
    pub legacy: i64,
}

fn main() {}
