//! Run-time behaviour of `#[derive(DomainEvent)]`: the envelopes each kind of variant emits
//! through `DerivedMapping`, errors of mapping functions and of encoding, `event_name` and
//! `is_local`.

use chrono::{DateTime, TimeDelta, Utc};
use outbox_kernel::clock::ManualClock;
use outbox_kernel::mapping::{ContractMapper, ContractSink, DerivedMapping, MapError};
use outbox_kernel::{DomainEvent, EncodeError, Envelope, EnvelopeConfig, IntegrationEvent};
use pretty_assertions::assert_eq;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

// Contracts.

#[derive(Debug, PartialEq, IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "domain-test.ordering.order-placed.v1", key = order_id)]
struct OrderPlacedV1 {
    order_id: u64,
    total_cents: i64,
}

#[derive(Debug, PartialEq, IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "domain-test.ordering.order-cancelled.v2", key = order_id)]
struct OrderCancelledV2 {
    order_id: u64,
    reason: String,
}

#[derive(Debug, PartialEq, IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "domain-test.billing.refund-requested.v1", key = payment_id)]
struct RefundRequestedV1 {
    payment_id: String,
    amount_cents: i64,
}

#[derive(Debug, PartialEq, IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "domain-test.shipping.order-shipped.v1", key = order_id)]
struct OrderShippedV1 {
    order_id: u64,
    carrier: String,
}

#[derive(Debug, PartialEq, IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "domain-test.ordering.note-added.v1", key = order_id)]
struct NoteAddedV1 {
    order_id: u64,
    note: String,
}

// Domain events.

#[derive(Debug, Clone)]
struct OrderPlaced {
    order_id: u64,
    total_cents: i64,
}

#[derive(Debug, Clone)]
struct OrderCancelled {
    order_id: u64,
    payment_id: String,
    refund_cents: i64,
    reason: String,
}

#[derive(Debug, Clone)]
struct Shipped {
    order_id: u64,
    carrier: Option<String>,
}

#[derive(Debug, Clone, DomainEvent)]
enum OrderingEvent {
    #[domain_event(contract = OrderPlacedV1)]
    OrderPlaced(OrderPlaced),
    #[domain_event(contract = OrderCancelledV2, contract = RefundRequestedV1)]
    OrderCancelled(OrderCancelled),
    #[domain_event(map = mapping::map_shipped)]
    OrderShipped(Shipped),
    #[domain_event(map = mapping::map_note)]
    NoteAdded { order_id: u64, note: String },
    #[domain_event(local)]
    PricesRecalculated { order_id: u64 },
    #[domain_event(local)]
    Viewed,
}

/// The reviewed mappings.
mod mapping {
    use super::*;

    impl From<&OrderPlaced> for OrderPlacedV1 {
        fn from(event: &OrderPlaced) -> Self {
            Self {
                order_id: event.order_id,
                total_cents: event.total_cents,
            }
        }
    }

    impl From<&OrderCancelled> for OrderCancelledV2 {
        fn from(event: &OrderCancelled) -> Self {
            Self {
                order_id: event.order_id,
                reason: event.reason.clone(),
            }
        }
    }

    impl From<&OrderCancelled> for RefundRequestedV1 {
        fn from(event: &OrderCancelled) -> Self {
            Self {
                payment_id: event.payment_id.clone(),
                amount_cents: event.refund_cents,
            }
        }
    }

    /// Newtype variant: receives the payload.
    pub(super) fn map_shipped(event: &Shipped, out: &mut ContractSink<'_>) -> Result<(), MapError> {
        let carrier = event.carrier.clone().ok_or_else(|| {
            MapError::rejected(format!("order {} has no carrier", event.order_id))
        })?;
        out.emit(&OrderShippedV1 {
            order_id: event.order_id,
            carrier,
        })
    }

    /// Struct variant: receives the whole event.
    pub(super) fn map_note(
        event: &OrderingEvent,
        out: &mut ContractSink<'_>,
    ) -> Result<(), MapError> {
        match event {
            OrderingEvent::NoteAdded { note, .. } if note.trim().is_empty() => Ok(()),
            OrderingEvent::NoteAdded { order_id, note } => out.emit(&NoteAddedV1 {
                order_id: *order_id,
                note: note.clone(),
            }),
            other => Err(MapError::rejected(format!(
                "map_note called for {}",
                other.event_name()
            ))),
        }
    }
}

