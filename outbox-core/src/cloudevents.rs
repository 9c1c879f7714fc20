//! The one mapping of an [`Envelope`] to and from CloudEvents 1.0 **binary-mode** transport
//! headers, shared by every broker adapter.
//!
//! | header | envelope field |
//! |---|---|
//! | `ce-id` | `message_id` |
//! | `ce-type` | `event_type` (the version is read back from it) |
//! | `ce-source` | `/` + the event type's context with `/` for `.` (`/bookstore/ordering`); required on decode, not stored |
//! | `ce-time` | `occurred_at`, RFC 3339 with nanoseconds |
//! | `ce-subject` | `aggregate_id` |
//! | `ce-specversion` | always `1.0` |
//! | `ce-dataschema` | the schema `$id` ([`crate::name::schema_id`]); not stored |
//! | `ce-aggregatetype` | `aggregate_type` (extension) |
//! | `ce-correlationid` | `correlation_id` (extension, optional) |
//! | `ce-causationid` | `causation_id` (extension, optional) |
//! | `content-type` | always `application/json` (parameters such as `charset` accepted on decode) |
//! | `traceparent`, `tracestate` | the W3C trace context (optional) |
//!
//! The body is the JSON payload. Every other header is a free-form envelope header: its name
//! must not be one of the reserved names above or start with `ce-` (compared without case),
//! and neither name nor value may hold a line break.
//!
//! ```
//! use outbox_kernel::{cloudevents, Envelope, EnvelopeConfig, IntegrationEvent};
//! # use schemars::JsonSchema;
//! # use serde::{Deserialize, Serialize};
//! # #[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
//! # #[integration_event(name = "bookstore.catalog.book-added.v1", key = book_id)]
//! # pub struct BookAddedV1 { pub book_id: String }
//!
//! let envelope = Envelope::from_event(&BookAddedV1 { book_id: "dune".into() })?;
//! let message = cloudevents::to_binary(&envelope)?;
//! assert!(message.headers.iter().any(|(k, v)| k == "ce-subject" && v == "dune"));
//!
//! // A broker adapter hands over whatever header pairs its client yields.
//! let received = message.headers.iter().map(|(name, value)| (name, value.as_bytes()));
//! let back = cloudevents::from_binary(received, &message.body, &EnvelopeConfig::default())?;
//! assert_eq!(back, envelope);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::borrow::Cow;
use std::collections::BTreeMap;

use chrono::{DateTime, SecondsFormat, Utc};
use uuid::Uuid;

use crate::envelope::{DecodeError, Envelope, EnvelopeConfig, EnvelopeParts};
use crate::name::{EventType, schema_id};
use crate::payload::Payload;

/// The CloudEvents specification version written and accepted.
pub const SPEC_VERSION: &str = "1.0";
/// The content type of every payload.
pub const CONTENT_TYPE_JSON: &str = "application/json";

/// Header names of the mapping.
pub mod header {
    /// `message_id`.
    pub const ID: &str = "ce-id";
    /// `event_type`.
    pub const TYPE: &str = "ce-type";
    /// The producing context.
    pub const SOURCE: &str = "ce-source";
    /// `occurred_at`.
    pub const TIME: &str = "ce-time";
    /// `aggregate_id`.
    pub const SUBJECT: &str = "ce-subject";
    /// Always `1.0`.
    pub const SPEC_VERSION: &str = "ce-specversion";
    /// The schema `$id`.
    pub const DATA_SCHEMA: &str = "ce-dataschema";
    /// `aggregate_type` (extension).
    pub const AGGREGATE_TYPE: &str = "ce-aggregatetype";
    /// `correlation_id` (extension).
    pub const CORRELATION_ID: &str = "ce-correlationid";
    /// `causation_id` (extension).
    pub const CAUSATION_ID: &str = "ce-causationid";
    /// Always `application/json`.
    pub const CONTENT_TYPE: &str = "content-type";
    /// W3C trace context.
    pub const TRACEPARENT: &str = "traceparent";
    /// W3C trace state.
    pub const TRACESTATE: &str = "tracestate";

    /// Every header name of the mapping (adapters map them to their transport's names once).
    pub const ALL: [&str; 13] = [
        ID,
        TYPE,
        SOURCE,
        TIME,
        SUBJECT,
        SPEC_VERSION,
        DATA_SCHEMA,
        AGGREGATE_TYPE,
        CORRELATION_ID,
        CAUSATION_ID,
        CONTENT_TYPE,
        TRACEPARENT,
        TRACESTATE,
    ];
}

/// A message in CloudEvents binary mode: transport headers and the JSON body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinaryMessage {
    /// Header names (lowercase) and values, in a fixed order. The mapping's own names are
    /// the [`header`] constants (borrowed); the envelope's free-form header names are owned.
    pub headers: Vec<(Cow<'static, str>, String)>,
    /// The JSON payload.
    pub body: Vec<u8>,
}

