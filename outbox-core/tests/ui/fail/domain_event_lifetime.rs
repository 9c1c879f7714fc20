use outbox_kernel::DomainEvent;

// A domain event is kept by the unit of work until commit: it cannot borrow.
#[derive(DomainEvent)]
pub enum OrderingEvent<'a, T> {
    #[domain_event(local)]
    Renamed {
        order_id: u64,
        name: &'a str,
        extra: T,
    },
}

fn main() {}
