//! An in-process broker: a [`Publisher`] that keeps what it receives in memory, for tests and
//! the embedded demo.
//!
//! It records every accepted envelope in arrival order (inspectable as a whole or per
//! aggregate), fans them out to subscribers, and lets a test play the broker's failures:
//!
//! - [`go_down`](InProcessBroker::go_down) / [`come_up`](InProcessBroker::come_up): while
//!   down, every batch fails with [`PublishErrorKind::Unavailable`](crate::publish::PublishErrorKind::Unavailable);
//! - [`fail_messages`](InProcessBroker::fail_messages): a rule that fails chosen messages
//!   (a poison message, a rejected one);
//! - [`crash_after_next_publish`](InProcessBroker::crash_after_next_publish): the next batch
//!   is recorded, then the publisher "crashes" before the relay can mark the rows — it
//!   either never answers ([`AfterPublish::Hang`], abort the relay's task to play a process
//!   crash) or loses the acknowledgement ([`AfterPublish::LoseAck`], a transient error);
//! - [`pause`](InProcessBroker::pause) / [`resume`](InProcessBroker::resume): batches wait
//!   before being recorded, so a test can hold a relay in the middle of a batch.
//!
//! Messages of an aggregate are published in batch order, and an aggregate's later messages
//! are not published after one of its messages failed ([`publish_in_order`]).
//!
//! ```
//! use outbox_kernel::Envelope;
//! use outbox_kernel::in_process::InProcessBroker;
//! use outbox_kernel::publish::Publisher;
//! # use outbox_kernel::IntegrationEvent;
//! # use schemars::JsonSchema;
//! # use serde::{Deserialize, Serialize};
//! # #[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
//! # #[integration_event(name = "bookstore.catalog.book-added.v1", key = book_id)]
//! # pub struct BookAddedV1 { pub book_id: String }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let broker = InProcessBroker::new();
//! let envelope = Envelope::from_event(&BookAddedV1 { book_id: "dune".into() })?;
//!
//! broker.go_down();
//! let error = broker.publish(std::slice::from_ref(&envelope)).await.unwrap_err();
//! assert!(error.is_transient());
//! assert!(broker.published().is_empty());
//!
//! broker.come_up();
//! let outcomes = broker.publish(std::slice::from_ref(&envelope)).await?;
//! assert!(outcomes[0].is_ok());
//! assert_eq!(broker.published_for("book", "dune").len(), 1);
//! # Ok(())
//! # }
//! ```

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{Notify, broadcast};
use uuid::Uuid;

use crate::envelope::Envelope;
use crate::publish::{BatchOutcome, MessageOutcome, PublishError, Publisher, publish_in_order};

/// Capacity of each subscriber's queue; a subscriber that falls further behind loses the
/// oldest messages (`RecvError::Lagged`).
pub const SUBSCRIBER_CAPACITY: usize = 65_536;

/// What the broker does right after it recorded a batch, instead of acknowledging it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AfterPublish {
    /// Never answer: the relay waits forever, as a process frozen (or killed) between
    /// publish and mark. Abort the relay's task to play the crash.
    Hang,
    /// Answer with a transient error ("acknowledgement lost"): the relay retries and the
    /// message is published a second time, with the same message id.
    LoseAck,
}

type Rule = Arc<dyn Fn(&Envelope) -> Option<PublishError> + Send + Sync>;

#[derive(Default)]
struct State {
    down: bool,
    paused: bool,
    waiting: usize,
    calls: u64,
    hangs: u64,
    published: Vec<Envelope>,
    after_publish: VecDeque<AfterPublish>,
    rule: Option<Rule>,
}

struct Inner {
    state: Mutex<State>,
    changed: Notify,
    subscribers: broadcast::Sender<Envelope>,
}

/// The in-process broker. Cheap to clone: clones share one broker. See the
/// [module documentation](self).
#[derive(Clone)]
pub struct InProcessBroker {
    inner: Arc<Inner>,
}

impl Default for InProcessBroker {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for InProcessBroker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state();
        f.debug_struct("InProcessBroker")
            .field("down", &state.down)
            .field("paused", &state.paused)
            .field("published", &state.published.len())
            .field("calls", &state.calls)
            .finish_non_exhaustive()
    }
}

