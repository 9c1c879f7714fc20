//! Job-queue mode (book: The job queue): with no broker, the outbox table *is* the queue, and the relay
//! hands each row to a local handler chosen by its event type.
//!
//! A [`JobDispatcher`] is a [`Publisher`]: give it to a relay instead of a broker adapter.
//! For every envelope of a batch it
//!
//! 1. finds the handler registered for the envelope's event type — none is a **permanent**
//!    error ([`JobFailure::NoHandler`]): the row goes `dead` at once, typed, instead of being
//!    retried forever;
//! 2. decodes the payload to the handler's contract — a payload that does not decode is a
//!    permanent error too ([`JobFailure::Undecodable`]);
//! 3. runs the handler and turns its [`JobError`] into a [`PublishError`]:
//!    [`JobError::retryable`] → transient (the relay retries the row after its backoff with
//!    jitter, and dead-letters it after its maximum number of attempts),
//!    [`JobError::permanent`] → permanent (dead at once). A handler that panics counts as a
//!    retryable failure; the panic does not take the relay down.
//!
//! Handlers of one batch run one after the other in batch order, and once a job of an
//! aggregate failed, that aggregate's later jobs of the batch are not started
//! ([`publish_in_order`]): per-aggregate order holds for jobs as it does for messages.
//!
//! # Delivery semantics
//!
//! **At least once.** The relay marks a row after its handler returned; a crash between the
//! two (process killed, database lost) leaves the row `pending` and the handler runs again
//! with the same [`Envelope::message_id`]. Handlers must therefore be idempotent — or use the
//! message id as an idempotency key with whatever they call (a mail provider's
//! `Idempotency-Key`, a payment provider's reference, a unique constraint).
//!
//! Some side effects must never run twice *automatically* — money leaving: for a payout,
//! "failed" often means "I do not know whether it happened". For those, configure the
//! event type with `retryable = false` on the outbox (`outbox_seaorm::job::Job`): the flag is
//! stored on each row at commit, and the relay marks such a row `failed` on its first failed
//! attempt, whatever the error class, never retries it, and calls its alert hook so that a
//! person looks at it (requeue or skip, both recorded). The at-least-once window above still
//! applies to a crash *between* a successful handler and its mark: give non-retryable
//! handlers an idempotency key too.
//!
//! # Deadlines and timeouts
//!
//! A job's **deadline** ([`JobDispatcherBuilder::deadline`], per contract
//! [`deadline_for`](JobDispatcherBuilder::deadline_for)) cancels that job alone when it runs
//! too long: a failed attempt ([`JobFailure::DeadlineExceeded`]). The relay also bounds each
//! batch by its publish timeout; when a whole batch exceeds it, every job of the batch counts
//! as failed with a timeout (non-retryable ones go `failed`): set deadlines, and a publish
//! timeout above the batch size times the longest deadline.
//!
//! # Snoozing
//!
//! A handler that is not ready returns [`JobError::snooze_until`] or
//! [`JobError::snooze_for`]: the row becomes due again at that time and no attempt is
//! counted ([`PublishErrorKind::Snoozed`]).
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicU32, Ordering};
//!
//! use outbox_kernel::job::{JobDispatcher, JobError};
//! use outbox_kernel::publish::Publisher;
//! use outbox_kernel::{Envelope, IntegrationEvent};
//! # use schemars::JsonSchema;
//! # use serde::{Deserialize, Serialize};
//!
//! #[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
//! #[integration_event(name = "shop.notifications.welcome-mail-requested.v1", key = customer_id)]
//! pub struct WelcomeMailRequestedV1 {
//!     pub customer_id: String,
//!     pub email: String,
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let sent = Arc::new(AtomicU32::new(0));
//! let counter = Arc::clone(&sent);
//! let jobs = JobDispatcher::builder()
//!     .handler(move |mail: WelcomeMailRequestedV1, envelope: &Envelope| {
//!         // Take what the job needs from the envelope before the `async move` block.
//!         let idempotency_key = envelope.message_id;
//!         let counter = Arc::clone(&counter);
//!         async move {
//!             if mail.email.is_empty() {
//!                 return Err(JobError::permanent("no e-mail address"));
//!             }
//!             let _ = idempotency_key; // mailer.send(&mail.email, idempotency_key).await
//!             counter.fetch_add(1, Ordering::SeqCst);
//!             Ok(())
//!         }
//!     })
//!     .build()?;
//!
//! let envelope = Envelope::from_event(&WelcomeMailRequestedV1 {
//!     customer_id: "c-1".into(),
//!     email: "ada@example.com".into(),
//! })?;
//! let outcomes = jobs.publish(std::slice::from_ref(&envelope)).await?;
//! assert!(outcomes[0].is_ok());
//! assert_eq!(sent.load(Ordering::SeqCst), 1);
//! # Ok(())
//! # }
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_util::FutureExt as _;
use tracing::Instrument as _;