fn start() -> DateTime<Utc> {
    "2026-03-01T12:00:00.123456Z"
        .parse()
        .expect("a valid timestamp")
}

fn placed() -> OrderingEvent {
    OrderingEvent::OrderPlaced(OrderPlaced {
        order_id: 7,
        total_cents: 1999,
    })
}

fn cancelled() -> OrderingEvent {
    OrderingEvent::OrderCancelled(OrderCancelled {
        order_id: 7,
        payment_id: "pay-42".to_owned(),
        refund_cents: 1999,
        reason: "changed my mind".to_owned(),
    })
}

fn shipped(carrier: Option<&str>) -> OrderingEvent {
    OrderingEvent::OrderShipped(Shipped {
        order_id: 7,
        carrier: carrier.map(str::to_owned),
    })
}

fn note(text: &str) -> OrderingEvent {
    OrderingEvent::NoteAdded {
        order_id: 7,
        note: text.to_owned(),
    }
}

/// Maps `events` one by one, the clock moving one second before each, into one sink.
fn map_all(
    config: &EnvelopeConfig,
    clock: &ManualClock,
    events: &[OrderingEvent],
) -> Result<Vec<Envelope>, MapError> {
    let mut sink = ContractSink::new(config, clock);
    for event in events {
        clock.advance(TimeDelta::seconds(1));
        DerivedMapping.map(event, &mut sink)?;
    }
    Ok(sink.into_envelopes())
}

/// (event type, aggregate type, aggregate id, occurred_at) of each envelope.
fn summary(envelopes: &[Envelope]) -> Vec<(&str, &str, &str, DateTime<Utc>)> {
    envelopes
        .iter()
        .map(|e| {
            (
                e.event_type.as_str(),
                e.aggregate_type.as_str(),
                e.aggregate_id.as_str(),
                e.occurred_at,
            )
        })
        .collect()
}

#[test]
fn each_kind_of_variant_emits_its_contracts_in_order() {
    let config = EnvelopeConfig::default();
    let clock = ManualClock::starting_at(start());
    let events = [
        placed(),
        OrderingEvent::PricesRecalculated { order_id: 7 },
        cancelled(),
        OrderingEvent::Viewed,
        shipped(Some("DHL")),
        note("leave at the door"),
        note("   "),
    ];
    let envelopes = map_all(&config, &clock, &events).expect("every event maps");
    let at = |seconds| start() + TimeDelta::seconds(seconds);
    assert_eq!(
        summary(&envelopes),
        [
            ("domain-test.ordering.order-placed.v1", "order", "7", at(1)),
            (
                "domain-test.ordering.order-cancelled.v2",
                "order",
                "7",
                at(3)
            ),
            (
                "domain-test.billing.refund-requested.v1",
                "payment",
                "pay-42",
                at(3)
            ),
            ("domain-test.shipping.order-shipped.v1", "order", "7", at(5)),
            ("domain-test.ordering.note-added.v1", "order", "7", at(6)),
        ]
    );

    assert_eq!(
        envelopes[0].decode::<OrderPlacedV1>().expect("decodes"),
        OrderPlacedV1 {
            order_id: 7,
            total_cents: 1999
        }
    );
    assert_eq!(envelopes[1].version, 2);
    assert_eq!(
        envelopes[1].decode::<OrderCancelledV2>().expect("decodes"),
        OrderCancelledV2 {
            order_id: 7,
            reason: "changed my mind".to_owned()
        }
    );
    assert_eq!(
        envelopes[2].decode::<RefundRequestedV1>().expect("decodes"),
        RefundRequestedV1 {
            payment_id: "pay-42".to_owned(),
            amount_cents: 1999
        }
    );
    assert_eq!(
        envelopes[3].decode::<OrderShippedV1>().expect("decodes"),
        OrderShippedV1 {
            order_id: 7,
            carrier: "DHL".to_owned()
        }
    );
    assert_eq!(
        envelopes[4].decode::<NoteAddedV1>().expect("decodes"),
        NoteAddedV1 {
            order_id: 7,
            note: "leave at the door".to_owned()
        }
    );
    assert_ne!(envelopes[1].message_id, envelopes[2].message_id);
}

