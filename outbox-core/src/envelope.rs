//! The [`Envelope`]: one integration event with its metadata, as it travels from the outbox
//! table through the broker to a consumer's inbox.
//!
//! Encoding an event ([`Envelope::from_event`], [`EnvelopeConfig::encode`]) serializes the
//! contract into a JSON payload and checks the payload size limit. Decoding
//! ([`Envelope::decode`], [`EnvelopeConfig::decode`]) checks the event type and version
//! before it touches the payload, and reports a missing or invalid field by its path.
//!
//! ```
//! use outbox_kernel::{DecodeError, Envelope, IntegrationEvent};
//! # use schemars::JsonSchema;
//! # use serde::{Deserialize, Serialize};
//! # #[derive(Debug, IntegrationEvent, Serialize, Deserialize, JsonSchema)]
//! # #[integration_event(name = "bookstore.catalog.book-added.v1", key = book_id)]
//! # pub struct BookAddedV1 { pub book_id: String, pub title: String }
//! # #[derive(Debug, IntegrationEvent, Serialize, Deserialize, JsonSchema)]
//! # #[integration_event(name = "bookstore.catalog.book-added.v2", key = book_id)]
//! # pub struct BookAddedV2 { pub book_id: String, pub title: String, pub isbn: String }
//!
//! let v1 = Envelope::from_event(&BookAddedV1 { book_id: "dune".into(), title: "Dune".into() })?;
//! match v1.decode::<BookAddedV2>() {
//!     Err(DecodeError::WrongVersion { expected: 2, found: 1, .. }) => {}
//!     other => panic!("unexpected {other:?}"),
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::BTreeMap;
use std::io;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::event::IntegrationEvent;
use crate::name::{EventType, EventTypeError};
use crate::payload::Payload;

/// Default limit of a serialized payload: 256 KiB.
pub const DEFAULT_MAX_PAYLOAD_BYTES: usize = 256 * 1024;

/// Default limit of an incoming message's metadata: 64 KiB (see
/// [`EnvelopeConfig::with_max_metadata_bytes`]).
pub const DEFAULT_MAX_METADATA_BYTES: usize = 64 * 1024;

/// One integration event with its metadata.
///
/// Fields are public for reading and for adjusting metadata; build a value with
/// [`Envelope::from_event`] (or [`EnvelopeConfig::encode`]), [`Envelope::from_parts`], or
/// decode one with [`EnvelopeConfig::decode_json`] or [`crate::cloudevents::from_binary`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Envelope {
    /// Unique id (UUIDv7): the consumer's dedup key and the broker's message id. Stable
    /// across relay retries.
    pub message_id: Uuid,
    /// Versioned contract name, e.g. `bookstore.ordering.order-placed.v1`.
    pub event_type: String,
    /// Contract version (the `N` of the event type's final `v<N>`).
    pub version: u32,
    /// When the event occurred (the producer's clock).
    pub occurred_at: DateTime<Utc>,
    /// Id shared by every message of one business flow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<Uuid>,
    /// Id of the message that caused this one (set by consumer units of work).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub causation_id: Option<Uuid>,
    /// W3C trace context `traceparent` of the producing span.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    /// W3C trace context `tracestate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracestate: Option<String>,
    /// Type of the aggregate the event is about, e.g. `order`.
    pub aggregate_type: String,
    /// Id of the aggregate: the partition / routing key and the unit of ordering.
    pub aggregate_id: String,
    /// Free-form headers carried to the consumer.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// The contract, serialized as JSON (kept as text, see [`Payload`]).
    pub payload: Payload,
}

