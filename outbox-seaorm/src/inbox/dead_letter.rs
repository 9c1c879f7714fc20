//! The consumer dead-letter table: messages a consumer could not handle, with why.
//!
//! `<inbox>_dead_letters` (created by [`schema::install`](crate::schema::install) and the
//! migration [`CreateInboxDeadLetters`](crate::migration::CreateInboxDeadLetters)):
//!
//! | column | meaning |
//! |---|---|
//! | `id` | identity |
//! | `message_id` | the message's id, `NULL` when it could not be read |
//! | `consumer` | the consumer name |
//! | `event_type` | the message's event type, `NULL` when it could not be read |
//! | `aggregate_type`, `aggregate_id` | the message's aggregate, `NULL` when it could not be read: under [`DeadLetterPolicy::Block`](outbox_core::policy::DeadLetterPolicy::Block) a `dead` or `requeued` letter holds the later messages of its aggregate ([`super::parked`]) |
//! | `reason` | `malformed`, `unsupported_version`, `unknown_event_type`, `handler_failed` |
//! | `error` | the last error, as text (at most [`MAX_ERROR_CHARS`](crate::limits::MAX_ERROR_CHARS) characters) |
//! | `attempts` | handler attempts made (0 when the message was never handled) |
//! | `format` | `envelope` (`message` is the envelope's JSON) or `binary` (`message` is a [`RawMessage`]: the transport headers and body as received, bounded) |
//! | `message` | the message, to requeue or inspect |
//! | `status` | `dead`, `requeued` (an operator asked for a new attempt), `resolved` (a requeued message was applied or found a duplicate), `skipped` (an operator gave it up, with a reason) |
//! | `dead_at`, `requeued_at`, `requeued_by`, `resolved_at` | when and by whom |
//! | `skipped_at`, `skipped_by`, `skip_reason` | when, by whom and why it was skipped |
//!
//! # Bounded
//!
//! A dead letter must always be writable, whatever came in. A message that could not be
//! decoded is stored as a [`RawMessage`]: at most [`MAX_STORED_HEADERS`] headers of at most
//! [`MAX_STORED_HEADER_BYTES`] each, and a body of at most [`MAX_STORED_BODY_BYTES`] (a
//! larger body keeps its first [`MAX_STORED_BODY_BYTES`] bytes), always with the body's full
//! size and SHA-256 digest, so that the original can be found and compared. A message over
//! the payload or metadata limit is stored that way too. Such a cut message cannot be
//! redelivered (requeueing it fails again, saying so): skip it once it is understood.
//!
//! Operators list, show, requeue and skip dead letters with
//! [`Operations`](crate::ops::Operations) (`consumer_dead_letters`,
//! `requeue_consumer_dead_letter`, `skip_consumer_dead_letter`) or the CLI
//! (`outbox inbox-dead …`); a running [`Consumer`](super::Consumer) redelivers requeued ones to
//! its handlers.
//!
//! [`MAX_STORED_HEADERS`]: crate::limits::MAX_STORED_HEADERS
//! [`MAX_STORED_HEADER_BYTES`]: crate::limits::MAX_STORED_HEADER_BYTES
//! [`MAX_STORED_BODY_BYTES`]: crate::limits::MAX_STORED_BODY_BYTES

use crate::config::Outbox;
use crate::table::TableName;

pub use crate::record::dead_letter::{
    ConsumerDeadLetter, DeadLetterStatus, RawMessage, StoredMessage,
};
pub(crate) use crate::sql::inbox::dead_letter::{
    Actor, NewDeadLetter, fail_again, find, insert, list, transition,
};

/// The dead-letter table of `outbox`'s inbox: `<inbox>_dead_letters`.
pub fn table(outbox: &Outbox) -> TableName {
    outbox.tables().dead_letters.clone()
}
