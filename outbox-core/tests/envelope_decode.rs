//! Encoding and decoding contracts through envelopes: typed errors that name what is wrong.

use outbox_kernel::{DecodeError, EncodeError, Envelope, EnvelopeConfig, IntegrationEvent};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
struct LineV1 {
    book_id: String,
    quantity: u32,
}

/// An order was placed.
#[derive(Debug, Clone, PartialEq, IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "test.ordering.order-placed.v1", key = order_id)]
struct OrderPlacedV1 {
    order_id: u64,
    lines: Vec<LineV1>,
}

/// Version 2 of the same contract.
#[derive(Debug, Clone, PartialEq, IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "test.ordering.order-placed.v2", key = order_id)]
struct OrderPlacedV2 {
    order_id: u64,
    lines: Vec<LineV1>,
    currency: String,
}

/// Another contract.
#[derive(Debug, Clone, PartialEq, IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "test.ordering.order-cancelled.v1", key = order_id)]
struct OrderCancelledV1 {
    order_id: u64,
}

/// A tagged enum contract.
#[derive(Debug, Clone, PartialEq, IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "test.shipping.parcel-changed.v1", key = parcel_id)]
#[serde(tag = "kind", rename_all = "kebab-case")]
enum ParcelChangedV1 {
    Sent { parcel_id: String, carrier: String },
    Lost { parcel_id: String },
}

/// Fails to serialize: a map with non-string keys.
#[derive(Debug, Clone, IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "test.ordering.broken.v1", key = id)]
struct BrokenV1 {
    id: u64,
    by_pair: std::collections::HashMap<(u8, u8), u8>,
}

fn placed() -> OrderPlacedV1 {
    OrderPlacedV1 {
        order_id: 7,
        lines: vec![
            LineV1 {
                book_id: "dune".into(),
                quantity: 2,
            },
            LineV1 {
                book_id: "emma".into(),
                quantity: 1,
            },
        ],
    }
}

#[test]
fn encode_fills_the_envelope_from_the_contract() {
    let before = chrono::Utc::now();
    let envelope = Envelope::from_event(&placed()).unwrap();
    assert_eq!(envelope.event_type, "test.ordering.order-placed.v1");
    assert_eq!(envelope.version, 1);
    assert_eq!(envelope.aggregate_type, "order");
    assert_eq!(envelope.aggregate_id, "7");
    assert_eq!(envelope.message_id.get_version_num(), 7, "UUIDv7");
    assert!(envelope.occurred_at >= before);
    assert_eq!(envelope.correlation_id, None);
    assert_eq!(envelope.causation_id, None);
    assert!(envelope.headers.is_empty());
    assert_eq!(envelope.payload, serde_json::to_value(placed()).unwrap());
    assert_eq!(envelope.decode::<OrderPlacedV1>().unwrap(), placed());

    let other = Envelope::from_event(&placed()).unwrap();
    assert!(
        other.message_id > envelope.message_id,
        "UUIDv7 ids grow with time"
    );
}

#[test]
fn wrong_type_and_wrong_version_are_told_apart() {
    let envelope = Envelope::from_event(&placed()).unwrap();
    assert_eq!(
        envelope.decode::<OrderCancelledV1>().unwrap_err(),
        DecodeError::WrongEventType {
            expected: "test.ordering.order-cancelled.v1",
            found: "test.ordering.order-placed.v1".into()
        }
    );
    assert_eq!(
        envelope.decode::<OrderPlacedV2>().unwrap_err(),
        DecodeError::WrongVersion {
            name: "test.ordering.order-placed",
            expected: 2,
            found: 1
        }
    );
    let message = envelope.decode::<OrderPlacedV2>().unwrap_err().to_string();
    assert!(
        message.contains("expected version 2, found version 1"),
        "{message}"
    );
}

