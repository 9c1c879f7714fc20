//! Job-queue mode: with no broker, the outbox table is the queue. A
//! relay with a [`JobDispatcher`] as its publisher runs each row as a local job by event type;
//! **worker keys** say which relays may claim a row; a per-row **`retryable`** flag keeps
//! side effects that must never run twice automatically (money leaving) from being retried.
//!
//! # The producer side: [`Job`]
//!
//! Each job type is an [`Outbox`](crate::Outbox) setting, applied at commit and **stored on
//! the row** (`worker_key`, `retryable`): a later change of configuration does not alter
//! rows already written, as in the seed where the row carries `Retryable`.
//!
//! ```
//! use outbox_seaorm::Outbox;
//! use outbox_seaorm::job::Job;
//!
//! let outbox = Outbox::builder()
//!     .outbox_table("jobs_outbox")
//!     .inbox_table("jobs_inbox")
//!     .job(Job::new("bookstore.notifications.order-confirmation-requested.v1").worker_key("notifications"))
//!     .job(Job::new("bookstore.payments.payout-requested.v1").worker_key("payments").retryable(false))
//!     .build()?;
//! let payout = outbox.job("bookstore.payments.payout-requested.v1").expect("configured");
//! assert_eq!(payout.worker_key_ref(), Some("payments"));
//! assert!(!payout.is_retryable());
//! // Event types without a job entry: no worker key, retryable (a broker relay's rows).
//! assert!(outbox.job("bookstore.ordering.order-placed.v1").is_none());
//! # Ok::<(), outbox_seaorm::ConfigError>(())
//! ```
//!
//! # The relay side
//!
//! ```no_run
//! # use outbox_seaorm::{Outbox, relay::Relay};
//! # use outbox_seaorm::job::{FailedJob, JobDispatcher, JobError};
//! # async fn run(db: sea_orm::DatabaseConnection, outbox: Outbox, jobs: JobDispatcher) -> Result<(), Box<dyn std::error::Error>> {
//! let relay = Relay::builder(db, outbox, jobs)
//!     .worker_keys(["payments"])     // claim only rows whose worker key is `payments`
//!     .batch_size(10)                // jobs are slow: small batches (publish timeout per batch)
//!     .alert_hook(|job: FailedJob| async move {
//!         // e-mail the payments team, open a ticket, page someone…
//!         tracing::error!(message_id = %job.envelope.message_id, error = %job.error, "payout failed");
//!         Ok::<(), std::io::Error>(())
//!     })
//!     .build()?;
//! # let _ = relay; Ok(()) }
//! ```
//!
//! - **Worker keys** ([`RelayBuilder::worker_keys`](crate::relay::RelayBuilder::worker_keys)):
//!   a keyed relay claims only rows whose `worker_key` is one of its keys — never rows of
//!   other keys, never rows without a key. Unlike the seed, where "never give one key to two
//!   servers" is an operations rule, each key is a **lease** (`worker/<key>`): one relay
//!   holds it at a time (with [`Ordering::PerAggregate`](outbox_core::policy::Ordering), and
//!   always on SQLite), a second relay configured with the same key is a hot standby that
//!   takes over when the first stops renewing it (one lease TTL). With
//!   [`Ordering::Unordered`](outbox_core::policy::Ordering) on PostgreSQL / MariaDB there is
//!   no lease: any number of relays share a key's rows through `SKIP LOCKED`, which the seed
//!   could not do. Per-aggregate order is kept *within a worker key* (an e-mail in backoff
//!   does not hold back the same order's payout). A relay without worker keys (the default)
//!   claims every row, keyed or not: do not run one on a table whose keyed rows belong to
//!   job relays.
//! - **`retryable = false`**: on a failed attempt, whatever the error class (a timeout
//!   included: "failed" often means "unknown"), the relay marks the row `failed` (one
//!   more attempt, `last_error`), counts it in [`metric::FAILED`](outbox_core::metric::FAILED) with
//!   its event type, logs it with its message id, and calls the relay's [`AlertHook`]
//!   **once**, after the mark is committed. A `failed` row is never retried, never claimed
//!   and never purged; under [`DeadLetterPolicy::Block`](outbox_core::policy::DeadLetterPolicy)
//!   it holds back the later rows of its aggregate (and worker key) like a dead row, under
//!   `Skip` it does not. An operator resolves it with `requeue` (run it again) or `skip`
//!   (it happened, or it never should), both recorded in the operator log
//!   ([`crate::ops`]; `outbox status` counts failed rows, `outbox dead list --status failed`
//!   lists them). The fast path never runs non-retryable rows: it leaves them to the relay.
//! - **Retryable jobs** behave like messages: a transient error is retried after the
//!   relay's backoff with jitter, then dead-lettered after `max_attempts`; a permanent one
//!   (a payload that does not decode, no handler, [`JobError::permanent`]) goes `dead` at
//!   once. `last_error` keeps the last failure's message after a later success (the row's
//!   history; `published_at` says it succeeded).
//!
//! The alert hook is best effort: it runs after the commit that marked the row, so a process
//! that dies in between loses the alert but not the row, which stays `failed` and counted in
//! [`metric::FAILED_ROWS`](outbox_core::metric::FAILED_ROWS) (alert on it). A hook that
//! fails or panics is logged; the row stays `failed`.
//!
//! See [`outbox_core::job`] for the handlers, their error classes and the at-least-once
//! semantics (a crash between a handler and its mark runs the handler again).

