use outbox_kernel::DomainEvent;

pub struct OrderPlaced;

#[derive(DomainEvent)]
pub enum OrderingEvent {
    #[domain_event(contract = 1)]
    A(OrderPlaced),
    #[domain_event(contract = "not a path")]
    B(OrderPlaced),
    #[domain_event(map = |_, _| Ok(()))]
    C(OrderPlaced),
    #[domain_event(contract)]
    D(OrderPlaced),
    #[domain_event(map(map_d))]
    E(OrderPlaced),
    #[domain_event(local = true)]
    F,
}

fn main() {}
