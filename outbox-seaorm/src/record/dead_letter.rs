//! The plain types of a consumer dead letter (see [`crate::inbox::dead_letter`], which
//! re-exports them).

use chrono::{DateTime, Utc};
use outbox_core::{Envelope, cloudevents};
use uuid::Uuid;

use crate::limits::{self, MAX_STORED_BODY_BYTES, MAX_STORED_HEADER_BYTES, MAX_STORED_HEADERS};

/// The state of a dead letter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DeadLetterStatus {
    /// Waiting for an operator.
    Dead,
    /// An operator asked for a new attempt; the consumer picks it up.
    Requeued,
    /// A requeued message was handled (applied, or found already applied).
    Resolved,
    /// An operator gave it up, with a reason: it no longer holds its aggregate.
    Skipped,
}

impl DeadLetterStatus {
    /// The stored value.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Dead => "dead",
            Self::Requeued => "requeued",
            Self::Resolved => "resolved",
            Self::Skipped => "skipped",
        }
    }

    /// Whether a letter in this state holds the later messages of its aggregate (under
    /// [`DeadLetterPolicy::Block`](outbox_core::policy::DeadLetterPolicy::Block)): `dead` and
    /// `requeued`.
    pub const fn holds_aggregate(self) -> bool {
        matches!(self, Self::Dead | Self::Requeued)
    }

    /// Parses a stored value.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "dead" => Some(Self::Dead),
            "requeued" => Some(Self::Requeued),
            "resolved" => Some(Self::Resolved),
            "skipped" => Some(Self::Skipped),
            _ => None,
        }
    }
}

/// How a dead letter's `message` column is stored.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum StoredMessage {
    /// A decoded envelope.
    Envelope(Box<Envelope>),
    /// Transport headers and body that could not be decoded, bounded.
    Binary(RawMessage),
}

/// The transport headers and body of a message that could not be decoded, as a dead letter
/// stores them: bounded (see the [dead-letter documentation](crate::inbox::dead_letter#bounded)), with the body's
/// full size and SHA-256 digest.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct RawMessage {
    /// Header names and values, in the order received (at most
    /// [`MAX_STORED_HEADERS`], each name and value cut to
    /// [`MAX_STORED_HEADER_BYTES`] with `…`).
    pub headers: Vec<(String, String)>,
    /// Headers received beyond those stored.
    #[serde(default)]
    pub headers_dropped: usize,
    /// The body as lossy UTF-8; when the body was larger than
    /// [`MAX_STORED_BODY_BYTES`], its first bytes.
    pub body: String,
    /// The body's size as received, in bytes.
    #[serde(default)]
    pub body_bytes: u64,
    /// The SHA-256 digest of the body as received, lowercase hex.
    #[serde(default)]
    pub body_sha256: String,
    /// Whether anything was cut (the body, a header, or headers dropped): the message cannot
    /// be redelivered as it was received.
    #[serde(default)]
    pub truncated: bool,
}

impl RawMessage {
    /// Captures `headers` and `body` for storage, bounded.
    pub fn capture<K: AsRef<str>, V: AsRef<str>>(headers: &[(K, V)], body: &[u8]) -> Self {
        use sha2::Digest as _;

        let mut truncated = false;
        let mut cut = |text: &str| {
            if text.len() > MAX_STORED_HEADER_BYTES {
                truncated = true;
            }
            limits::bytes(text, MAX_STORED_HEADER_BYTES)
        };
        let stored: Vec<(String, String)> = headers
            .iter()
            .take(MAX_STORED_HEADERS)
            .map(|(name, value)| (cut(name.as_ref()), cut(value.as_ref())))
            .collect();
        let headers_dropped = headers.len().saturating_sub(MAX_STORED_HEADERS);
        let kept = body.len().min(MAX_STORED_BODY_BYTES);
        let text = String::from_utf8_lossy(body.get(..kept).unwrap_or(body)).into_owned();
        let digest = sha2::Sha256::digest(body);
        let mut body_sha256 = String::with_capacity(64);
        for byte in digest.iter() {
            use std::fmt::Write as _;
            let _ = write!(body_sha256, "{byte:02x}");
        }
        Self {
            headers: stored,
            headers_dropped,
            body: text,
            body_bytes: u64::try_from(body.len()).unwrap_or(u64::MAX),
            body_sha256,
            truncated: truncated || headers_dropped > 0 || kept < body.len(),
        }
    }

    /// An envelope that is over a limit, stored as its CloudEvents binary-mode form (or, if
    /// even that cannot be built, its payload alone), bounded.
    pub fn of_envelope(envelope: &Envelope) -> Self {
        match cloudevents::to_binary(envelope) {
            Ok(message) => Self::capture(&message.headers, &message.body),
            Err(_) => Self::capture::<&str, &str>(&[], envelope.payload.as_bytes()),
        }
    }
}

/// One row of the consumer dead-letter table.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ConsumerDeadLetter {
    /// Identity.
    pub id: i64,
    /// The message id, when it could be read.
    pub message_id: Option<Uuid>,
    /// The consumer.
    pub consumer: String,
    /// The event type, when it could be read.
    pub event_type: Option<String>,
    /// The aggregate type and id, when they could be read.
    pub aggregate: Option<(String, String)>,
    /// `malformed`, `unsupported_version`, `unknown_event_type` or `handler_failed`.
    pub reason: String,
    /// The last error.
    pub error: String,
    /// Handler attempts made.
    pub attempts: u32,
    /// The message.
    pub message: StoredMessage,
    /// The state.
    pub status: DeadLetterStatus,
    /// When it was dead-lettered.
    pub dead_at: DateTime<Utc>,
    /// When an operator requeued it.
    pub requeued_at: Option<DateTime<Utc>>,
    /// Who requeued it.
    pub requeued_by: Option<String>,
    /// When a requeued attempt succeeded.
    pub resolved_at: Option<DateTime<Utc>>,
    /// When an operator skipped it.
    pub skipped_at: Option<DateTime<Utc>>,
    /// Who skipped it.
    pub skipped_by: Option<String>,
    /// Why.
    pub skip_reason: Option<String>,
}