/// Every field of an [`Envelope`], for building one from stored columns or transport
/// headers. [`Envelope::from_parts`] validates it.
#[derive(Debug, Clone, PartialEq)]
pub struct EnvelopeParts {
    /// See [`Envelope::message_id`].
    pub message_id: Uuid,
    /// See [`Envelope::event_type`].
    pub event_type: String,
    /// See [`Envelope::occurred_at`].
    pub occurred_at: DateTime<Utc>,
    /// See [`Envelope::correlation_id`].
    pub correlation_id: Option<Uuid>,
    /// See [`Envelope::causation_id`].
    pub causation_id: Option<Uuid>,
    /// See [`Envelope::traceparent`].
    pub traceparent: Option<String>,
    /// See [`Envelope::tracestate`].
    pub tracestate: Option<String>,
    /// See [`Envelope::aggregate_type`].
    pub aggregate_type: String,
    /// See [`Envelope::aggregate_id`].
    pub aggregate_id: String,
    /// See [`Envelope::headers`].
    pub headers: BTreeMap<String, String>,
    /// See [`Envelope::payload`].
    pub payload: Payload,
}

/// Why an event could not be turned into an envelope. Nothing was written or sent.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// The serialized payload exceeds the configured limit.
    #[error(
        "payload of `{event_type}` is {size} bytes, over the limit of {limit} bytes \
         (EnvelopeConfig::max_payload_bytes)"
    )]
    PayloadTooLarge {
        /// The event type.
        event_type: String,
        /// Serialized size in bytes.
        size: usize,
        /// The configured limit.
        limit: usize,
    },
    /// The contract's `Serialize` implementation failed.
    #[error("`{event_type}` could not be serialized: {source}")]
    Serialize {
        /// The event type.
        event_type: String,
        /// The serializer's error.
        #[source]
        source: serde_json::Error,
    },
}

/// Why an envelope or its payload could not be decoded. Each variant names what was
/// expected and what was found, so the message can be dead-lettered with a useful reason.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeError {
    /// The envelope carries another contract.
    #[error("expected event type `{expected}`, found `{found}`")]
    WrongEventType {
        /// The event type of the requested contract.
        expected: &'static str,
        /// The envelope's event type.
        found: String,
    },
    /// The envelope carries another version of the requested contract.
    #[error("`{name}`: expected version {expected}, found version {found}")]
    WrongVersion {
        /// The contract name (without version).
        name: &'static str,
        /// The requested version.
        expected: u32,
        /// The envelope's version.
        found: u32,
    },
    /// The envelope's event type breaks the grammar.
    #[error("invalid event type `{found}`: {reason}")]
    InvalidEventType {
        /// The event type found.
        found: String,
        /// Which rule it breaks.
        reason: EventTypeError,
    },
    /// The envelope's `version` field disagrees with its event type.
    #[error("event type `{event_type}` has version {from_type} but the envelope says {stated}")]
    VersionMismatch {
        /// The event type.
        event_type: String,
        /// Version parsed from the event type.
        from_type: u32,
        /// Version stated by the envelope.
        stated: u32,
    },
    /// The bytes are not JSON (or not an envelope).
    #[error("malformed JSON: {message}")]
    MalformedJson {
        /// The parser's message, with line and column.
        message: String,
    },
    /// A required field of the contract is missing.
    #[error("`{event_type}`: missing field `{field}`")]
    MissingField {
        /// The event type.
        event_type: &'static str,
        /// Path of the missing field, e.g. `books[0].quantity`.
        field: String,
    },
    /// A field of the contract has an invalid value.
    #[error("`{event_type}`: invalid field `{field}`: {message}")]
    InvalidField {
        /// The event type.
        event_type: &'static str,
        /// Path of the field, e.g. `books[0].quantity` (`.` for the payload itself).
        field: String,
        /// What is wrong with it.
        message: String,
    },
    /// The payload exceeds the configured limit; it was not parsed.
    #[error(
        "payload is {size} bytes, over the limit of {limit} bytes \
         (EnvelopeConfig::max_payload_bytes)"
    )]
    PayloadTooLarge {
        /// Size in bytes.
        size: usize,
        /// The configured limit.
        limit: usize,
    },
    /// The message's metadata (transport headers, or an envelope's text fields and
    /// headers) exceeds the configured limit; nothing was parsed.
    #[error(
        "message metadata is {size} bytes, over the limit of {limit} bytes \
         (EnvelopeConfig::max_metadata_bytes)"
    )]
    MetadataTooLarge {
        /// Size in bytes.
        size: usize,
        /// The configured limit.
        limit: usize,
    },
}