use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;

use chrono::{DateTime, Utc};
use futures_util::FutureExt as _;
use outbox_core::{Envelope, PublishError};

pub use outbox_core::job::{
    JobDispatcher, JobDispatcherBuilder, JobDispatcherError, JobError, JobErrorKind, JobFailure,
};
pub use outbox_core::name::{MAX_WORKER_KEY_CHARS, WorkerKeyError};

pub use crate::config::{Job, Unique, UniqueBy, UniqueScope};

/// A row whose `retryable` flag is off and that failed: what an [`AlertHook`] receives.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct FailedJob {
    /// The row's `seq`.
    pub seq: i64,
    /// The envelope (message id, event type, payload…).
    pub envelope: Envelope,
    /// The row's worker key.
    pub worker_key: Option<String>,
    /// Attempts made, this one included.
    pub attempts: i32,
    /// Why it failed (for a [`JobDispatcher`], the [`JobFailure`] is its source).
    pub error: PublishError,
    /// When the relay marked it `failed` (the outbox's clock).
    pub failed_at: DateTime<Utc>,
    /// The relay instance that ran it.
    pub relay: String,
}

/// An alert hook's error: logged by the relay, never fatal.
pub type AlertError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// The future an [`AlertHook`] returns.
pub type AlertFuture<'a> = Pin<Box<dyn Future<Output = Result<(), AlertError>> + Send + 'a>>;

/// Called by the relay exactly once per row it marks `failed`, after the mark is committed
/// (see the [module documentation](self)): tell a person — e-mail a team, open a ticket,
/// page someone.
///
/// Implemented for closures `Fn(FailedJob) -> impl Future<Output = Result<(), E>>` whose
/// error converts into a boxed error:
///
/// ```
/// use outbox_seaorm::job::{AlertHook, FailedJob};
///
/// fn hook() -> impl AlertHook {
///     |job: FailedJob| async move {
///         tracing::error!(message_id = %job.envelope.message_id, "job failed: {}", job.error);
///         Ok::<(), std::io::Error>(())
///     }
/// }
/// # let _ = hook();
/// ```
pub trait AlertHook: Send + Sync + 'static {
    /// Raises the alert for `job`. An error is logged; the row stays `failed`.
    fn alert(&self, job: FailedJob) -> AlertFuture<'_>;
}

impl<F, Fut, E> AlertHook for F
where
    F: Fn(FailedJob) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: Into<AlertError>,
{
    fn alert(&self, job: FailedJob) -> AlertFuture<'_> {
        let future = self(job);
        Box::pin(async move { future.await.map_err(Into::into) })
    }
}

/// Runs `hook` for `job`, logging an error or a panic (never fatal).
pub(crate) async fn raise_alert(hook: &dyn AlertHook, job: FailedJob) {
    let message_id = job.envelope.message_id;
    let seq = job.seq;
    match AssertUnwindSafe(hook.alert(job)).catch_unwind().await {
        Ok(Ok(())) => tracing::debug!(%message_id, seq, "alert raised for a failed job"),
        Ok(Err(error)) => {
            tracing::error!(%message_id, seq, %error, "the alert hook failed; the row stays failed");
        }
        Err(panic) => tracing::error!(
            %message_id,
            seq,
            panic = %outbox_core::__private::panic_message(panic.as_ref()),
            "the alert hook panicked; the row stays failed"
        ),
    }
}

/// A shared alert hook (the relay's).
#[derive(Clone)]
pub(crate) struct SharedAlertHook(pub(crate) std::sync::Arc<dyn AlertHook>);

impl fmt::Debug for SharedAlertHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AlertHook")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn a_failing_or_panicking_hook_is_contained() {
        let calls = Arc::new(AtomicUsize::new(0));
        let seen = Arc::clone(&calls);
        let hook = move |job: FailedJob| {
            let seen = Arc::clone(&seen);
            async move {
                seen.fetch_add(1, Ordering::SeqCst);
                match job.seq {
                    1 => Ok(()),
                    2 => Err(std::io::Error::other("smtp down")),
                    _ => panic!("hook bug"),
                }
            }
        };
        let envelope = Envelope::from_parts(outbox_core::envelope::EnvelopeParts {
            message_id: uuid::Uuid::now_v7(),
            event_type: "shop.payments.payout-requested.v1".into(),
            occurred_at: Utc::now(),
            correlation_id: None,
            causation_id: None,
            traceparent: None,
            tracestate: None,
            aggregate_type: "payout".into(),
            aggregate_id: "p-1".into(),
            headers: Default::default(),
            payload: serde_json::json!({}).into(),
        })
        .unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        for seq in 1..=3 {
            let job = FailedJob {
                seq,
                envelope: envelope.clone(),
                worker_key: Some("payments".into()),
                attempts: 1,
                error: PublishError::rejected("declined"),
                failed_at: Utc::now(),
                relay: "relay-1".into(),
            };
            runtime.block_on(raise_alert(&hook, job));
        }
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }
}