/// Why an envelope could not be mapped to or from CloudEvents headers.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum CloudEventsError {
    /// A required header is absent.
    #[error("missing CloudEvents header `{0}`")]
    MissingHeader(&'static str),
    /// A header appears twice.
    #[error("header `{0}` appears more than once")]
    DuplicateHeader(String),
    /// A header has a value that cannot be read.
    #[error("invalid header `{name}`: {message}")]
    InvalidHeader {
        /// The header name.
        name: String,
        /// What is wrong.
        message: String,
    },
    /// The message uses another CloudEvents version.
    #[error("unsupported CloudEvents specversion `{0}` (expected `1.0`)")]
    UnsupportedSpecVersion(String),
    /// The body is not JSON.
    #[error("unsupported content type `{0}` (expected `application/json`)")]
    UnsupportedContentType(String),
    /// An envelope header uses a reserved name.
    #[error(
        "envelope header `{0}` is reserved by the CloudEvents mapping (names starting with \
         `ce-`, `content-type`, `traceparent`, `tracestate`)"
    )]
    ReservedHeader(String),
    /// The payload or event type could not be decoded.
    #[error(transparent)]
    Decode(#[from] DecodeError),
}

fn is_reserved(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower.starts_with("ce-")
        || lower == header::CONTENT_TYPE
        || lower == header::TRACEPARENT
        || lower == header::TRACESTATE
}

fn check_text(name: &str, value: &str) -> Result<(), CloudEventsError> {
    let bad = |what: &str| CloudEventsError::InvalidHeader {
        name: name.to_owned(),
        message: format!("{what} must not be empty or hold control characters"),
    };
    if name.is_empty() || name.chars().any(|c| c.is_control() || c == ':' || c == ' ') {
        return Err(bad("the name"));
    }
    if value.bytes().any(|b| matches!(b, b'\r' | b'\n' | 0)) {
        return Err(bad("the value"));
    }
    Ok(())
}

/// The `ce-source` of an event type: `/` + its context, dots replaced by slashes.
pub fn source_of(event_type: &EventType<'_>) -> String {
    let context = event_type.context();
    let mut source = String::with_capacity(context.len() + 1);
    source.push('/');
    source.extend(context.chars().map(|c| if c == '.' { '/' } else { c }));
    source
}

