//! A broker message as the inbox receives it: [`cloudevents::from_binary`] over its
//! headers and body, then what the consumer does with a message it cannot decode
//! ([`RawMessage::capture`] for the dead letter).

use outbox_core::{EnvelopeConfig, cloudevents};
use outbox_seaorm::inbox::dead_letter::RawMessage;
use outbox_seaorm::limits::{MAX_STORED_BODY_BYTES, MAX_STORED_HEADER_BYTES, MAX_STORED_HEADERS};

use crate::message::Message;

/// The limits the target decodes with: small, so that inputs of a few kilobytes reach them.
fn config() -> EnvelopeConfig {
    EnvelopeConfig::new()
        .with_max_payload_bytes(2_048)
        .with_max_metadata_bytes(1_024)
}

/// Decodes `data` (see [`Message::parse`]) as a CloudEvents binary-mode message.
///
/// # Panics
/// When an invariant breaks: an accepted message must be within the limits and map back
/// to itself through [`cloudevents::to_binary`]; a refused one must be captured for the
/// dead letter within [`RawMessage`]'s bounds, keeping the body's size.
pub fn run(data: &[u8]) {
    let message = Message::parse(data);
    let config = config();
    let decoded = cloudevents::from_binary(
        message
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_slice())),
        &message.body,
        &config,
    );
    match decoded {
        Ok(envelope) => {
            assert!(envelope.payload.len() <= config.max_payload_bytes());
            let binary = cloudevents::to_binary(&envelope)
                .unwrap_or_else(|error| panic!("an accepted envelope re-encodes: {error}"));
            let again = cloudevents::from_binary(
                binary
                    .headers
                    .iter()
                    .map(|(k, v)| (k.as_ref(), v.as_bytes())),
                &binary.body,
                &config,
            )
            .unwrap_or_else(|error| panic!("a re-encoded envelope decodes: {error}"));
            assert_eq!(again, envelope, "decode ∘ encode is the identity");
        }
        Err(_) => {
            // What a broker runner hands to the consumer: text headers.
            let headers: Vec<(String, String)> = message
                .headers
                .iter()
                .map(|(k, v)| (k.clone(), String::from_utf8_lossy(v).into_owned()))
                .collect();
            let raw = RawMessage::capture(&headers, &message.body);
            let cut = MAX_STORED_HEADER_BYTES + '…'.len_utf8();
            assert!(raw.headers.len() <= MAX_STORED_HEADERS);
            assert_eq!(raw.headers.len() + raw.headers_dropped, headers.len());
            for (name, value) in &raw.headers {
                assert!(name.len() <= cut && value.len() <= cut, "a header is cut");
            }
            // Lossy UTF-8: an invalid byte becomes U+FFFD, three bytes.
            assert!(raw.body.len() <= 3 * MAX_STORED_BODY_BYTES);
            assert_eq!(raw.body_bytes, message.body.len() as u64);
            assert_eq!(raw.body_sha256.len(), 64);
        }
    }
}
