//! An envelope in its JSON form ([`Envelope::to_json_vec`](outbox_core::Envelope::to_json_vec)),
//! read by [`EnvelopeConfig::decode_json`].

use outbox_core::EnvelopeConfig;

/// Decodes `data` as an envelope's JSON form.
///
/// # Panics
/// When an accepted document does not re-encode to the same envelope, or breaks the size
/// limit.
pub fn run(data: &[u8]) {
    let config = EnvelopeConfig::new().with_max_payload_bytes(4_096);
    let Ok(envelope) = config.decode_json(data) else {
        return;
    };
    assert!(data.len() <= config.max_payload_bytes());
    let json = envelope
        .to_json_vec()
        .unwrap_or_else(|error| panic!("an accepted envelope re-encodes: {error}"));
    let again = EnvelopeConfig::new()
        .decode_json(&json)
        .unwrap_or_else(|error| panic!("a re-encoded envelope decodes: {error}"));
    assert_eq!(again, envelope, "decode ∘ encode is the identity");
}