#[test]
fn local_variants_emit_nothing() {
    let config = EnvelopeConfig::default();
    let clock = ManualClock::starting_at(start());
    for event in [
        OrderingEvent::PricesRecalculated { order_id: 7 },
        OrderingEvent::Viewed,
    ] {
        if let OrderingEvent::PricesRecalculated { order_id } = &event {
            assert_eq!(*order_id, 7);
        }
        let mut sink = ContractSink::new(&config, &clock);
        event.map_contracts(&mut sink).expect("a local event maps");
        assert!(sink.is_empty(), "{event:?}");
    }
}

#[test]
fn a_mapping_function_error_propagates() {
    let config = EnvelopeConfig::default();
    let clock = ManualClock::starting_at(start());
    let error = map_all(&config, &clock, &[placed(), shipped(None)])
        .expect_err("an order shipped without a carrier is rejected");
    match error {
        MapError::Rejected { reason } => assert_eq!(reason, "order 7 has no carrier"),
        other => panic!("expected MapError::Rejected, got {other:?}"),
    }
}

#[test]
fn an_oversized_contract_is_an_encode_error() {
    let clock = ManualClock::starting_at(start());
    let size = serde_json::to_vec(&OrderCancelledV2 {
        order_id: 7,
        reason: "changed my mind".to_owned(),
    })
    .expect("serializes")
    .len();
    // The cancellation fits, the refund request (longer) does not.
    let config = EnvelopeConfig::default().with_max_payload_bytes(size);
    let mut sink = ContractSink::new(&config, &clock);
    let error = DerivedMapping
        .map(&cancelled(), &mut sink)
        .expect_err("the refund request is over the limit");
    match error {
        MapError::Encode(EncodeError::PayloadTooLarge {
            event_type, limit, ..
        }) => {
            assert_eq!(event_type, RefundRequestedV1::EVENT_TYPE);
            assert_eq!(limit, size);
        }
        other => panic!("expected MapError::Encode(PayloadTooLarge), got {other:?}"),
    }
    // The unit of work rolls back on the error; what was emitted before it is discarded
    // with the sink.
    assert_eq!(sink.len(), 1);
}

#[test]
fn event_name_and_is_local() {
    for (event, name, local) in [
        (placed(), "OrderPlaced", false),
        (cancelled(), "OrderCancelled", false),
        (shipped(None), "OrderShipped", false),
        (note("x"), "NoteAdded", false),
        (
            OrderingEvent::PricesRecalculated { order_id: 7 },
            "PricesRecalculated",
            true,
        ),
        (OrderingEvent::Viewed, "Viewed", true),
    ] {
        assert_eq!(event.event_name(), name);
        assert_eq!(event.is_local(), local, "{name}");
    }
}

/// A generic domain event, mapped by a generic function. The derive adds `T: Send + 'static`;
/// the bounds the mapping needs are declared on the enum.
#[derive(Debug, DomainEvent)]
enum Audited<T: ToString> {
    #[domain_event(map = map_audited::<T>)]
    Changed(T),
    #[domain_event(local)]
    Unchanged,
}

fn map_audited<T: ToString>(value: &T, out: &mut ContractSink<'_>) -> Result<(), MapError> {
    out.emit(&NoteAddedV1 {
        order_id: 0,
        note: value.to_string(),
    })
}

#[test]
fn generic_enums_map() {
    let config = EnvelopeConfig::default();
    let clock = ManualClock::starting_at(start());
    let mut sink = ContractSink::new(&config, &clock);
    DerivedMapping
        .map(&Audited::Changed(42_u32), &mut sink)
        .expect("maps");
    DerivedMapping
        .map(&Audited::<u32>::Unchanged, &mut sink)
        .expect("maps");
    let envelopes = sink.into_envelopes();
    assert_eq!(envelopes.len(), 1);
    assert_eq!(envelopes[0].payload.to_value().expect("json")["note"], "42");
    assert_eq!(Audited::Changed("x").event_name(), "Changed");
    assert!(Audited::<String>::Unchanged.is_local());
}