#[test]
fn missing_and_invalid_fields_are_named_by_path() {
    let mut envelope = Envelope::from_event(&placed()).unwrap();
    let mut payload = envelope.payload.to_value().unwrap();
    payload["lines"][1]
        .as_object_mut()
        .unwrap()
        .remove("quantity");
    envelope.payload = payload.into();
    let error = envelope.decode::<OrderPlacedV1>().unwrap_err();
    assert_eq!(
        error,
        DecodeError::MissingField {
            event_type: "test.ordering.order-placed.v1",
            field: "lines[1].quantity".into()
        }
    );
    assert!(
        error
            .to_string()
            .contains("missing field `lines[1].quantity`")
    );

    envelope.payload = json!({"lines": []}).into();
    assert_eq!(
        envelope.decode::<OrderPlacedV1>().unwrap_err(),
        DecodeError::MissingField {
            event_type: "test.ordering.order-placed.v1",
            field: "order_id".into()
        }
    );

    envelope.payload =
        json!({"order_id": 7, "lines": [{"book_id": "dune", "quantity": -1}]}).into();
    match envelope.decode::<OrderPlacedV1>().unwrap_err() {
        DecodeError::InvalidField { field, message, .. } => {
            assert_eq!(field, "lines[0].quantity");
            assert!(message.contains("-1"), "{message}");
        }
        other => panic!("unexpected {other:?}"),
    }

    envelope.payload = json!("just a string").into();
    assert!(matches!(
        envelope.decode::<OrderPlacedV1>().unwrap_err(),
        DecodeError::InvalidField { field, .. } if field == "."
    ));
}

#[test]
fn tagged_enums_round_trip_and_report_unknown_variants() {
    let sent = ParcelChangedV1::Sent {
        parcel_id: "p-9".into(),
        carrier: "dhl".into(),
    };
    let envelope = Envelope::from_event(&sent).unwrap();
    assert_eq!(envelope.aggregate_type, "parcel");
    assert_eq!(envelope.aggregate_id, "p-9");
    assert_eq!(envelope.payload.to_value().unwrap()["kind"], "sent");
    assert_eq!(envelope.decode::<ParcelChangedV1>().unwrap(), sent);

    let mut envelope = envelope;
    envelope.payload = json!({"kind": "exploded", "parcel_id": "p-9"}).into();
    assert!(matches!(
        envelope.decode::<ParcelChangedV1>().unwrap_err(),
        DecodeError::InvalidField { message, .. } if message.contains("exploded")
    ));
}