use crate::envelope::{DecodeError, Envelope};
use crate::event::IntegrationEvent;
use crate::publish::{
    BatchOutcome, MessageOutcome, PublishError, PublishErrorKind, Publisher, publish_in_order,
};
use crate::schedule::Due;

/// Whether a failed job may succeed when run again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum JobErrorKind {
    /// Running it again may help (a mail server that did not answer): the relay retries
    /// the row after its backoff — unless the row is not retryable.
    Retryable,
    /// Running it again cannot help (an invalid address): the row goes `dead` at once (or
    /// `failed` when the row is not retryable).
    Permanent,
    /// Not a failure: run the job again later ([`JobError::snooze_until`],
    /// [`JobError::snooze_for`]), without counting an attempt.
    Snoozed,
}

/// A job handler's failure, classified by its [`kind`](Self::kind).
///
/// ```
/// use outbox_kernel::job::{JobError, JobErrorKind};
///
/// let error = JobError::retryable("mail server did not answer");
/// assert_eq!(error.kind(), JobErrorKind::Retryable);
/// assert_eq!(error.to_string(), "mail server did not answer");
/// assert!(JobError::permanent("no such account").is_permanent());
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct JobError {
    kind: JobErrorKind,
    message: String,
    #[source]
    source: Option<Arc<dyn std::error::Error + Send + Sync + 'static>>,
    snooze: Option<Due>,
}

impl JobError {
    fn new(kind: JobErrorKind, message: String, snooze: Option<Due>) -> Self {
        Self {
            kind,
            message,
            source: None,
            snooze,
        }
    }

    /// A failure that running the job again may fix.
    pub fn retryable(message: impl Into<String>) -> Self {
        Self::new(JobErrorKind::Retryable, message.into(), None)
    }

    /// A failure that running the job again cannot fix.
    pub fn permanent(message: impl Into<String>) -> Self {
        Self::new(JobErrorKind::Permanent, message.into(), None)
    }

    /// "Try again at `at`": the row becomes due at `at` and **no attempt is counted** (River's
    /// `JobSnooze`). For a job that is not ready yet — a rate limit's `Retry-After`, a
    /// payment still being settled. A time not in the future makes the job due again at
    /// once; a non-retryable job may snooze too (it did not act).
    ///
    /// The relays move a snoozed job to the scheduled table until then: it leaves its
    /// aggregate's order like a scheduled event (the aggregate's later jobs go on) and
    /// comes back with its attempts so far (book: The job queue, Snoozing and deadlines).
    ///
    /// ```
    /// use outbox_kernel::job::{JobError, JobErrorKind};
    /// use outbox_kernel::schedule::Due;
    ///
    /// let at = "2026-12-08T09:00:00Z".parse().unwrap();
    /// let snooze = JobError::snooze_until(at);
    /// assert_eq!(snooze.kind(), JobErrorKind::Snoozed);
    /// assert_eq!(snooze.snooze(), Some(Due::At(at)));
    /// assert!(!snooze.is_permanent());
    /// ```
    pub fn snooze_until(at: DateTime<Utc>) -> Self {
        Self::new(
            JobErrorKind::Snoozed,
            format!("snoozed until {}", at.to_rfc3339()),
            Some(Due::At(at)),
        )
    }

    /// "Try again in `delay`", measured by the relay's clock when it reads the outcome; see
    /// [`snooze_until`](Self::snooze_until).
    pub fn snooze_for(delay: Duration) -> Self {
        Self::new(
            JobErrorKind::Snoozed,
            format!("snoozed for {delay:?}"),
            Some(Due::After(delay)),
        )
    }

    /// When a snoozed job asks to run again; `None` for a failure.
    pub fn snooze(&self) -> Option<Due> {
        self.snooze
    }