impl InProcessBroker {
    /// An empty broker that is up.
    pub fn new() -> Self {
        let (subscribers, _) = broadcast::channel(SUBSCRIBER_CAPACITY);
        Self {
            inner: Arc::new(Inner {
                state: Mutex::new(State::default()),
                changed: Notify::new(),
                subscribers,
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Every update leaves the state consistent: ignore poisoning.
        self.inner
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn update<T>(&self, change: impl FnOnce(&mut State) -> T) -> T {
        let result = change(&mut self.state());
        self.inner.changed.notify_waiters();
        result
    }

    /// Makes every following batch fail with [`PublishErrorKind::Unavailable`]
    /// (nothing is recorded).
    ///
    /// [`PublishErrorKind::Unavailable`]: crate::publish::PublishErrorKind::Unavailable
    pub fn go_down(&self) {
        self.update(|state| state.down = true);
    }

    /// Accepts batches again.
    pub fn come_up(&self) {
        self.update(|state| state.down = false);
    }

    /// Whether the broker accepts batches.
    pub fn is_up(&self) -> bool {
        !self.state().down
    }

    /// Makes the next batch (one per call) end with `after` once it is recorded.
    pub fn crash_after_next_publish(&self, after: AfterPublish) {
        self.update(|state| state.after_publish.push_back(after));
    }

    /// Fails every message for which `rule` returns an error (e.g. a poison message),
    /// replacing the previous rule. Later messages of the same aggregate in the same batch
    /// are then not attempted.
    pub fn fail_messages(
        &self,
        rule: impl Fn(&Envelope) -> Option<PublishError> + Send + Sync + 'static,
    ) {
        self.update(|state| state.rule = Some(Arc::new(rule)));
    }

    /// Removes the rule set by [`fail_messages`](Self::fail_messages).
    pub fn clear_failures(&self) {
        self.update(|state| state.rule = None);
    }

    /// Holds every following batch before it is recorded, until [`resume`](Self::resume).
    pub fn pause(&self) {
        self.update(|state| state.paused = true);
    }

    /// Releases the batches held by [`pause`](Self::pause).
    pub fn resume(&self) {
        self.update(|state| state.paused = false);
    }

    /// Number of batches currently held by [`pause`](Self::pause).
    pub fn waiting(&self) -> usize {
        self.state().waiting
    }

    /// Number of `publish` calls so far.
    pub fn calls(&self) -> u64 {
        self.state().calls
    }

    /// Number of batches that ended in [`AfterPublish::Hang`] so far: recorded, then never
    /// answered (each an injected crash between publish and mark). Never decreases, also
    /// when the hanging relay is aborted.
    pub fn hangs(&self) -> u64 {
        self.state().hangs
    }

    /// Every envelope accepted so far, in arrival order (duplicates included).
    pub fn published(&self) -> Vec<Envelope> {
        self.state().published.clone()
    }

    /// Number of envelopes accepted so far (duplicates included).
    pub fn len(&self) -> usize {
        self.state().published.len()
    }

    /// Whether nothing was accepted so far.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The message ids accepted so far, in arrival order.
    pub fn message_ids(&self) -> Vec<Uuid> {
        self.state()
            .published
            .iter()
            .map(|envelope| envelope.message_id)
            .collect()
    }

    /// The envelopes of one aggregate, in arrival order.
    pub fn published_for(&self, aggregate_type: &str, aggregate_id: &str) -> Vec<Envelope> {
        self.state()
            .published
            .iter()
            .filter(|e| e.aggregate_type == aggregate_type && e.aggregate_id == aggregate_id)
            .cloned()
            .collect()
    }

    /// Forgets every recorded envelope.
    pub fn clear(&self) {
        self.update(|state| state.published.clear());
    }

    /// A receiver of every envelope accepted from now on (for an inbox, a demo consumer).
    pub fn subscribe(&self) -> broadcast::Receiver<Envelope> {
        self.inner.subscribers.subscribe()
    }

    /// Waits until `condition` holds for the broker, or `timeout` passes. Returns whether
    /// it holds.
    pub async fn wait_until(
        &self,
        timeout: Duration,
        mut condition: impl FnMut(&InProcessBroker) -> bool,
    ) -> bool {
        let wait = async {
            loop {
                let changed = self.inner.changed.notified();
                tokio::pin!(changed);
                changed.as_mut().enable();
                if condition(self) {
                    return;
                }
                changed.await;
            }
        };
        tokio::time::timeout(timeout, wait).await.is_ok()
    }

    /// Waits until at least `count` envelopes were accepted, or `timeout` passes. Returns
    /// whether they were.
    pub async fn wait_for_published(&self, count: usize, timeout: Duration) -> bool {
        self.wait_until(timeout, |broker| broker.len() >= count)
            .await
    }

    /// Waits until at least `count` batches are held by [`pause`](Self::pause), or
    /// `timeout` passes. Returns whether they are.
    pub async fn wait_for_waiting(&self, count: usize, timeout: Duration) -> bool {
        self.wait_until(timeout, |broker| broker.waiting() >= count)
            .await
    }

    async fn wait_while_paused(&self) {
        let mut waiting: Option<Waiting<'_>> = None;
        loop {
            let first = {
                let mut state = self.state();
                if !state.paused {
                    break;
                }
                let first = waiting.is_none();
                if first {
                    state.waiting += 1;
                    waiting = Some(Waiting(self));
                }
                first
            };
            if first {
                // Tell `wait_for_waiting` before listening ourselves (no self-wake-up).
                self.inner.changed.notify_waiters();
            }
            let changed = self.inner.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if !self.state().paused {
                break;
            }
            changed.await;
        }
        drop(waiting);
    }

    fn accept(&self, envelope: &Envelope) -> MessageOutcome {
        let mut state = self.state();
        if let Some(rule) = &state.rule
            && let Some(error) = rule(envelope)
        {
            return Err(error);
        }
        state.published.push(envelope.clone());
        drop(state);
        // No subscriber is not an error.
        let _ = self.inner.subscribers.send(envelope.clone());
        Ok(())
    }
}

/// One batch held by [`InProcessBroker::pause`]; uncounted when it leaves the wait, also
/// when its relay is aborted while it waits.
struct Waiting<'a>(&'a InProcessBroker);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0
            .update(|state| state.waiting = state.waiting.saturating_sub(1));
    }
}

impl Publisher for InProcessBroker {
    async fn publish(&self, batch: &[Envelope]) -> BatchOutcome {
        self.update(|state| state.calls += 1);
        self.wait_while_paused().await;
        if self.state().down {
            return Err(PublishError::unavailable("the in-process broker is down"));
        }
        let outcomes =
            publish_in_order(batch, |envelope| std::future::ready(self.accept(envelope))).await;
        self.inner.changed.notify_waiters();
        let after = self.update(|state| state.after_publish.pop_front());
        match after {
            None => Ok(outcomes),
            Some(AfterPublish::LoseAck) => Err(PublishError::unavailable(
                "connection lost before the acknowledgement (injected)",
            )),
            Some(AfterPublish::Hang) => {
                self.update(|state| state.hangs += 1);
                tracing::warn!(
                    messages = batch.len(),
                    "in-process broker: batch recorded, now hanging before the acknowledgement \
                     (injected crash)"
                );
                std::future::pending().await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::EnvelopeParts;

    fn envelope(aggregate: &str) -> Envelope {
        Envelope::from_parts(EnvelopeParts {
            message_id: Uuid::now_v7(),
            event_type: "test.thing.happened.v1".into(),
            occurred_at: chrono::Utc::now(),
            correlation_id: None,
            causation_id: None,
            traceparent: None,
            tracestate: None,
            aggregate_type: "thing".into(),
            aggregate_id: aggregate.into(),
            headers: Default::default(),
            payload: serde_json::json!({}).into(),
        })
        .expect("valid event type")
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime")
    }

    #[test]
    fn records_fails_and_notifies_subscribers() {
        runtime().block_on(async {
            let broker = InProcessBroker::new();
            let mut subscriber = broker.subscribe();
            broker.fail_messages(|e| {
                (e.aggregate_id == "poison").then(|| PublishError::rejected("poison"))
            });
            let batch = [envelope("a"), envelope("poison"), envelope("b")];
            let outcomes = broker.publish(&batch).await.expect("up");
            assert!(outcomes[0].is_ok() && outcomes[1].is_err() && outcomes[2].is_ok());
            assert_eq!(broker.len(), 2);
            assert_eq!(
                subscriber.recv().await.expect("delivered").message_id,
                batch[0].message_id
            );
            broker.clear_failures();
            broker.crash_after_next_publish(AfterPublish::LoseAck);
            assert!(broker.publish(&batch[1..2]).await.is_err());
            assert_eq!(broker.len(), 3, "recorded before the lost acknowledgement");
            assert_eq!(broker.calls(), 2);
        });
    }

    #[test]
    fn pause_holds_batches_and_hang_never_answers() {
        runtime().block_on(async {
            let broker = InProcessBroker::new();
            broker.pause();
            let held = tokio::spawn({
                let broker = broker.clone();
                async move { broker.publish(&[envelope("a")]).await }
            });
            assert!(broker.wait_for_waiting(1, Duration::from_secs(5)).await);
            assert!(broker.is_empty());
            broker.resume();
            assert!(held.await.expect("joined").is_ok());
            assert_eq!(broker.len(), 1);
            assert_eq!(broker.waiting(), 0);

            assert_eq!(broker.hangs(), 0);
            broker.crash_after_next_publish(AfterPublish::Hang);
            let hanging = tokio::spawn({
                let broker = broker.clone();
                async move { broker.publish(&[envelope("b")]).await }
            });
            assert!(broker.wait_for_published(2, Duration::from_secs(5)).await);
            assert!(
                broker
                    .wait_until(Duration::from_secs(5), |broker| broker.hangs() == 1)
                    .await
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
            assert!(!hanging.is_finished());
            hanging.abort();
            assert_eq!(broker.hangs(), 1, "an aborted hang still counts");
        });
    }
}
