//! The plain type of a parked message (see [`crate::inbox::parked`], which re-exports it).

use chrono::{DateTime, Utc};
use outbox_core::Envelope;

/// One parked message.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ParkedMessage {
    /// Identity (arrival order).
    pub id: i64,
    /// The consumer.
    pub consumer: String,
    /// The aggregate type and id.
    pub aggregate: (String, String),
    /// The message.
    pub envelope: Envelope,
    /// Handler attempts made so far.
    pub attempts: u32,
    /// When it may be attempted.
    pub next_attempt_at: DateTime<Utc>,
    /// The last handler error.
    pub last_error: Option<String>,
    /// When it was parked.
    pub parked_at: DateTime<Utc>,
}