    /// Attaches the underlying error (kept as the [`source`](std::error::Error::source)).
    #[must_use]
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Arc::new(source));
        self
    }

    /// Whether running the job again may help.
    pub fn kind(&self) -> JobErrorKind {
        self.kind
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Whether the failure is permanent.
    pub fn is_permanent(&self) -> bool {
        self.kind == JobErrorKind::Permanent
    }
}

/// Why a job did not succeed, as attached to the [`PublishError`] the dispatcher returns
/// (its [`source`](std::error::Error::source), so a test or an alert hook can downcast it).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JobFailure {
    /// No handler is registered for the envelope's event type (permanent).
    #[error("no handler for event type `{event_type}` (handled: {})", handled.join(", "))]
    NoHandler {
        /// The envelope's event type.
        event_type: String,
        /// The event types the dispatcher handles.
        handled: Vec<&'static str>,
    },
    /// The payload does not decode to the handler's contract (permanent).
    #[error("cannot decode the job: {source}")]
    Undecodable {
        /// The decode error, naming the field.
        #[source]
        source: DecodeError,
    },
    /// The handler failed.
    #[error("job handler failed: {0}")]
    Handler(#[source] JobError),
    /// The handler panicked (retryable; the panic is caught).
    #[error("job handler panicked: {message}")]
    Panicked {
        /// The panic message, when it was a string.
        message: String,
    },
    /// The handler ran past its deadline ([`JobDispatcherBuilder::deadline`]) and was
    /// cancelled: a failed attempt (a timeout; a non-retryable job goes `failed`).
    #[error("job handler ran past its deadline of {deadline:?} and was cancelled")]
    DeadlineExceeded {
        /// The deadline.
        deadline: Duration,
    },
}

impl JobFailure {
    /// The [`PublishError`] the relay classifies: transient for a retryable handler error or
    /// a panic, permanent otherwise; `self` is its source.
    pub fn into_publish_error(self) -> PublishError {
        let kind = match &self {
            Self::Handler(error) => match (error.kind, error.snooze) {
                (JobErrorKind::Snoozed, Some(due)) => {
                    return PublishError::snoozed(due).with_source(self);
                }
                (JobErrorKind::Permanent, _) => PublishErrorKind::Rejected,
                _ => PublishErrorKind::Unavailable,
            },
            Self::Panicked { .. } => PublishErrorKind::Unavailable,
            Self::DeadlineExceeded { .. } => PublishErrorKind::Timeout,
            Self::NoHandler { .. } | Self::Undecodable { .. } => PublishErrorKind::Rejected,
        };
        PublishError::new(kind, self.to_string()).with_source(self)
    }
}

/// A job dispatcher's configuration was rejected by [`JobDispatcherBuilder::build`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JobDispatcherError {
    /// Two handlers for one event type: which one should run would be a guess.
    #[error("two job handlers for event type `{event_type}`")]
    DuplicateHandler {
        /// The event type.
        event_type: &'static str,
    },
    /// No handler at all: every job would go dead.
    #[error("a job dispatcher needs at least one handler")]
    NoHandlers,
    /// A deadline of zero: every job would be cancelled before it starts.
    #[error("a job deadline must be above zero (event type: {})", event_type.unwrap_or("every handler"))]
    ZeroDeadline {
        /// The event type of [`deadline_for`](JobDispatcherBuilder::deadline_for), `None` for
        /// the default [`deadline`](JobDispatcherBuilder::deadline).
        event_type: Option<&'static str>,
    },
    /// A deadline for an event type that has no handler (a typo would go unnoticed).
    #[error("a deadline for event type `{event_type}`, which has no handler")]
    DeadlineWithoutHandler {
        /// The event type.
        event_type: &'static str,
    },
}

type JobFuture = Pin<Box<dyn Future<Output = Result<(), JobError>> + Send + 'static>>;

/// A handler with its contract erased: decodes the envelope and starts the job.
trait ErasedHandler: Send + Sync {
    fn start(&self, envelope: &Envelope) -> Result<JobFuture, DecodeError>;
}

struct Typed<C, F> {
    handler: F,
    contract: PhantomData<fn() -> C>,
}