/// Maps an envelope to binary-mode headers and body.
///
/// # Errors
/// [`CloudEventsError::ReservedHeader`] or [`CloudEventsError::InvalidHeader`] for an
/// envelope header that cannot travel, [`CloudEventsError::Decode`] for an invalid event type.
pub fn to_binary(envelope: &Envelope) -> Result<BinaryMessage, CloudEventsError> {
    let event_type =
        EventType::parse(&envelope.event_type).map_err(|reason| DecodeError::InvalidEventType {
            found: envelope.event_type.clone(),
            reason,
        })?;
    // Only the texts that come from the producer are checked for line breaks: the others
    // (ids, time, the event type's grammar, the names above) cannot hold one.
    check_text(header::SUBJECT, &envelope.aggregate_id)?;
    check_text(header::AGGREGATE_TYPE, &envelope.aggregate_type)?;
    let mut headers: Vec<(Cow<'static, str>, String)> =
        Vec::with_capacity(13 + envelope.headers.len());
    let mut push = |name: &'static str, value: String| headers.push((Cow::Borrowed(name), value));
    push(header::SPEC_VERSION, SPEC_VERSION.to_owned());
    push(header::ID, envelope.message_id.to_string());
    push(header::TYPE, envelope.event_type.clone());
    push(header::SOURCE, source_of(&event_type));
    push(
        header::TIME,
        envelope
            .occurred_at
            .to_rfc3339_opts(SecondsFormat::AutoSi, true),
    );
    push(header::SUBJECT, envelope.aggregate_id.clone());
    push(header::DATA_SCHEMA, schema_id(&envelope.event_type));
    push(header::AGGREGATE_TYPE, envelope.aggregate_type.clone());
    if let Some(id) = envelope.correlation_id {
        push(header::CORRELATION_ID, id.to_string());
    }
    if let Some(id) = envelope.causation_id {
        push(header::CAUSATION_ID, id.to_string());
    }
    push(header::CONTENT_TYPE, CONTENT_TYPE_JSON.to_owned());
    if let Some(tp) = &envelope.traceparent {
        check_text(header::TRACEPARENT, tp)?;
        push(header::TRACEPARENT, tp.clone());
    }
    if let Some(ts) = &envelope.tracestate {
        check_text(header::TRACESTATE, ts)?;
        push(header::TRACESTATE, ts.clone());
    }
    for (name, value) in &envelope.headers {
        if is_reserved(name) {
            return Err(CloudEventsError::ReservedHeader(name.clone()));
        }
        check_text(name, value)?;
        headers.push((Cow::Owned(name.clone()), value.clone()));
    }
    let body = envelope.payload.as_bytes().to_vec();
    Ok(BinaryMessage { headers, body })
}

/// Rebuilds an envelope from binary-mode headers (names compared without case; values as
/// UTF-8 bytes or strings) and the JSON body, checking the payload size limit first, the
/// transport headers' size ([`EnvelopeConfig::max_transport_metadata_bytes`]) before a
/// header is copied, and the envelope's metadata limit ([`Envelope::metadata_len`], as every
/// path counts it) at the end.
///
/// # Errors
/// A [`CloudEventsError`] naming the missing, duplicated or invalid header, or the decode
/// error of the body.
pub fn from_binary<I, K, V>(
    headers: I,
    body: &[u8],
    config: &EnvelopeConfig,
) -> Result<Envelope, CloudEventsError>
where
    I: IntoIterator<Item = (K, V)>,
    K: AsRef<str>,
    V: AsRef<[u8]>,
{
    config.check_payload_size(body.len())?;
    let mut known: BTreeMap<&'static str, String> = BTreeMap::new();
    let mut free: BTreeMap<String, String> = BTreeMap::new();
    let mut metadata = 0usize;
    for (name, value) in headers {
        let name = name.as_ref();
        // Bounded before it is copied: a message's headers come from outside.
        metadata = metadata.saturating_add(name.len() + value.as_ref().len());
        if metadata > config.max_transport_metadata_bytes() {
            return Err(DecodeError::MetadataTooLarge {
                size: metadata,
                limit: config.max_transport_metadata_bytes(),
            }
            .into());
        }
        let value =
            std::str::from_utf8(value.as_ref()).map_err(|_| CloudEventsError::InvalidHeader {
                name: name.to_owned(),
                message: "value is not UTF-8".to_owned(),
            })?;
        let lower = name.to_ascii_lowercase();
        match header::ALL.iter().find(|k| **k == lower) {
            Some(key) => {
                // As for the free headers below: only what can travel back out.
                check_text(key, value)?;
                if known.insert(key, value.to_owned()).is_some() {
                    return Err(CloudEventsError::DuplicateHeader(lower));
                }
            }
            // Unknown `ce-` extensions of other producers are ignored, not stored.
            None if lower.starts_with("ce-") => {}
            None => {
                // What could not travel back out (`to_binary`) is not taken in either.
                check_text(name, value)?;
                if free.insert(name.to_owned(), value.to_owned()).is_some() {
                    return Err(CloudEventsError::DuplicateHeader(name.to_owned()));
                }
            }
        }
    }
    let mut take = |key: &'static str| known.remove(key);
    let required = |value: Option<String>, key: &'static str| {
        value
            .filter(|v| !v.is_empty())
            .ok_or(CloudEventsError::MissingHeader(key))
    };
    let spec = required(take(header::SPEC_VERSION), header::SPEC_VERSION)?;
    if spec != SPEC_VERSION {
        return Err(CloudEventsError::UnsupportedSpecVersion(spec));
    }
    if let Some(content_type) = take(header::CONTENT_TYPE) {
        let mime = content_type.split(';').next().unwrap_or_default().trim();
        if !mime.eq_ignore_ascii_case(CONTENT_TYPE_JSON) {
            return Err(CloudEventsError::UnsupportedContentType(content_type));
        }
    }
    let uuid = |value: String, key: &'static str| {
        Uuid::parse_str(&value).map_err(|e| CloudEventsError::InvalidHeader {
            name: key.to_owned(),
            message: e.to_string(),
        })
    };
    let message_id = uuid(required(take(header::ID), header::ID)?, header::ID)?;
    let event_type = required(take(header::TYPE), header::TYPE)?;
    required(take(header::SOURCE), header::SOURCE)?;
    let time = required(take(header::TIME), header::TIME)?;
    let occurred_at = DateTime::parse_from_rfc3339(&time)
        .map_err(|e| CloudEventsError::InvalidHeader {
            name: header::TIME.to_owned(),
            message: e.to_string(),
        })?
        .with_timezone(&Utc);
    let aggregate_id =
        take(header::SUBJECT).ok_or(CloudEventsError::MissingHeader(header::SUBJECT))?;
    let aggregate_type = take(header::AGGREGATE_TYPE)
        .ok_or(CloudEventsError::MissingHeader(header::AGGREGATE_TYPE))?;
    let correlation_id = take(header::CORRELATION_ID)
        .map(|v| uuid(v, header::CORRELATION_ID))
        .transpose()?;
    let causation_id = take(header::CAUSATION_ID)
        .map(|v| uuid(v, header::CAUSATION_ID))
        .transpose()?;
    let traceparent = take(header::TRACEPARENT);
    let tracestate = take(header::TRACESTATE);
    let payload = Payload::from_slice(body).map_err(|e| DecodeError::MalformedJson {
        message: e.to_string(),
    })?;
    let envelope = Envelope::from_parts(EnvelopeParts {
        message_id,
        event_type,
        occurred_at,
        correlation_id,
        causation_id,
        traceparent,
        tracestate,
        aggregate_type,
        aggregate_id,
        headers: free,
        payload,
    })?;
    // The limit as every other path counts it: the transport's own headers do not count.
    config.check_metadata_size(envelope.metadata_len())?;
    Ok(envelope)
}