/// Encoding and decoding settings. Defaults: payload limit
/// [`DEFAULT_MAX_PAYLOAD_BYTES`] (256 KiB), metadata limit [`DEFAULT_MAX_METADATA_BYTES`]
/// (64 KiB).
///
/// The limits apply to every envelope that comes in: [`decode`](Self::decode) (and
/// [`Envelope::decode`], with the defaults), [`decode_json`](Self::decode_json),
/// [`decode_payload_slice`](Self::decode_payload_slice) and
/// [`cloudevents::from_binary`](crate::cloudevents::from_binary); the payload limit also
/// applies when an envelope is made ([`encode`](Self::encode)). The job dispatcher reads
/// envelopes from outbox rows, which were checked when they were written, and does not check
/// again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EnvelopeConfig {
    max_payload_bytes: usize,
    max_metadata_bytes: usize,
}

impl Default for EnvelopeConfig {
    fn default() -> Self {
        Self {
            max_payload_bytes: DEFAULT_MAX_PAYLOAD_BYTES,
            max_metadata_bytes: DEFAULT_MAX_METADATA_BYTES,
        }
    }
}

/// Counts bytes written, to measure a payload without keeping a copy.
struct ByteCounter(usize);

impl io::Write for ByteCounter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The size of `value` serialized as compact JSON, measured without keeping a copy.
///
/// # Errors
/// The serializer's error when `value` cannot be serialized.
pub fn serialized_len<T: Serialize + ?Sized>(value: &T) -> Result<usize, serde_json::Error> {
    let mut counter = ByteCounter(0);
    serde_json::to_writer(&mut counter, value)?;
    Ok(counter.0)
}

impl EnvelopeConfig {
    /// The default configuration.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the largest serialized payload accepted, in bytes (default 256 KiB).
    #[must_use]
    pub fn with_max_payload_bytes(mut self, limit: usize) -> Self {
        self.max_payload_bytes = limit;
        self
    }

    /// The largest serialized payload accepted, in bytes.
    pub fn max_payload_bytes(&self) -> usize {
        self.max_payload_bytes
    }

    /// Sets the largest metadata accepted from outside, in bytes (default 64 KiB): the sum
    /// of an envelope's text fields (event and aggregate type, aggregate id, trace context)
    /// and headers ([`Envelope::metadata_len`]), in [`decode`](Self::decode) and in
    /// [`cloudevents::from_binary`](crate::cloudevents::from_binary) alike (which also
    /// bounds the transport headers it reads, see
    /// [`max_transport_metadata_bytes`](Self::max_transport_metadata_bytes)).
    #[must_use]
    pub fn with_max_metadata_bytes(mut self, limit: usize) -> Self {
        self.max_metadata_bytes = limit;
        self
    }

    /// The largest metadata accepted from outside, in bytes.
    pub fn max_metadata_bytes(&self) -> usize {
        self.max_metadata_bytes
    }

    /// The most transport header bytes (names and values) that
    /// [`cloudevents::from_binary`](crate::cloudevents::from_binary) reads before it
    /// refuses a message: 3 × [`max_metadata_bytes`](Self::max_metadata_bytes) + 1 KiB.
    /// The envelope it decodes must then keep within `max_metadata_bytes` as
    /// [`Envelope::metadata_len`] counts it, like every other path. The transport carries
    /// more than those fields: the mapping's own headers, and the event type three times
    /// (`ce-type`, `ce-source`, `ce-dataschema`), so any envelope within the limit fits.
    pub fn max_transport_metadata_bytes(&self) -> usize {
        self.max_metadata_bytes
            .saturating_mul(3)
            .saturating_add(1024)
    }