impl<C, F, Fut> ErasedHandler for Typed<C, F>
where
    C: IntegrationEvent,
    F: Fn(C, &Envelope) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), JobError>> + Send + 'static,
{
    fn start(&self, envelope: &Envelope) -> Result<JobFuture, DecodeError> {
        let event = crate::envelope::EnvelopeConfig::decode_written::<C>(envelope)?;
        Ok(Box::pin((self.handler)(event, envelope)))
    }
}

/// Builds a [`JobDispatcher`]: one handler per event type. No default handler: an event
/// type without one is dead-lettered ([`JobFailure::NoHandler`]).
#[must_use]
#[derive(Default)]
pub struct JobDispatcherBuilder {
    handlers: Vec<(&'static str, Box<dyn ErasedHandler>)>,
    deadline: Option<Duration>,
    deadlines: Vec<(&'static str, Duration)>,
}

impl fmt::Debug for JobDispatcherBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobDispatcherBuilder")
            .field(
                "event_types",
                &self.handlers.iter().map(|(t, _)| *t).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl JobDispatcherBuilder {
    /// Registers `handler` for contract `C`'s event type ([`IntegrationEvent::EVENT_TYPE`]).
    ///
    /// The handler receives the decoded contract and the envelope (message id, correlation
    /// id, headers…). Its future must be `Send + 'static`: copy what it needs from the
    /// envelope before an `async move` block (see the [module example](self)).
    pub fn handler<C, F, Fut>(mut self, handler: F) -> Self
    where
        C: IntegrationEvent,
        F: Fn(C, &Envelope) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), JobError>> + Send + 'static,
    {
        self.handlers.push((
            C::EVENT_TYPE,
            Box::new(Typed {
                handler,
                contract: PhantomData,
            }),
        ));
        self
    }

    /// The longest any job may run (default: no deadline of its own, only the relay's
    /// publish timeout over the whole batch). A job still running at its deadline is
    /// cancelled — its future dropped at its next `.await` — and counts as a failed attempt
    /// ([`JobFailure::DeadlineExceeded`], a timeout: retried after the backoff, or `failed`
    /// when the job is not retryable). Code that blocks the thread without awaiting cannot
    /// be cancelled: give such work to `spawn_blocking` and await it.
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// The deadline of contract `C`'s jobs, over the default [`deadline`](Self::deadline).
    pub fn deadline_for<C: IntegrationEvent>(mut self, deadline: Duration) -> Self {
        self.deadlines.push((C::EVENT_TYPE, deadline));
        self
    }

    /// Checks the handlers and deadlines and builds the dispatcher.
    ///
    /// # Errors
    /// [`JobDispatcherError::DuplicateHandler`] for two handlers of one event type,
    /// [`JobDispatcherError::NoHandlers`] for none, [`JobDispatcherError::ZeroDeadline`]
    /// for a deadline of zero, [`JobDispatcherError::DeadlineWithoutHandler`] for a deadline
    /// of an event type without a handler.
    pub fn build(self) -> Result<JobDispatcher, JobDispatcherError> {
        if self.handlers.is_empty() {
            return Err(JobDispatcherError::NoHandlers);
        }
        if self.deadline == Some(Duration::ZERO) {
            return Err(JobDispatcherError::ZeroDeadline { event_type: None });
        }
        let mut handlers = BTreeMap::new();
        for (event_type, handler) in self.handlers {
            let registered = Registered {
                handler,
                deadline: self.deadline,
            };
            if handlers.insert(event_type, registered).is_some() {
                return Err(JobDispatcherError::DuplicateHandler { event_type });
            }
        }
        for (event_type, deadline) in self.deadlines {
            if deadline.is_zero() {
                return Err(JobDispatcherError::ZeroDeadline {
                    event_type: Some(event_type),
                });
            }
            let Some(registered) = handlers.get_mut(event_type) else {
                return Err(JobDispatcherError::DeadlineWithoutHandler { event_type });
            };
            registered.deadline = Some(deadline);
        }
        Ok(JobDispatcher {
            handlers: Arc::new(handlers),
        })
    }
}

/// A handler and its deadline.
struct Registered {
    handler: Box<dyn ErasedHandler>,
    deadline: Option<Duration>,
}

/// Runs outbox rows as local jobs; see the [module documentation](self). Cheap to clone.
#[derive(Clone)]
pub struct JobDispatcher {
    handlers: Arc<BTreeMap<&'static str, Registered>>,
}

impl fmt::Debug for JobDispatcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobDispatcher")
            .field("event_types", &self.event_types())
            .finish()
    }
}

