//! The publisher contract: how a relay hands envelopes to a broker.
//!
//! A [`Publisher`] receives a **batch** of envelopes and answers with one
//! [`MessageOutcome`] per envelope, in the same order. The relay marks each outbox row from
//! its outcome: `Ok(())` → published; an error → retried later or dead-lettered, depending on
//! its [`ErrorClass`]:
//!
//! | [`PublishErrorKind`] | class | what the relay does |
//! |---|---|---|
//! | [`Unavailable`](PublishErrorKind::Unavailable) | transient | `attempts + 1`, retry after a backoff with jitter; dead after the maximum number of attempts |
//! | [`Timeout`](PublishErrorKind::Timeout) | transient | same (the broker may have stored the message: the retry publishes it again, with the same message id) |
//! | [`NotAttempted`](PublishErrorKind::NotAttempted) | transient | nothing: the row stays pending as it was, no attempt is counted |
//! | [`Rejected`](PublishErrorKind::Rejected) | permanent | dead at once |
//! | [`TooLarge`](PublishErrorKind::TooLarge) | permanent | dead at once |
//!
//! # Ordering within a batch
//!
//! A batch lists the messages of one aggregate in `seq` order. A publisher that preserves
//! per-aggregate order must publish them in that order and, once a message of an aggregate
//! failed, must not publish that aggregate's later messages of the same batch: it reports
//! them as [`PublishErrorKind::NotAttempted`]. [`publish_in_order`] implements exactly that
//! on top of a one-message send function; the [in-process broker](crate::in_process) uses
//! it. Messages of different aggregates are independent and may be sent concurrently.
//!
//! A whole-batch failure (the broker cannot be reached at all) is returned as `Err` from
//! [`Publisher::publish`]; the relay applies it to every message of the batch.
//!
//! ```
//! use outbox_kernel::Envelope;
//! use outbox_kernel::publish::{BatchOutcome, PublishError, Publisher, publish_in_order};
//!
//! /// Prints every message instead of sending it (an adapter would call its client here).
//! struct LogPublisher;
//!
//! impl Publisher for LogPublisher {
//!     async fn publish(&self, batch: &[Envelope]) -> BatchOutcome {
//!         Ok(publish_in_order(batch, |envelope| async move {
//!             if envelope.payload.get() == "null" {
//!                 return Err(PublishError::rejected("empty payload"));
//!             }
//!             tracing::info!(message_id = %envelope.message_id, "sent");
//!             Ok(())
//!         })
//!         .await)
//!     }
//! }
//! ```

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use crate::envelope::Envelope;
use crate::schedule::Due;

/// The outcome of one message of a batch: `Ok(())` when the broker accepted it.
pub type MessageOutcome = Result<(), PublishError>;

/// The outcome of a batch: one [`MessageOutcome`] per envelope, in the batch's order, or
/// an error that applies to every message (the broker could not be reached).
pub type BatchOutcome = Result<Vec<MessageOutcome>, PublishError>;

/// Sends envelopes to a broker. See the [module documentation](self).
///
/// Implementations must return exactly one outcome per envelope; a relay treats a missing
/// outcome as a transient failure of that message. The future must be `Send` (relays run
/// on a multi-threaded runtime); implement it with `async fn publish(&self, batch:
/// &[Envelope]) -> BatchOutcome`.
pub trait Publisher: Send + Sync {
    /// Publishes `batch`, returning an outcome per envelope in the same order.
    fn publish(&self, batch: &[Envelope]) -> impl Future<Output = BatchOutcome> + Send;
}

impl<P: Publisher + ?Sized> Publisher for Arc<P> {
    fn publish(&self, batch: &[Envelope]) -> impl Future<Output = BatchOutcome> + Send {
        (**self).publish(batch)
    }
}

impl<P: Publisher + ?Sized> Publisher for &P {
    fn publish(&self, batch: &[Envelope]) -> impl Future<Output = BatchOutcome> + Send {
        (**self).publish(batch)
    }
}

