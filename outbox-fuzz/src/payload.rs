//! A contract's payload as a broker message body carries it, decoded by
//! [`EnvelopeConfig::decode_payload_slice`] into the Bookstore's
//! [`OrderPlacedV1`] (nested structs, a list, UUIDs, constrained strings).

use bookstore_contracts::OrderPlacedV1;
use outbox_core::{Envelope, EnvelopeConfig};

/// Decodes `data` as an `OrderPlacedV1` payload.
///
/// # Panics
/// When an accepted payload breaks the size limit or does not re-encode to the same
/// contract through an envelope.
pub fn run(data: &[u8]) {
    let config = EnvelopeConfig::new().with_max_payload_bytes(4_096);
    let Ok(placed) = config.decode_payload_slice::<OrderPlacedV1>(data) else {
        return;
    };
    assert!(data.len() <= config.max_payload_bytes());
    let envelope = Envelope::from_event(&placed)
        .unwrap_or_else(|error| panic!("an accepted contract encodes: {error}"));
    let again: OrderPlacedV1 = EnvelopeConfig::new()
        .decode(&envelope)
        .unwrap_or_else(|error| panic!("an encoded contract decodes: {error}"));
    assert_eq!(again, placed, "decode ∘ encode is the identity");
}