impl JobDispatcher {
    /// A builder with no handler.
    pub fn builder() -> JobDispatcherBuilder {
        JobDispatcherBuilder::default()
    }

    /// The event types with a handler, sorted.
    pub fn event_types(&self) -> Vec<&'static str> {
        self.handlers.keys().copied().collect()
    }

    /// Runs the job of one envelope: decode, handler, classification (see the
    /// [module documentation](self)).
    ///
    /// # Errors
    /// A [`PublishError`] whose source is the [`JobFailure`].
    pub async fn dispatch(&self, envelope: &Envelope) -> MessageOutcome {
        let Some(registered) = self.handlers.get(envelope.event_type.as_str()) else {
            tracing::error!(
                message_id = %envelope.message_id,
                event_type = %envelope.event_type,
                "no job handler for this event type"
            );
            return Err(JobFailure::NoHandler {
                event_type: envelope.event_type.clone(),
                handled: self.event_types(),
            }
            .into_publish_error());
        };
        let job = registered
            .handler
            .start(envelope)
            .map_err(|source| JobFailure::Undecodable { source }.into_publish_error())?;
        let span = tracing::info_span!(
            "outbox.job",
            message_id = %envelope.message_id,
            event_type = %envelope.event_type,
        );
        let run = AssertUnwindSafe(job).catch_unwind().instrument(span);
        let finished = match registered.deadline {
            None => Ok(run.await),
            Some(deadline) => tokio::time::timeout(deadline, run)
                .await
                .map_err(|_| JobFailure::DeadlineExceeded { deadline }),
        };
        let outcome = match finished {
            Ok(Ok(Ok(()))) => Ok(()),
            Ok(Ok(Err(error))) => Err(JobFailure::Handler(error)),
            Ok(Err(panic)) => Err(JobFailure::Panicked {
                message: crate::__private::panic_message(panic.as_ref()),
            }),
            Err(deadline) => Err(deadline),
        };
        outcome.map_err(|failure| {
            if let JobFailure::Handler(error) = &failure
                && error.kind == JobErrorKind::Snoozed
            {
                tracing::debug!(
                    message_id = %envelope.message_id,
                    event_type = %envelope.event_type,
                    %error,
                    "job snoozed"
                );
                return failure.into_publish_error();
            }
            tracing::warn!(
                message_id = %envelope.message_id,
                event_type = %envelope.event_type,
                error = %failure,
                "job failed"
            );
            failure.into_publish_error()
        })
    }
}

