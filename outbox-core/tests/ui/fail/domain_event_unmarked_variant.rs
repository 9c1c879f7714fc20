use outbox_kernel::DomainEvent;
use outbox_kernel::EnvelopeConfig;
use outbox_kernel::clock::SystemClock;
use outbox_kernel::mapping::{ContractMapper, ContractSink, DerivedMapping};

// Adding a variant without deciding what becomes of it does not compile.
#[derive(DomainEvent)]
pub enum OrderingEvent {
    #[domain_event(local)]
    PricesRecalculated {
        order_id: u64,
    },
    OrderArchived {
        order_id: u64,
    },
    /// A doc comment is not a decision.
    OrderForgotten(u64),
}

fn main() {
    // The stub impl emitted with the errors keeps this compiling: only the missing
    // decisions are reported.
    let (config, clock) = (EnvelopeConfig::default(), SystemClock);
    let mut sink = ContractSink::new(&config, &clock);
    let _ = DerivedMapping.map(&OrderingEvent::OrderArchived { order_id: 1 }, &mut sink);
}
