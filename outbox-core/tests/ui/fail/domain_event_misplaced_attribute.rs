use outbox_kernel::DomainEvent;

#[derive(DomainEvent)]
#[domain_event(local)]
pub enum OrderingEvent {
    #[domain_event(local)]
    PricesRecalculated {
        #[domain_event(local)]
        order_id: u64,
    },
}

fn main() {}