impl Publisher for JobDispatcher {
    /// Runs the batch's jobs in order, stopping an aggregate after its first failure
    /// ([`publish_in_order`]).
    async fn publish(&self, batch: &[Envelope]) -> BatchOutcome {
        Ok(publish_in_order(batch, |envelope| self.dispatch(envelope)).await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::publish::ErrorClass;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};

    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
    struct MailRequestedV1 {
        order_id: String,
        to: String,
    }

    // A hand-written contract (the derive is not available inside this crate).
    impl IntegrationEvent for MailRequestedV1 {
        const EVENT_TYPE: &'static str = "test.notifications.mail-requested.v1";
        const NAME: &'static str = "test.notifications.mail-requested";
        const VERSION: u32 = 1;
        const AGGREGATE_TYPE: &'static str = "order";
        const KEY_FIELD: &'static str = "order_id";
        fn aggregate_id(&self) -> String {
            self.order_id.clone()
        }
    }

    fn mail(order: &str, to: &str) -> Envelope {
        Envelope::from_event(&MailRequestedV1 {
            order_id: order.into(),
            to: to.into(),
        })
        .expect("encodes")
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
    }

    fn source(error: &PublishError) -> &JobFailure {
        std::error::Error::source(error)
            .and_then(|source| source.downcast_ref::<JobFailure>())
            .expect("a JobFailure source")
    }

    #[test]
    fn builder_rejects_duplicates_and_empty() {
        let duplicate = JobDispatcher::builder()
            .handler(|_: MailRequestedV1, _: &Envelope| async { Ok(()) })
            .handler(|_: MailRequestedV1, _: &Envelope| async { Ok(()) })
            .build();
        assert_eq!(
            duplicate.err(),
            Some(JobDispatcherError::DuplicateHandler {
                event_type: "test.notifications.mail-requested.v1"
            })
        );
        assert_eq!(
            JobDispatcher::builder().build().err(),
            Some(JobDispatcherError::NoHandlers)
        );
    }

    #[test]
    fn classifies_every_outcome() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        let jobs = JobDispatcher::builder()
            .handler(move |mail: MailRequestedV1, envelope: &Envelope| {
                let log = Arc::clone(&log);
                let id = envelope.message_id;
                async move {
                    log.lock().expect("lock").push((mail.to.clone(), id));
                    match mail.to.as_str() {
                        "flaky" => Err(JobError::retryable("mail server down")),
                        "invalid" => Err(JobError::permanent("no such mailbox")),
                        "panic" => panic!("handler bug"),
                        _ => Ok(()),
                    }
                }
            })
            .build()
            .expect("valid");
        assert_eq!(jobs.event_types(), ["test.notifications.mail-requested.v1"]);
        let rt = runtime();
        let ok = mail("o-1", "ada@example.com");
        assert!(rt.block_on(jobs.dispatch(&ok)).is_ok());
        assert_eq!(seen.lock().expect("lock")[0].1, ok.message_id);

        let flaky = rt
            .block_on(jobs.dispatch(&mail("o-1", "flaky")))
            .unwrap_err();
        assert_eq!(flaky.class(), ErrorClass::Transient);
        assert!(flaky.to_string().contains("mail server down"), "{flaky}");
        assert!(matches!(source(&flaky), JobFailure::Handler(e) if !e.is_permanent()));

        let invalid = rt
            .block_on(jobs.dispatch(&mail("o-1", "invalid")))
            .unwrap_err();
        assert_eq!(invalid.class(), ErrorClass::Permanent);

        let panicked = rt
            .block_on(jobs.dispatch(&mail("o-1", "panic")))
            .unwrap_err();
        assert_eq!(panicked.class(), ErrorClass::Transient);
        assert!(
            matches!(source(&panicked), JobFailure::Panicked { message } if message == "handler bug")
        );

        let mut unknown = mail("o-1", "x");
        unknown.event_type = "test.notifications.sms-requested.v1".into();
        let error = rt.block_on(jobs.dispatch(&unknown)).unwrap_err();
        assert!(error.is_permanent());
        assert!(
            error
                .to_string()
                .contains("no handler for event type `test.notifications.sms-requested.v1`"),
            "{error}"
        );
        assert!(matches!(
            source(&error),
            JobFailure::NoHandler { event_type, handled }
                if event_type == "test.notifications.sms-requested.v1"
                    && handled == &["test.notifications.mail-requested.v1"]
        ));

        let mut malformed = mail("o-1", "x");
        malformed.payload = serde_json::json!({ "order_id": "o-1" }).into();
        let error = rt.block_on(jobs.dispatch(&malformed)).unwrap_err();
        assert!(error.is_permanent());
        assert!(matches!(source(&error), JobFailure::Undecodable { .. }));
        assert!(error.to_string().contains("missing field `to`"), "{error}");
    }