/// Publishes every envelope with `send`, one after the other in batch order, and stops
/// publishing an aggregate after its first failure in the batch: its later envelopes get
/// [`PublishErrorKind::NotAttempted`]. Other aggregates go on.
pub async fn publish_in_order<'a, F, Fut>(batch: &'a [Envelope], mut send: F) -> Vec<MessageOutcome>
where
    F: FnMut(&'a Envelope) -> Fut,
    Fut: Future<Output = MessageOutcome>,
{
    let mut failed: Vec<(&str, &str)> = Vec::new();
    let mut outcomes = Vec::with_capacity(batch.len());
    for envelope in batch {
        let key = (
            envelope.aggregate_type.as_str(),
            envelope.aggregate_id.as_str(),
        );
        if failed.contains(&key) {
            outcomes.push(Err(PublishError::not_attempted()));
            continue;
        }
        let outcome = send(envelope).await;
        if outcome.is_err() {
            failed.push(key);
        }
        outcomes.push(outcome);
    }
    outcomes
}

/// Per-aggregate order within a batch whose messages were sent together (pipelined
/// acknowledgements): after an aggregate's first failure, its later messages are reported
/// [`PublishErrorKind::NotAttempted`] even when the broker accepted them, so the relay
/// publishes them again after the failed one (the consumer's inbox skips the duplicates).
///
/// ```
/// use outbox_kernel::publish::{MessageOutcome, PublishError, stop_after_failures};
/// # use outbox_kernel::Envelope;
/// # fn batch() -> Vec<Envelope> { Vec::new() }
/// let batch = batch();
/// let mut outcomes: Vec<MessageOutcome> = batch.iter().map(|_| Ok(())).collect();
/// stop_after_failures(&batch, &mut outcomes);
/// ```
pub fn stop_after_failures(batch: &[Envelope], outcomes: &mut [MessageOutcome]) {
    let mut failed: std::collections::HashSet<(&str, &str)> = std::collections::HashSet::new();
    for (envelope, outcome) in batch.iter().zip(outcomes.iter_mut()) {
        let key = (
            envelope.aggregate_type.as_str(),
            envelope.aggregate_id.as_str(),
        );
        if failed.contains(&key) {
            *outcome = Err(PublishError::not_attempted());
        } else if outcome.is_err() {
            failed.insert(key);
        }
    }
}

/// Whether retrying can help.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorClass {
    /// The broker may accept the message later (unavailable, timeout): retry with backoff.
    Transient,
    /// The broker will never accept the message as it is (rejected, too large): dead-letter.
    Permanent,
}

impl ErrorClass {
    /// `transient` or `permanent` (a metric label).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Transient => "transient",
            Self::Permanent => "permanent",
        }
    }
}

impl fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What went wrong with a message (or a whole batch).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PublishErrorKind {
    /// The broker (or the connection to it) is unavailable. Transient.
    Unavailable,
    /// No acknowledgement came in time; the broker may or may not have the message.
    /// Transient.
    Timeout,
    /// Not sent because an earlier message of the same aggregate failed in the same batch.
    /// Transient, and not counted as an attempt.
    NotAttempted,
    /// The broker refused the message (validation, authorisation, unknown destination).
    /// Permanent.
    Rejected,
    /// The message exceeds the broker's size limit. Permanent.
    TooLarge,
    /// Not a failure: a job handler asked to run again later ([`PublishError::snoozed`]).
    /// The relay makes the row due at the snooze's time without counting an attempt.
    Snoozed,
}

impl PublishErrorKind {
    /// The class of this kind of error.
    pub const fn class(self) -> ErrorClass {
        match self {
            Self::Unavailable | Self::Timeout | Self::NotAttempted | Self::Snoozed => {
                ErrorClass::Transient
            }
            Self::Rejected | Self::TooLarge => ErrorClass::Permanent,
        }
    }

    /// A short name (`unavailable`, `timeout`, …).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Unavailable => "unavailable",
            Self::Timeout => "timeout",
            Self::NotAttempted => "not attempted",
            Self::Rejected => "rejected",
            Self::TooLarge => "too large",
            Self::Snoozed => "snoozed",
        }
    }
}

impl fmt::Display for PublishErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed publication, classified by its [`kind`](Self::kind).
///
/// ```
/// use outbox_kernel::publish::{ErrorClass, PublishError, PublishErrorKind};
///
/// let error = PublishError::unavailable("connection refused");
/// assert_eq!(error.kind(), PublishErrorKind::Unavailable);
/// assert_eq!(error.class(), ErrorClass::Transient);
/// assert_eq!(error.to_string(), "unavailable: connection refused");
///
/// let error = PublishError::too_large(2_000_000, 1_048_576);
/// assert!(error.is_permanent());
/// ```
#[derive(Debug, Clone)]
pub struct PublishError {
    kind: PublishErrorKind,
    message: String,
    source: Option<Arc<dyn std::error::Error + Send + Sync + 'static>>,
    snooze: Option<Due>,
}

impl fmt::Display for PublishError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

impl std::error::Error for PublishError {
    /// The attached error itself (not the `Arc` holding it), so that it can be downcast.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|source| source as &(dyn std::error::Error + 'static))
    }
}

