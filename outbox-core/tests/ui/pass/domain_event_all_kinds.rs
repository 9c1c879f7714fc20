use outbox_kernel::clock::SystemClock;
use outbox_kernel::mapping::{ContractMapper, ContractSink, DerivedMapping, MapError};
use outbox_kernel::{DomainEvent, EnvelopeConfig, IntegrationEvent};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

mod contracts {
    use super::*;

    #[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
    #[integration_event(name = "bookstore.ordering.order-placed.v1", key = order_id)]
    pub struct OrderPlacedV1 {
        pub order_id: u64,
    }

    #[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
    #[integration_event(name = "bookstore.billing.refund-requested.v1", key = order_id)]
    pub struct RefundRequestedV1 {
        pub order_id: u64,
    }
}

use contracts::{OrderPlacedV1, RefundRequestedV1};

pub struct OrderPlaced {
    pub order_id: u64,
}

impl From<&OrderPlaced> for OrderPlacedV1 {
    fn from(event: &OrderPlaced) -> Self {
        Self {
            order_id: event.order_id,
        }
    }
}

impl From<&OrderPlaced> for RefundRequestedV1 {
    fn from(event: &OrderPlaced) -> Self {
        Self {
            order_id: event.order_id,
        }
    }
}

mod mapping {
    use super::*;

    pub fn map_placed(event: &OrderPlaced, out: &mut ContractSink<'_>) -> Result<(), MapError> {
        out.emit(&OrderPlacedV1::from(event))
    }

    pub fn map_whole(event: &OrderingEvent, out: &mut ContractSink<'_>) -> Result<(), MapError> {
        match event {
            OrderingEvent::Renamed { order_id, .. } => out.emit(&OrderPlacedV1 {
                order_id: *order_id,
            }),
            other => Err(MapError::rejected(other.event_name())),
        }
    }
}

// Functions named like the locals of the generated code: they still resolve to these.
fn out(_: &OrderPlaced, _: &mut ContractSink<'_>) -> Result<(), MapError> {
    Ok(())
}

fn payload(_: &OrderingEvent, _: &mut ContractSink<'_>) -> Result<(), MapError> {
    Ok(())
}

#[derive(DomainEvent)]
pub enum OrderingEvent {
    /// One contract.
    #[domain_event(contract = OrderPlacedV1)]
    OrderPlaced(OrderPlaced),
    /// Several contracts, one by a path with a module.
    #[domain_event(contract = OrderPlacedV1, contract = contracts::RefundRequestedV1)]
    OrderReplaced(OrderPlaced),
    /// Paths in string literals.
    #[domain_event(contract = "contracts::OrderPlacedV1")]
    OrderCopied(OrderPlaced),
    #[domain_event(map = mapping::map_placed)]
    OrderMapped(OrderPlaced),
    #[domain_event(map = "mapping::map_whole")]
    Renamed { order_id: u64, name: String },
    #[domain_event(map = mapping::map_whole)]
    Tuple(u64, u64),
    #[domain_event(map = out)]
    Hygiene(OrderPlaced),
    #[domain_event(map = payload)]
    Hygiene2,
    #[domain_event(local)]
    PricesRecalculated { order_id: u64 },
    #[domain_event(local)]
    r#Viewed,
}

// The attribute's values may come from `macro_rules!` fragments.
macro_rules! domain_event {
    ($name:ident, $contract:path, $map:expr) => {
        #[derive(DomainEvent)]
        pub enum $name {
            #[domain_event(contract = $contract)]
            A(OrderPlaced),
            #[domain_event(map = $map)]
            B(OrderPlaced),
        }
    };
}

domain_event!(FromMacro, contracts::OrderPlacedV1, mapping::map_placed);

// An enum without variants maps nothing (it has no values).
#[derive(DomainEvent)]
pub enum NothingHappens {}

fn assert_domain_event<E: DomainEvent>() {}

fn main() {
    assert_domain_event::<NothingHappens>();
    let (config, clock) = (EnvelopeConfig::default(), SystemClock);
    let mut sink = ContractSink::new(&config, &clock);
    let placed = || OrderPlaced { order_id: 1 };
    for event in [
        OrderingEvent::OrderPlaced(placed()),
        OrderingEvent::OrderReplaced(placed()),
        OrderingEvent::OrderCopied(placed()),
        OrderingEvent::OrderMapped(placed()),
        OrderingEvent::Renamed {
            order_id: 1,
            name: String::new(),
        },
        OrderingEvent::Hygiene(placed()),
        OrderingEvent::Hygiene2,
        OrderingEvent::PricesRecalculated { order_id: 1 },
        OrderingEvent::Viewed,
    ] {
        DerivedMapping.map(&event, &mut sink).expect("maps");
    }
    assert_eq!(sink.len(), 6);
    let error = DerivedMapping.map(&OrderingEvent::Tuple(1, 2), &mut sink);
    assert!(matches!(error, Err(MapError::Rejected { .. })));
    assert_eq!(OrderingEvent::Viewed.event_name(), "Viewed");
    assert!(OrderingEvent::PricesRecalculated { order_id: 1 }.is_local());

    DerivedMapping
        .map(&FromMacro::A(placed()), &mut sink)
        .expect("maps");
    DerivedMapping
        .map(&FromMacro::B(placed()), &mut sink)
        .expect("maps");
    assert_eq!(sink.len(), 8);
}