    /// Checks a metadata size against the limit.
    ///
    /// # Errors
    /// [`DecodeError::MetadataTooLarge`] when `size` exceeds the limit.
    pub fn check_metadata_size(&self, size: usize) -> Result<(), DecodeError> {
        if size > self.max_metadata_bytes {
            return Err(DecodeError::MetadataTooLarge {
                size,
                limit: self.max_metadata_bytes,
            });
        }
        Ok(())
    }

    /// Checks an envelope's payload and metadata against the limits.
    ///
    /// # Errors
    /// [`DecodeError::PayloadTooLarge`] or [`DecodeError::MetadataTooLarge`].
    pub fn check_envelope(&self, envelope: &Envelope) -> Result<(), DecodeError> {
        self.check_payload_size(envelope.payload.get().len())?;
        self.check_metadata_size(envelope.metadata_len())
    }

    /// Checks a payload size against the limit.
    ///
    /// # Errors
    /// [`DecodeError::PayloadTooLarge`] when `size` exceeds the limit.
    pub fn check_payload_size(&self, size: usize) -> Result<(), DecodeError> {
        if size > self.max_payload_bytes {
            return Err(DecodeError::PayloadTooLarge {
                size,
                limit: self.max_payload_bytes,
            });
        }
        Ok(())
    }

    /// Wraps an event in a new envelope: a fresh UUIDv7 message id, `occurred_at` now, the
    /// event's aggregate type and id, no metadata.
    ///
    /// # Errors
    /// [`EncodeError::PayloadTooLarge`] over the limit, [`EncodeError::Serialize`] when the
    /// contract cannot be serialized.
    pub fn encode<E: IntegrationEvent>(&self, event: &E) -> Result<Envelope, EncodeError> {
        self.encode_at(event, Utc::now())
    }

    /// Like [`encode`](Self::encode) with an explicit `occurred_at` (from an injectable
    /// clock).
    ///
    /// # Errors
    /// As [`encode`](Self::encode).
    pub fn encode_at<E: IntegrationEvent>(
        &self,
        event: &E,
        occurred_at: DateTime<Utc>,
    ) -> Result<Envelope, EncodeError> {
        let serialize_error = |source| EncodeError::Serialize {
            event_type: E::EVENT_TYPE.to_owned(),
            source,
        };
        let payload = Payload::serialize_from(event).map_err(serialize_error)?;
        if payload.len() > self.max_payload_bytes {
            return Err(EncodeError::PayloadTooLarge {
                event_type: E::EVENT_TYPE.to_owned(),
                size: payload.len(),
                limit: self.max_payload_bytes,
            });
        }
        Ok(Envelope {
            message_id: Uuid::now_v7(),
            event_type: E::EVENT_TYPE.to_owned(),
            version: E::VERSION,
            occurred_at,
            correlation_id: None,
            causation_id: None,
            traceparent: None,
            tracestate: None,
            aggregate_type: E::AGGREGATE_TYPE.to_owned(),
            aggregate_id: event.aggregate_id(),
            headers: BTreeMap::new(),
            payload,
        })
    }

    /// Decodes the envelope's payload as contract `E`, after checking the payload against
    /// the size limit, then event type and version.
    ///
    /// # Errors
    /// [`DecodeError::PayloadTooLarge`] or [`DecodeError::MetadataTooLarge`] (nothing is
    /// parsed), [`DecodeError::WrongEventType`], [`DecodeError::WrongVersion`],
    /// [`DecodeError::MissingField`] or [`DecodeError::InvalidField`] (naming the field's
    /// path).
    pub fn decode<E: IntegrationEvent>(&self, envelope: &Envelope) -> Result<E, DecodeError> {
        self.check_envelope(envelope)?;
        check_event_type::<E>(&envelope.event_type)?;
        decode_payload::<E>(envelope.payload.get())
    }