#[test]
fn payload_limit_is_enforced_on_both_sides() {
    let size = serde_json::to_vec(&placed()).unwrap().len();
    let exact = EnvelopeConfig::default().with_max_payload_bytes(size);
    exact.encode(&placed()).unwrap();
    match exact.with_max_payload_bytes(size - 1).encode(&placed()) {
        Err(EncodeError::PayloadTooLarge {
            event_type,
            size: found,
            limit,
        }) => {
            assert_eq!(event_type, "test.ordering.order-placed.v1");
            assert_eq!(found, size);
            assert_eq!(limit, size - 1);
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(
        EnvelopeConfig::default().max_payload_bytes(),
        256 * 1024,
        "documented default"
    );

    let big = OrderPlacedV1 {
        order_id: 1,
        lines: vec![
            LineV1 {
                book_id: "x".repeat(1024),
                quantity: 1
            };
            300
        ],
    };
    assert!(matches!(
        Envelope::from_event(&big),
        Err(EncodeError::PayloadTooLarge { limit: 262_144, .. })
    ));

    let bytes = serde_json::to_vec(&placed()).unwrap();
    let tight = EnvelopeConfig::default().with_max_payload_bytes(10);
    assert_eq!(
        tight.decode_payload_slice::<OrderPlacedV1>(&bytes),
        Err(DecodeError::PayloadTooLarge {
            size: bytes.len(),
            limit: 10
        })
    );
    assert_eq!(
        EnvelopeConfig::default()
            .decode_payload_slice::<OrderPlacedV1>(&bytes)
            .unwrap(),
        placed()
    );
    assert!(matches!(
        EnvelopeConfig::default().decode_payload_slice::<OrderPlacedV1>(b"{\"order_id\": 1,"),
        Err(DecodeError::MalformedJson { .. })
    ));
}

/// One limit on every path that accepts an envelope (issue 15, item 3): `decode` on an
/// envelope built elsewhere (a transport of the user's, `Consumer::deliver`) refuses what the
/// wire path (`from_binary`, `decode_json`) refuses, before parsing anything.
#[test]
fn the_limits_apply_to_every_path_that_accepts_an_envelope() {
    let mut envelope = Envelope::from_event(&placed()).unwrap();
    let size = envelope.payload.len();
    let tight = EnvelopeConfig::default().with_max_payload_bytes(size - 1);
    let too_large = || DecodeError::PayloadTooLarge {
        size,
        limit: size - 1,
    };
    assert_eq!(tight.decode::<OrderPlacedV1>(&envelope), Err(too_large()));
    let json = envelope.to_json_vec().unwrap();
    assert!(matches!(
        EnvelopeConfig::default()
            .with_max_payload_bytes(json.len() - 1)
            .decode_json(&json),
        Err(DecodeError::PayloadTooLarge { .. })
    ));
    let wire = outbox_kernel::cloudevents::to_binary(&envelope).unwrap();
    assert_eq!(
        outbox_kernel::cloudevents::from_binary(
            wire.headers.iter().map(|(k, v)| (k.as_ref(), v.as_str())),
            &wire.body,
            &tight
        ),
        Err(outbox_kernel::cloudevents::CloudEventsError::Decode(
            too_large()
        ))
    );
    assert_eq!(
        EnvelopeConfig::default()
            .decode::<OrderPlacedV1>(&envelope)
            .unwrap(),
        placed()
    );

    // A payload over the default limit, built without `encode` (a field is public).
    envelope.payload = json!({ "order_id": 1, "lines": [], "pad": "x".repeat(300 * 1024) }).into();
    assert!(matches!(
        envelope.decode::<OrderPlacedV1>(),
        Err(DecodeError::PayloadTooLarge { limit: 262_144, .. })
    ));

    // Metadata: headers and text fields from outside are bounded too.
    let mut envelope = Envelope::from_event(&placed()).unwrap();
    envelope
        .headers
        .insert("x-big".into(), "v".repeat(70 * 1024));
    let size = envelope.metadata_len();
    assert!(size > 70 * 1024);
    assert_eq!(
        EnvelopeConfig::default().decode::<OrderPlacedV1>(&envelope),
        Err(DecodeError::MetadataTooLarge {
            size,
            limit: 64 * 1024
        })
    );
    assert_eq!(
        EnvelopeConfig::default().max_metadata_bytes(),
        64 * 1024,
        "documented default"
    );
    let wide = EnvelopeConfig::default().with_max_metadata_bytes(1024 * 1024);
    assert_eq!(wide.decode::<OrderPlacedV1>(&envelope).unwrap(), placed());
    let wire = outbox_kernel::cloudevents::to_binary(&envelope).unwrap();
    let from_wire = |config: &EnvelopeConfig| {
        outbox_kernel::cloudevents::from_binary(
            wire.headers.iter().map(|(k, v)| (k.as_ref(), v.as_str())),
            &wire.body,
            config,
        )
    };
    assert!(matches!(
        from_wire(&EnvelopeConfig::default()),
        Err(outbox_kernel::cloudevents::CloudEventsError::Decode(
            DecodeError::MetadataTooLarge { .. }
        ))
    ));
    assert_eq!(from_wire(&wide).unwrap(), envelope);
    // An envelope at the limit travels: the transport's own headers (ce-id, ce-time,
    // ce-source, …) do not count against it (found by outbox-fuzz: a message accepted at
    // the limit was refused once re-encoded, which adds the headers a sender left out).
    let at_limit = EnvelopeConfig::default().with_max_metadata_bytes(envelope.metadata_len());
    assert_eq!(
        at_limit.decode::<OrderPlacedV1>(&envelope).unwrap(),
        placed()
    );
    assert_eq!(from_wire(&at_limit).unwrap(), envelope);
    let below = EnvelopeConfig::default().with_max_metadata_bytes(envelope.metadata_len() - 1);
    assert!(matches!(
        from_wire(&below),
        Err(outbox_kernel::cloudevents::CloudEventsError::Decode(
            DecodeError::MetadataTooLarge { .. }
        ))
    ));
}

#[test]
fn serialization_failure_is_typed() {
    let broken = BrokenV1 {
        id: 1,
        by_pair: [((1, 2), 3)].into_iter().collect(),
    };
    match Envelope::from_event(&broken) {
        Err(EncodeError::Serialize { event_type, .. }) => {
            assert_eq!(event_type, BrokenV1::EVENT_TYPE)
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn metadata_builders_set_fields() {
    let correlation = uuid::Uuid::now_v7();
    let cause = uuid::Uuid::now_v7();
    let at = chrono::DateTime::from_timestamp(1_700_000_000, 5).unwrap();
    let envelope = Envelope::from_event(&placed())
        .unwrap()
        .with_correlation_id(correlation)
        .with_causation_id(cause)
        .with_trace_context("00-aa-bb-01".into(), Some("k=v".into()))
        .with_header("x-tenant", "acme")
        .with_occurred_at(at);
    assert_eq!(envelope.correlation_id, Some(correlation));
    assert_eq!(envelope.causation_id, Some(cause));
    assert_eq!(envelope.traceparent.as_deref(), Some("00-aa-bb-01"));
    assert_eq!(envelope.tracestate.as_deref(), Some("k=v"));
    assert_eq!(envelope.headers["x-tenant"], "acme");
    assert_eq!(envelope.occurred_at, at);
}