impl PublishError {
    /// An error of `kind` with a message.
    pub fn new(kind: PublishErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            source: None,
            snooze: None,
        }
    }

    /// Run again at `due`, without counting an attempt (a job handler's
    /// [`JobError::snooze_until`](crate::job::JobError::snooze_until)). The relay resolves
    /// an [`After`](Due::After) delay against its clock; a time not in the future makes the
    /// row due at once.
    ///
    /// ```
    /// use std::time::Duration;
    /// use outbox_kernel::publish::{PublishError, PublishErrorKind};
    /// use outbox_kernel::schedule::Due;
    ///
    /// let error = PublishError::snoozed(Due::After(Duration::from_secs(60)));
    /// assert_eq!(error.kind(), PublishErrorKind::Snoozed);
    /// assert_eq!(error.snooze(), Some(Due::After(Duration::from_secs(60))));
    /// assert_eq!(error.to_string(), "snoozed: run again 60s after now");
    /// ```
    pub fn snoozed(due: Due) -> Self {
        let message = match due {
            Due::At(at) => format!("run again at {}", at.to_rfc3339()),
            Due::After(delay) => format!("run again {delay:?} after now"),
        };
        Self {
            snooze: Some(due),
            ..Self::new(PublishErrorKind::Snoozed, message)
        }
    }

    /// When a [`Snoozed`](PublishErrorKind::Snoozed) error asks to run again.
    pub fn snooze(&self) -> Option<Due> {
        self.snooze
    }

    /// The broker is unavailable (transient).
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(PublishErrorKind::Unavailable, message)
    }

    /// No acknowledgement in time (transient).
    pub fn timeout(message: impl Into<String>) -> Self {
        Self::new(PublishErrorKind::Timeout, message)
    }

    /// The broker refused the message (permanent).
    pub fn rejected(message: impl Into<String>) -> Self {
        Self::new(PublishErrorKind::Rejected, message)
    }

    /// The message is over the broker's limit of `limit` bytes (permanent).
    pub fn too_large(size: usize, limit: usize) -> Self {
        Self::new(
            PublishErrorKind::TooLarge,
            format!("{size} bytes, over the broker's limit of {limit} bytes"),
        )
    }

    /// Not sent because an earlier message of the same aggregate failed in the batch.
    pub fn not_attempted() -> Self {
        Self::new(
            PublishErrorKind::NotAttempted,
            "an earlier message of the same aggregate failed in this batch",
        )
    }

    /// Attaches the underlying error (the client library's).
    #[must_use]
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Arc::new(source));
        self
    }

    /// What went wrong.
    pub fn kind(&self) -> PublishErrorKind {
        self.kind
    }

    /// Whether retrying can help.
    pub fn class(&self) -> ErrorClass {
        self.kind.class()
    }

    /// The error's message (without the kind).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Whether the error is transient.
    pub fn is_transient(&self) -> bool {
        self.class() == ErrorClass::Transient
    }

    /// Whether the error is permanent.
    pub fn is_permanent(&self) -> bool {
        self.class() == ErrorClass::Permanent
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::EnvelopeParts;

    fn envelope(aggregate: &str, n: u32) -> Envelope {
        Envelope::from_parts(EnvelopeParts {
            message_id: uuid::Uuid::now_v7(),
            event_type: "test.thing.happened.v1".into(),
            occurred_at: chrono::Utc::now(),
            correlation_id: None,
            causation_id: None,
            traceparent: None,
            tracestate: None,
            aggregate_type: "thing".into(),
            aggregate_id: aggregate.into(),
            headers: Default::default(),
            payload: serde_json::json!({ "n": n }).into(),
        })
        .expect("valid event type")
    }

    #[test]
    fn classes() {
        use PublishErrorKind::*;
        for (kind, class) in [
            (Unavailable, ErrorClass::Transient),
            (Timeout, ErrorClass::Transient),
            (NotAttempted, ErrorClass::Transient),
            (Rejected, ErrorClass::Permanent),
            (TooLarge, ErrorClass::Permanent),
        ] {
            assert_eq!(kind.class(), class);
        }
        let error = PublishError::timeout("no ack").with_source(std::io::Error::other("io"));
        let source = std::error::Error::source(&error).expect("a source");
        assert!(
            source.downcast_ref::<std::io::Error>().is_some(),
            "downcastable"
        );
        assert_eq!(error.message(), "no ack");
    }

    #[test]
    fn in_order_stops_an_aggregate_after_its_first_failure() {
        let batch = [
            envelope("a", 1),
            envelope("b", 1),
            envelope("a", 2),
            envelope("b", 2),
        ];
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let mut sent = Vec::new();
        let outcomes = runtime.block_on(publish_in_order(&batch, |e| {
            sent.push((
                e.aggregate_id.clone(),
                e.payload.to_value().expect("json")["n"].clone(),
            ));
            std::future::ready(if e.aggregate_id == "a" {
                Err(PublishError::unavailable("down"))
            } else {
                Ok(())
            })
        }));
        assert_eq!(sent.len(), 3, "a/2 is not sent after a/1 failed");
        assert!(outcomes[0].is_err());
        assert!(outcomes[1].is_ok());
        assert_eq!(
            outcomes[2].as_ref().map_err(PublishError::kind),
            Err(PublishErrorKind::NotAttempted)
        );
        assert!(outcomes[3].is_ok());
    }
}
