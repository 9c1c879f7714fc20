//! The consumer's parked messages: messages acknowledged at the broker but not yet applied,
//! kept in the consumer's own database, in arrival order per aggregate.
//!
//! A [`Consumer`](super::Consumer) parks a message
//! - when its handler failed and attempts remain: the message waits for its next attempt
//!   (`next_attempt_at`, after the backoff) without stalling the messages of every other
//!   aggregate, and
//! - when an earlier message of its aggregate is parked, or — under
//!   [`DeadLetterPolicy::Block`](outbox_core::policy::DeadLetterPolicy::Block), the default —
//!   dead-lettered (`dead` or `requeued`): it waits behind it, so that the aggregate's
//!   messages are applied in order.
//!
//! The consumer's redelivery loop ([`Consumer::redeliver_until`](super::Consumer::redeliver_until),
//! which every broker runner runs) applies the first parked message of each aggregate once
//! it is due and nothing holds it, then the next, and so on. A process that crashes leaves
//! its parked messages here; the next one picks them up.
//!
//! `<inbox>_parked` (created with the dead-letter table by
//! [`schema::install`](crate::schema::install) and
//! [`CreateInboxDeadLetters`](crate::migration::CreateInboxDeadLetters)):
//!
//! | column | meaning |
//! |---|---|
//! | `id` | identity: arrival order |
//! | `consumer` | the consumer name |
//! | `aggregate_type`, `aggregate_id` | the message's aggregate |
//! | `message_id`, `event_type` | the message's id (unique per consumer) and event type |
//! | `message` | the envelope's JSON |
//! | `attempts` | handler attempts made so far |
//! | `next_attempt_at` | when it may be attempted (its arrival for a message waiting behind another) |
//! | `last_error` | the last handler error |
//! | `parked_at` | when it was parked |

use crate::config::Outbox;
use crate::table::TableName;

pub use crate::record::parked::ParkedMessage;
pub(crate) use crate::sql::inbox::parked::{
    NewParked, delete, heads, insert, list, next_of, retry_at,
};

/// The parked-message table of `outbox`'s inbox: `<inbox>_parked`.
pub fn table(outbox: &Outbox) -> TableName {
    outbox.tables().parked.clone()
}