    /// [`decode`](Self::decode) without the size check, for envelopes read back from an
    /// outbox row: the row was checked against the outbox's own limit when it was written
    /// (the job dispatcher, which does not know that limit, decodes this way).
    pub(crate) fn decode_written<E: IntegrationEvent>(
        envelope: &Envelope,
    ) -> Result<E, DecodeError> {
        check_event_type::<E>(&envelope.event_type)?;
        decode_payload::<E>(envelope.payload.get())
    }

    /// Decodes a contract from raw JSON payload bytes (a broker message body), checking the
    /// size limit first.
    ///
    /// # Errors
    /// [`DecodeError::PayloadTooLarge`], [`DecodeError::MalformedJson`], or a field error as
    /// in [`decode`](Self::decode).
    pub fn decode_payload_slice<E: IntegrationEvent>(
        &self,
        bytes: &[u8],
    ) -> Result<E, DecodeError> {
        self.check_payload_size(bytes.len())?;
        let text = std::str::from_utf8(bytes).map_err(|error| DecodeError::MalformedJson {
            message: format!("the payload is not UTF-8: {error}"),
        })?;
        decode_payload::<E>(text)
    }

    /// Parses a whole envelope from its JSON form ([`Envelope::to_json_vec`]), checking the
    /// size limit and validating it like [`Envelope::from_parts`].
    ///
    /// # Errors
    /// [`DecodeError::PayloadTooLarge`] (the limit applies to the whole document here),
    /// [`DecodeError::MalformedJson`], [`DecodeError::InvalidEventType`],
    /// [`DecodeError::VersionMismatch`].
    pub fn decode_json(&self, bytes: &[u8]) -> Result<Envelope, DecodeError> {
        self.check_payload_size(bytes.len())?;
        let envelope: Envelope = serde_json::from_slice(bytes).map_err(malformed)?;
        let parsed = parse_event_type(&envelope.event_type)?;
        if parsed.version() != envelope.version {
            return Err(DecodeError::VersionMismatch {
                event_type: envelope.event_type.clone(),
                from_type: parsed.version(),
                stated: envelope.version,
            });
        }
        Ok(envelope)
    }
}

fn malformed(error: serde_json::Error) -> DecodeError {
    DecodeError::MalformedJson {
        message: error.to_string(),
    }
}

fn parse_event_type(event_type: &str) -> Result<EventType<'_>, DecodeError> {
    EventType::parse(event_type).map_err(|reason| DecodeError::InvalidEventType {
        found: event_type.to_owned(),
        reason,
    })
}

fn check_event_type<E: IntegrationEvent>(found: &str) -> Result<(), DecodeError> {
    if found == E::EVENT_TYPE {
        return Ok(());
    }
    match EventType::parse(found) {
        Ok(parsed) if parsed.name() == E::NAME => Err(DecodeError::WrongVersion {
            name: E::NAME,
            expected: E::VERSION,
            found: parsed.version(),
        }),
        _ => Err(DecodeError::WrongEventType {
            expected: E::EVENT_TYPE,
            found: found.to_owned(),
        }),
    }
}

/// The message of a deserializer error without its ` at line L column C` suffix: the field
/// path says where.
fn without_position(error: &serde_json::Error) -> String {
    let message = error.to_string();
    let suffix = format!(" at line {} column {}", error.line(), error.column());
    match message.strip_suffix(&suffix) {
        Some(bare) => bare.to_owned(),
        None => message,
    }
}