    #[test]
    fn a_batch_stops_an_aggregate_after_its_first_failure() {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&calls);
        let jobs = JobDispatcher::builder()
            .handler(move |mail: MailRequestedV1, _: &Envelope| {
                let log = Arc::clone(&log);
                async move {
                    log.lock().expect("lock").push(mail.to.clone());
                    if mail.to == "flaky" {
                        Err(JobError::retryable("down"))
                    } else {
                        Ok(())
                    }
                }
            })
            .build()
            .expect("valid");
        let batch = [
            mail("a", "flaky"),
            mail("b", "one"),
            mail("a", "after"),
            mail("b", "two"),
        ];
        let outcomes = runtime()
            .block_on(jobs.publish(&batch))
            .expect("no batch error");
        assert_eq!(*calls.lock().expect("lock"), ["flaky", "one", "two"]);
        assert!(outcomes[0].is_err());
        assert!(outcomes[1].is_ok());
        assert_eq!(
            outcomes[2].as_ref().map_err(PublishError::kind),
            Err(PublishErrorKind::NotAttempted)
        );
        assert!(outcomes[3].is_ok());
    }

    #[test]
    fn deadlines_are_validated() {
        let handler = |_: MailRequestedV1, _: &Envelope| async { Ok(()) };
        assert_eq!(
            JobDispatcher::builder()
                .handler(handler)
                .deadline(Duration::ZERO)
                .build()
                .err(),
            Some(JobDispatcherError::ZeroDeadline { event_type: None })
        );
        assert_eq!(
            JobDispatcher::builder()
                .handler(handler)
                .deadline_for::<MailRequestedV1>(Duration::ZERO)
                .build()
                .err(),
            Some(JobDispatcherError::ZeroDeadline {
                event_type: Some("test.notifications.mail-requested.v1")
            })
        );
        struct OtherV1;
        impl serde::Serialize for OtherV1 {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_unit()
            }
        }
        impl<'de> serde::Deserialize<'de> for OtherV1 {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                <()>::deserialize(d).map(|()| OtherV1)
            }
        }
        impl schemars::JsonSchema for OtherV1 {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                "OtherV1".into()
            }
            fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
                <()>::json_schema(generator)
            }
        }
        impl IntegrationEvent for OtherV1 {
            const EVENT_TYPE: &'static str = "test.other.thing.v1";
            const NAME: &'static str = "test.other.thing";
            const VERSION: u32 = 1;
            const AGGREGATE_TYPE: &'static str = "thing";
            const KEY_FIELD: &'static str = "id";
            fn aggregate_id(&self) -> String {
                String::new()
            }
        }
        assert_eq!(
            JobDispatcher::builder()
                .handler(handler)
                .deadline_for::<OtherV1>(Duration::from_secs(1))
                .build()
                .err(),
            Some(JobDispatcherError::DeadlineWithoutHandler {
                event_type: "test.other.thing.v1"
            })
        );
    }

    #[test]
    fn a_job_past_its_deadline_is_cancelled_and_counts_as_a_timeout() {
        let finished = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&finished);
        let jobs = JobDispatcher::builder()
            .handler(move |mail: MailRequestedV1, _: &Envelope| {
                let flag = Arc::clone(&flag);
                async move {
                    if mail.to == "slow" {
                        tokio::time::sleep(Duration::from_secs(3600)).await;
                        flag.store(true, AtomicOrdering::SeqCst);
                    }
                    Ok(())
                }
            })
            .deadline(Duration::from_secs(3600 * 24))
            .deadline_for::<MailRequestedV1>(Duration::from_millis(50))
            .build()
            .expect("valid");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("runtime");
        assert!(rt.block_on(jobs.dispatch(&mail("o-1", "quick"))).is_ok());
        let error = rt
            .block_on(jobs.dispatch(&mail("o-1", "slow")))
            .unwrap_err();
        assert_eq!(error.kind(), PublishErrorKind::Timeout);
        assert!(matches!(
            source(&error),
            JobFailure::DeadlineExceeded { deadline } if *deadline == Duration::from_millis(50)
        ));
        assert!(
            !finished.load(AtomicOrdering::SeqCst),
            "the slow job was dropped"
        );
    }

    #[test]
    fn a_snooze_is_not_a_failure() {
        let at: DateTime<Utc> = "2026-12-08T09:00:00Z".parse().expect("time");
        let jobs = JobDispatcher::builder()
            .handler(move |mail: MailRequestedV1, _: &Envelope| async move {
                match mail.to.as_str() {
                    "later" => Err(JobError::snooze_until(at)),
                    _ => Err(JobError::snooze_for(Duration::from_secs(90))),
                }
            })
            .build()
            .expect("valid");
        let rt = runtime();
        let error = rt
            .block_on(jobs.dispatch(&mail("o-1", "later")))
            .unwrap_err();
        assert_eq!(error.kind(), PublishErrorKind::Snoozed);
        assert_eq!(error.snooze(), Some(Due::At(at)));
        assert!(!error.is_permanent());
        let error = rt
            .block_on(jobs.dispatch(&mail("o-1", "soon")))
            .unwrap_err();
        assert_eq!(error.snooze(), Some(Due::After(Duration::from_secs(90))));
        // A snooze stops its aggregate's later jobs in the batch, like a failure.
        let outcomes = rt
            .block_on(jobs.publish(&[mail("a", "later"), mail("a", "later")]))
            .expect("outcomes");
        assert_eq!(
            outcomes[1].as_ref().map_err(PublishError::kind),
            Err(PublishErrorKind::NotAttempted)
        );
    }
}
