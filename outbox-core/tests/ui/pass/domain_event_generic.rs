use std::fmt::Display;

use outbox_kernel::clock::SystemClock;
use outbox_kernel::mapping::{ContractMapper, ContractSink, DerivedMapping, MapError};
use outbox_kernel::{DomainEvent, EnvelopeConfig, IntegrationEvent};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "bookstore.audit.value-changed.v1", key = value)]
pub struct ValueChangedV1 {
    pub value: String,
}

pub struct Change<T> {
    pub value: T,
}

impl<T: Display> From<&Change<T>> for ValueChangedV1 {
    fn from(change: &Change<T>) -> Self {
        Self {
            value: change.value.to_string(),
        }
    }
}

fn map_batch<T: Display, const N: usize>(
    batch: &[T; N],
    out: &mut ContractSink<'_>,
) -> Result<(), MapError> {
    for value in batch {
        out.emit(&ValueChangedV1 {
            value: value.to_string(),
        })?;
    }
    Ok(())
}

// Type and const parameters are accepted; the derive adds `T: Send + 'static`, the enum
// declares what its mapping needs.
#[derive(DomainEvent)]
pub enum Audited<T: Display, const N: usize>
where
    T: Clone,
{
    #[domain_event(contract = ValueChangedV1)]
    Changed(Change<T>),
    #[domain_event(map = map_batch::<T, N>)]
    Batch([T; N]),
    #[domain_event(local)]
    Unchanged,
}

fn main() {
    let (config, clock) = (EnvelopeConfig::default(), SystemClock);
    let mut sink = ContractSink::new(&config, &clock);
    DerivedMapping
        .map(&Audited::<u32, 2>::Changed(Change { value: 1 }), &mut sink)
        .expect("maps");
    DerivedMapping
        .map(&Audited::<u32, 2>::Batch([2, 3]), &mut sink)
        .expect("maps");
    DerivedMapping
        .map(&Audited::<u32, 2>::Unchanged, &mut sink)
        .expect("maps");
    let values: Vec<_> = sink
        .into_envelopes()
        .into_iter()
        .map(|envelope| envelope.aggregate_id)
        .collect();
    assert_eq!(values, ["1", "2", "3"]);
}