fn decode_payload<E: IntegrationEvent>(payload: &str) -> Result<E, DecodeError> {
    // A valid payload goes through plain serde; only a failure is decoded again with
    // `serde_path_to_error`, which finds the offending field but allocates a string for
    // every map key it passes.
    let error = match serde_json::from_str::<E>(payload) {
        Ok(event) => return Ok(event),
        Err(error) => error,
    };
    if error.is_syntax() || error.is_eof() {
        return Err(malformed(error));
    }
    let mut deserializer = serde_json::Deserializer::from_str(payload);
    serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
        let path = error.path().to_string();
        let message = without_position(&error.into_inner());
        match message
            .strip_prefix("missing field `")
            .and_then(|rest| rest.strip_suffix('`'))
        {
            Some(missing) => DecodeError::MissingField {
                event_type: E::EVENT_TYPE,
                field: if path == "." {
                    missing.to_owned()
                } else {
                    format!("{path}.{missing}")
                },
            },
            None => DecodeError::InvalidField {
                event_type: E::EVENT_TYPE,
                field: path,
                message,
            },
        }
    })
}

impl Envelope {
    /// Wraps an event with the default [`EnvelopeConfig`]. See [`EnvelopeConfig::encode`].
    ///
    /// # Errors
    /// As [`EnvelopeConfig::encode`].
    pub fn from_event<E: IntegrationEvent>(event: &E) -> Result<Self, EncodeError> {
        EnvelopeConfig::default().encode(event)
    }

    /// Builds an envelope from its parts, validating the event type and deriving the
    /// version from it.
    ///
    /// # Errors
    /// [`DecodeError::InvalidEventType`] when the event type breaks the grammar.
    pub fn from_parts(parts: EnvelopeParts) -> Result<Self, DecodeError> {
        let version = parse_event_type(&parts.event_type)?.version();
        Ok(Self {
            message_id: parts.message_id,
            event_type: parts.event_type,
            version,
            occurred_at: parts.occurred_at,
            correlation_id: parts.correlation_id,
            causation_id: parts.causation_id,
            traceparent: parts.traceparent,
            tracestate: parts.tracestate,
            aggregate_type: parts.aggregate_type,
            aggregate_id: parts.aggregate_id,
            headers: parts.headers,
            payload: parts.payload,
        })
    }

    /// Decodes the payload as contract `E` (default [`EnvelopeConfig`]).
    ///
    /// # Errors
    /// As [`EnvelopeConfig::decode`].
    pub fn decode<E: IntegrationEvent>(&self) -> Result<E, DecodeError> {
        EnvelopeConfig::default().decode(self)
    }

    /// The size of the envelope's metadata in bytes, as
    /// [`EnvelopeConfig::with_max_metadata_bytes`] counts it: event type, aggregate type
    /// and id, trace context, and every header's name and value.
    pub fn metadata_len(&self) -> usize {
        self.event_type.len()
            + self.aggregate_type.len()
            + self.aggregate_id.len()
            + self.traceparent.as_ref().map_or(0, String::len)
            + self.tracestate.as_ref().map_or(0, String::len)
            + self
                .headers
                .iter()
                .map(|(name, value)| name.len() + value.len())
                .sum::<usize>()
    }

    /// Serializes the whole envelope as JSON.
    ///
    /// # Errors
    /// Only if a header or payload cannot be represented (in practice never for values built
    /// by this crate).
    pub fn to_json_vec(&self) -> Result<Vec<u8>, serde_json::Error> {
        serde_json::to_vec(self)
    }

    /// Sets the correlation id.
    #[must_use]
    pub fn with_correlation_id(mut self, id: Uuid) -> Self {
        self.correlation_id = Some(id);
        self
    }

    /// Sets the causation id (the id of the message that caused this one).
    #[must_use]
    pub fn with_causation_id(mut self, id: Uuid) -> Self {
        self.causation_id = Some(id);
        self
    }

    /// Sets the W3C trace context.
    #[must_use]
    pub fn with_trace_context(mut self, traceparent: String, tracestate: Option<String>) -> Self {
        self.traceparent = Some(traceparent);
        self.tracestate = tracestate;
        self
    }

    /// Adds a header.
    #[must_use]
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.insert(name.into(), value.into());
        self
    }

    /// Sets `occurred_at`.
    #[must_use]
    pub fn with_occurred_at(mut self, at: DateTime<Utc>) -> Self {
        self.occurred_at = at;
        self
    }
}
