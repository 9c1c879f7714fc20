//! The publishers of the log benchmarks: a no-op one or NATS JetStream (a fresh stream per
//! measurement), behind a [`Recorder`] that counts confirmed events, wakes a waiter when a
//! count is reached, and can note when each event was confirmed.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use outbox_brokers::nats::{self, NatsPublisher, NatsStream, async_nats};
use outbox_brokers::route::Route;
use outbox_core::Envelope;
use outbox_core::publish::{BatchOutcome, Publisher};
use tokio::sync::Notify;
use uuid::Uuid;

use super::{BoxError, PublisherKind};

/// The publisher a relay gets.
pub(crate) enum AnyPublisher {
    /// Accepts every batch at once.
    Noop,
    /// NATS JetStream.
    Nats(Box<NatsPublisher>),
}

impl Publisher for AnyPublisher {
    async fn publish(&self, batch: &[Envelope]) -> BatchOutcome {
        match self {
            Self::Noop => Ok(vec![Ok(()); batch.len()]),
            Self::Nats(publisher) => publisher.publish(batch).await,
        }
    }
}

/// Counts what its publisher confirmed; see the [module documentation](self).
pub(crate) struct Recorder {
    inner: AnyPublisher,
    confirmed: AtomicUsize,
    target: AtomicUsize,
    reached: Notify,
    arrivals: Option<Mutex<HashMap<Uuid, Instant>>>,
    /// Events that occurred before this (µs since the epoch) are counted as stale, not
    /// confirmed: a redelivery of an earlier round would otherwise pass for this one's.
    not_before: AtomicI64,
    stale: AtomicUsize,
    /// When the first event was confirmed.
    first: std::sync::OnceLock<Instant>,
    /// `publish` calls.
    calls: AtomicUsize,
}

impl Recorder {
    /// Wraps `inner`; with `record`, notes the confirmation time of every event.
    pub(crate) fn new(inner: AnyPublisher, record: bool) -> Self {
        Self {
            inner,
            confirmed: AtomicUsize::new(0),
            target: AtomicUsize::new(usize::MAX),
            reached: Notify::new(),
            arrivals: record.then(Mutex::default),
            not_before: AtomicI64::new(i64::MIN),
            stale: AtomicUsize::new(0),
            first: std::sync::OnceLock::new(),
            calls: AtomicUsize::new(0),
        }
    }

    /// `publish` calls so far.
    pub(crate) fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// When the first event was confirmed.
    pub(crate) fn first(&self) -> Option<Instant> {
        self.first.get().copied()
    }

    /// Counts events that occurred before `at` as stale from now on.
    pub(crate) fn not_before(&self, at: chrono::DateTime<chrono::Utc>) {
        self.not_before
            .store(at.timestamp_micros(), Ordering::SeqCst);
    }

    /// Events confirmed that occurred before [`not_before`](Self::not_before).
    pub(crate) fn stale(&self) -> usize {
        self.stale.load(Ordering::SeqCst)
    }

    /// Events confirmed so far.
    pub(crate) fn confirmed(&self) -> usize {
        self.confirmed.load(Ordering::SeqCst)
    }

    /// Waits until `target` events are confirmed in all; `false` after `limit`.
    pub(crate) async fn wait_for(&self, target: usize, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        self.target.store(target, Ordering::SeqCst);
        loop {
            if self.confirmed() >= target {
                return true;
            }
            if tokio::time::timeout_at(deadline, self.reached.notified())
                .await
                .is_err()
            {
                return self.confirmed() >= target;
            }
        }
    }

    /// The confirmation times noted so far, emptied.
    pub(crate) fn take_arrivals(&self) -> HashMap<Uuid, Instant> {
        self.arrivals
            .as_ref()
            .and_then(|arrivals| {
                arrivals
                    .lock()
                    .ok()
                    .map(|mut map| std::mem::take(&mut *map))
            })
            .unwrap_or_default()
    }
}

impl Publisher for Recorder {
    async fn publish(&self, batch: &[Envelope]) -> BatchOutcome {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let outcome = self.inner.publish(batch).await;
        let now = Instant::now();
        if let Ok(outcomes) = &outcome {
            let (mut ok, mut stale) = (0, 0);
            let not_before = self.not_before.load(Ordering::SeqCst);
            let mut arrivals = self.arrivals.as_ref().and_then(|map| map.lock().ok());
            for (envelope, result) in batch.iter().zip(outcomes) {
                if result.is_ok() && envelope.occurred_at.timestamp_micros() < not_before {
                    stale += 1;
                } else if result.is_ok() {
                    ok += 1;
                    if let Some(arrivals) = arrivals.as_mut() {
                        arrivals.insert(envelope.message_id, now);
                    }
                }
            }
            drop(arrivals);
            self.stale.fetch_add(stale, Ordering::SeqCst);
            if ok > 0 {
                self.first.get_or_init(|| now);
            }
            let total = self.confirmed.fetch_add(ok, Ordering::SeqCst) + ok;
            if total >= self.target.load(Ordering::SeqCst) {
                self.reached.notify_one();
            }
        }
        outcome
    }
}

/// Where the publishers of one kind go: nothing, or a NATS server.
pub(crate) enum Sink {
    /// The no-op publisher.
    Noop,
    /// NATS JetStream at this client's server.
    Nats(async_nats::Client),
}

/// A destination made for one measurement, deleted by [`Destination::delete`].
pub(crate) struct Destination {
    stream: Option<(async_nats::Client, NatsStream)>,
}

impl Sink {
    /// Connects to the broker of `kind`.
    pub(crate) async fn connect(kind: PublisherKind, nats_url: &str) -> Result<Self, BoxError> {
        match kind {
            PublisherKind::Noop => Ok(Self::Noop),
            PublisherKind::Nats => {
                let client = nats::connect(nats_url).await?;
                let deadline = Instant::now() + Duration::from_secs(10);
                while client.connection_state() != async_nats::connection::State::Connected {
                    if Instant::now() > deadline {
                        return Err(format!("cannot connect to NATS at {nats_url}").into());
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Ok(Self::Nats(client))
            }
        }
    }

    /// A publisher to a fresh destination (a new JetStream stream, file storage).
    pub(crate) async fn fresh(&self) -> Result<(AnyPublisher, Destination), BoxError> {
        match self {
            Self::Noop => Ok((AnyPublisher::Noop, Destination { stream: None })),
            Self::Nats(client) => {
                let id = Uuid::now_v7().simple().to_string();
                let stream = NatsStream::new(format!("LOG{id}"), [format!("log{id}.>")]);
                stream.ensure(client).await?;
                let publisher = NatsPublisher::builder(client.clone())
                    .route(Route::event_type(format!("log{id}.")))
                    .build();
                Ok((
                    AnyPublisher::Nats(Box::new(publisher)),
                    Destination {
                        stream: Some((client.clone(), stream)),
                    },
                ))
            }
        }
    }
}

impl Destination {
    /// Deletes the destination.
    pub(crate) async fn delete(self) -> Result<(), BoxError> {
        if let Some((client, stream)) = self.stream {
            stream.delete(&client).await?;
        }
        Ok(())
    }
}
