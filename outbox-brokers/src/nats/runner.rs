//! [`NatsConsumerRunner`]: a durable JetStream pull consumer feeding an inbox consumer.

use std::sync::atomic::Ordering;
use std::time::Duration;

use async_nats::connection::State;
use async_nats::jetstream::consumer::{AckPolicy, DeliverPolicy, PullConsumer, pull};
use async_nats::jetstream::{self, AckKind};
use futures_util::StreamExt as _;
use outbox_core::policy::Backoff;
use outbox_seaorm::inbox::Consumer;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{NatsError, is_broker_header};
use outbox_seaorm::inbox::ConsumerError;
use outbox_seaorm::inbox::partitioned::LeaseHeld;

use crate::settle::{Settlement, redelivery_pause, settle, with_requeued_redelivery};

/// Default `ack_wait` of the durable consumer: 5 s. The runner sends a progress
/// acknowledgement every `ack_wait / 2` while the inbox works on a message, so a slow
/// handler is not redelivered; what `ack_wait` bounds is how long a delivery lost with a
/// killed runner or a dropped connection holds its durable back (JetStream's own default,
/// 30 s, stalled a consumer killed every ~11 s for minutes). Longer: fewer redeliveries
/// when progress acknowledgements are delayed (a saturated connection), slower recovery.
pub const DEFAULT_ACK_WAIT: Duration = Duration::from_secs(5);
/// Default `max_ack_pending` of the durable consumer: 1, one delivery outstanding at a time.
/// The runner settles one message at a time in stream order anyway; with more outstanding,
/// JetStream hands out newer messages while older ones wait for their redelivery (held by a
/// runner that died or stalls, or pending across a server restart), and an aggregate's
/// messages are applied out of order.
pub const DEFAULT_MAX_ACK_PENDING: i64 = 1;
/// Default number of messages asked for by one pull request: 100.
pub const DEFAULT_BATCH_SIZE: usize = 100;
/// Default time a pull request waits for messages when the stream has none: 2 s.
pub const DEFAULT_FETCH_WAIT: Duration = Duration::from_secs(2);

/// Added to every pause that must outlast a server-side timer (nak delay, `ack_wait`), so
/// the server has moved the messages to its redelivery queue when the next pull arrives.
const TIMER_SLACK: Duration = Duration::from_millis(250);

/// The durable consumer name used for inbox consumer `consumer` when none is given: the
/// name with `.` replaced by `_` (NATS consumer names cannot hold dots; inbox consumer names
/// never hold underscores, so distinct consumers keep distinct names).
///
/// ```
/// assert_eq!(
///     outbox_brokers::nats::durable_name_for("inventory.reserve-stock"),
///     "inventory_reserve-stock"
/// );
/// ```
pub fn durable_name_for(consumer: &str) -> String {
    consumer.replace('.', "_")
}

/// What a runner did until it was shut down.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunnerReport {
    /// Messages settled and acknowledged.
    pub acked: u64,
    /// Messages the inbox could not settle (database unavailable), handed back for
    /// redelivery.
    pub redelivered: u64,
    /// Messages received but handed back unprocessed, to keep them in order behind one that
    /// must be redelivered, after a reconnect, or at shutdown.
    pub held_back: u64,
    /// Broker errors retried (pull requests, consumer creation).
    pub broker_errors: u64,
    /// Reconnects of the client the runner noticed.
    pub reconnects: u64,
}

impl std::ops::AddAssign for RunnerReport {
    fn add_assign(&mut self, other: Self) {
        self.acked += other.acked;
        self.redelivered += other.redelivered;
        self.held_back += other.held_back;
        self.broker_errors += other.broker_errors;
        self.reconnects += other.reconnects;
    }
}

impl NatsConsumerRunner {
    /// The runner of one partition: this runner's settings on durable `durable` filtered by
    /// `filter`, settling with `inbox` (fenced by the partition's lease), under `held`.
    pub(super) fn for_partition(
        &self,
        inbox: Consumer,
        held: LeaseHeld,
        durable: String,
        filter: String,
    ) -> Self {
        Self {
            client: self.client.clone(),
            context: self.context.clone(),
            inbox,
            stream: self.stream.clone(),
            durable,
            filter_subject: Some(filter),
            deliver_policy: self.deliver_policy,
            ack_wait: self.ack_wait,
            max_deliver: self.max_deliver,
            max_ack_pending: self.max_ack_pending,
            batch_size: self.batch_size,
            fetch_wait: self.fetch_wait,
            redelivery_backoff: self.redelivery_backoff,
            retry_backoff: self.retry_backoff,
            held: Some(held),
        }
    }

    /// The filter subject, if any.
    pub(super) fn filter(&self) -> Option<&str> {
        self.filter_subject.as_deref()
    }

    /// The inbox consumer's name.
    pub(super) fn inbox_name(&self) -> &str {
        self.inbox.name()
    }
}

/// Configures a [`NatsConsumerRunner`]; see [`NatsConsumerRunner::builder`].
///
/// | setting | default |
/// |---|---|
/// | durable consumer name | the inbox consumer's name with `_` for `.` ([`durable_name_for`]) |
/// | subject filter | none: every subject of the stream |
/// | deliver policy | all: from the first message still in the stream |
/// | `ack_wait` | 5 s ([`DEFAULT_ACK_WAIT`]); the runner sends progress acknowledgements while a message takes longer |
/// | `max_deliver` | unlimited: the inbox dead-letters poison messages itself; a redelivery means the consumer's database was unavailable, which must not drop a message |
/// | `max_ack_pending` | 1 ([`DEFAULT_MAX_ACK_PENDING`]): nothing is handed out while an older delivery is outstanding |
/// | pull batch | 100 messages ([`DEFAULT_BATCH_SIZE`]), waiting up to 2 s ([`DEFAULT_FETCH_WAIT`]) |
/// | redelivery backoff | 1 s doubling up to 30 s, with jitter: the delay before an unsettled message is delivered again |
/// | retry backoff | 250 ms doubling up to 10 s: between attempts while the broker is unreachable |
#[derive(Debug)]
#[must_use]
pub struct NatsConsumerRunnerBuilder {
    client: async_nats::Client,
    inbox: Consumer,
    stream: String,
    durable_name: Option<String>,
    filter_subject: Option<String>,
    deliver_policy: DeliverPolicy,
    ack_wait: Duration,
    max_deliver: i64,
    max_ack_pending: i64,
    batch_size: usize,
    fetch_wait: Duration,
    redelivery_backoff: Backoff,
    retry_backoff: Backoff,
}

impl NatsConsumerRunnerBuilder {
    /// The durable consumer's name (letters, digits, `-`, `_`).
    pub fn durable_name(mut self, name: impl Into<String>) -> Self {
        self.durable_name = Some(name.into());
        self
    }

    /// Only messages whose subject matches `filter` (wildcards allowed).
    pub fn filter_subject(mut self, filter: impl Into<String>) -> Self {
        self.filter_subject = Some(filter.into());
        self
    }

    /// Where a new durable consumer starts (default: all messages in the stream). Ignored
    /// when the consumer exists.
    pub fn deliver_policy(mut self, policy: DeliverPolicy) -> Self {
        self.deliver_policy = policy;
        self
    }

    /// How long JetStream waits for an acknowledgement before delivering a message again.
    /// Also how long the runner waits after a reconnect (see the module's guarantees).
    pub fn ack_wait(mut self, ack_wait: Duration) -> Self {
        self.ack_wait = ack_wait;
        self
    }

    /// Deliveries after which JetStream stops delivering a message (default: unlimited,
    /// `-1`).
    pub fn max_deliver(mut self, max_deliver: i64) -> Self {
        self.max_deliver = max_deliver;
        self
    }

    /// Unacknowledged messages JetStream hands out at most (default 1,
    /// [`DEFAULT_MAX_ACK_PENDING`]). More saves a round trip per message, but gives up order
    /// whenever a delivery is outstanding longer than the ones after it: a runner that died
    /// or stalls holding messages, a server restart, two runners on the durable.
    pub fn max_ack_pending(mut self, max_ack_pending: i64) -> Self {
        self.max_ack_pending = max_ack_pending;
        self
    }

    /// Messages asked for by one pull request.
    pub fn batch_size(mut self, messages: usize) -> Self {
        self.batch_size = messages;
        self
    }

    /// How long a pull request waits for messages when there are none.
    pub fn fetch_wait(mut self, wait: Duration) -> Self {
        self.fetch_wait = wait;
        self
    }

    /// Delay before a message the inbox could not settle is delivered again, by
    /// consecutive failure.
    pub fn redelivery_backoff(mut self, backoff: Backoff) -> Self {
        self.redelivery_backoff = backoff;
        self
    }

    /// Delay between attempts while the broker is unreachable, by consecutive failure.
    pub fn retry_backoff(mut self, backoff: Backoff) -> Self {
        self.retry_backoff = backoff;
        self
    }

    /// Checks the configuration and builds the runner (nothing is sent to the server yet).
    ///
    /// # Errors
    /// [`NatsError::Config`] for an invalid durable name, an empty batch, or a zero
    /// `ack_wait` or fetch wait.
    pub fn build(self) -> Result<NatsConsumerRunner, NatsError> {
        let durable = self
            .durable_name
            .unwrap_or_else(|| durable_name_for(self.inbox.name()));
        let valid = |name: &str| {
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        };
        if !valid(&durable) {
            return Err(NatsError::Config(format!(
                "invalid durable consumer name `{durable}`: letters, digits, `-` and `_` only"
            )));
        }
        if !valid(&self.stream) {
            return Err(NatsError::Config(format!(
                "invalid stream name `{}`: letters, digits, `-` and `_` only",
                self.stream
            )));
        }
        if self.batch_size == 0 {
            return Err(NatsError::Config(
                "the batch size must be at least 1".into(),
            ));
        }
        if self.max_ack_pending == 0 || self.max_ack_pending < -1 {
            return Err(NatsError::Config(format!(
                "max_ack_pending must be at least 1 (or -1, unlimited), not {}",
                self.max_ack_pending
            )));
        }
        if self.ack_wait.is_zero() || self.fetch_wait.is_zero() {
            return Err(NatsError::Config(
                "ack_wait and the fetch wait must be positive".into(),
            ));
        }
        Ok(NatsConsumerRunner {
            context: jetstream::new(self.client.clone()),
            client: self.client,
            inbox: self.inbox,
            stream: self.stream,
            durable,
            filter_subject: self.filter_subject,
            deliver_policy: self.deliver_policy,
            ack_wait: self.ack_wait,
            max_deliver: self.max_deliver,
            max_ack_pending: self.max_ack_pending,
            batch_size: self.batch_size,
            fetch_wait: self.fetch_wait,
            redelivery_backoff: self.redelivery_backoff,
            retry_backoff: self.retry_backoff,
            held: None,
        })
    }
}

/// Consumes a JetStream stream through a durable pull consumer and settles every message
/// through an inbox [`Consumer`]; see the [module documentation](super) for the guarantees.
///
/// The loop: pull a batch (up to `batch_size` messages, waiting up to the fetch wait);
/// settle each message in stream order ([`settle`]): acknowledge it when the inbox settled
/// it (applied, duplicate, ignored, parked or dead-lettered); when it did not (the consumer's
/// database is unavailable), stop, hand it and every later message of the batch back with
/// a nak delayed by the redelivery backoff, and pause that long, so they come back first and
/// in order. The durable hands out one delivery at a time (`max_ack_pending` 1), so that no
/// message is handed out while an older one is outstanding. While the client is disconnected
/// the runner waits with the retry backoff; after a reconnect it waits one `ack_wait` when a
/// delivery is unacknowledged (it may have been lost with the connection) before pulling.
/// Cancelling the token stops it after the message in progress; the messages it holds are
/// handed back at once.
#[derive(Debug)]
pub struct NatsConsumerRunner {
    client: async_nats::Client,
    context: jetstream::Context,
    inbox: Consumer,
    stream: String,
    durable: String,
    filter_subject: Option<String>,
    deliver_policy: DeliverPolicy,
    ack_wait: Duration,
    max_deliver: i64,
    max_ack_pending: i64,
    batch_size: usize,
    fetch_wait: Duration,
    redelivery_backoff: Backoff,
    retry_backoff: Backoff,
    /// A partition runner's lease: checked before every pull. Under a lease nobody else
    /// consumes the durable, so deliveries left unacknowledged at start are restarted from
    /// the ack floor at once instead of waiting for their `ack_wait`.
    held: Option<LeaseHeld>,
}

/// Why a batch stopped settling messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Halt {
    /// A message was not settled.
    Redeliver,
    /// The client reconnected during the batch: deliveries may have been lost.
    Reconnected,
    /// The runner is shutting down.
    Shutdown,
    /// The partition lease was lost: hand everything back at once, to the new owner.
    LeaseLost,
}

/// How a batch ended.
enum BatchEnd {
    /// Every message received was settled and acknowledged.
    Done,
    /// Messages were handed back for redelivery after `delay`: pause that long.
    Redeliver(Duration),
    /// The client reconnected: check for lost deliveries before the next pull.
    Reconnected,
    /// The broker failed (pull request refused, connection lost).
    Failed(String),
    /// Shut down.
    Cancelled,
}

/// Sleeps `delay` unless `shutdown` fires first; `true` when it did.
async fn pause(shutdown: &CancellationToken, delay: Duration) -> bool {
    tokio::select! {
        () = shutdown.cancelled() => true,
        () = tokio::time::sleep(delay) => false,
    }
}

impl NatsConsumerRunner {
    /// Starts configuring a runner that feeds `inbox` from the JetStream stream `stream` over
    /// `client` (see [`connect`](super::connect)).
    pub fn builder(
        client: async_nats::Client,
        inbox: Consumer,
        stream: impl Into<String>,
    ) -> NatsConsumerRunnerBuilder {
        NatsConsumerRunnerBuilder {
            client,
            inbox,
            stream: stream.into(),
            durable_name: None,
            filter_subject: None,
            deliver_policy: DeliverPolicy::All,
            ack_wait: DEFAULT_ACK_WAIT,
            max_deliver: -1,
            max_ack_pending: DEFAULT_MAX_ACK_PENDING,
            batch_size: DEFAULT_BATCH_SIZE,
            fetch_wait: DEFAULT_FETCH_WAIT,
            redelivery_backoff: Backoff::new()
                .with_min_delay(Duration::from_secs(1))
                .with_max_delay(Duration::from_secs(30)),
            retry_backoff: Backoff::new()
                .with_min_delay(Duration::from_millis(250))
                .with_max_delay(Duration::from_secs(10)),
        }
    }

    /// The durable consumer's name.
    pub fn durable_name(&self) -> &str {
        &self.durable
    }

    /// The stream's name.
    pub fn stream(&self) -> &str {
        &self.stream
    }

    /// The JetStream consumer configuration the runner creates.
    pub fn consumer_config(&self) -> pull::Config {
        pull::Config {
            durable_name: Some(self.durable.clone()),
            ack_policy: AckPolicy::Explicit,
            ack_wait: self.ack_wait,
            max_deliver: self.max_deliver,
            deliver_policy: self.deliver_policy,
            filter_subject: self.filter_subject.clone().unwrap_or_default(),
            max_ack_pending: self.max_ack_pending,
            ..Default::default()
        }
    }

    /// Creates the durable consumer, or updates it to this runner's configuration.
    ///
    /// # Errors
    /// [`NatsError::Stream`] when the stream is missing or the server refuses.
    pub async fn ensure_consumer(&self) -> Result<PullConsumer, NatsError> {
        let error = |message: String| NatsError::Stream {
            stream: self.stream.clone(),
            message,
        };
        let stream = self
            .context
            .get_stream(&self.stream)
            .await
            .map_err(|e| error(e.to_string()))?;
        let wanted = self.consumer_config();
        let consumer: PullConsumer = stream
            .get_or_create_consumer(&self.durable, wanted.clone())
            .await
            .map_err(|e| error(format!("consumer `{}`: {e}", self.durable)))?;
        let current = &consumer.cached_info().config;
        if current.ack_wait != wanted.ack_wait
            || current.max_deliver != wanted.max_deliver
            || current.filter_subject != wanted.filter_subject
            || current.max_ack_pending != wanted.max_ack_pending
        {
            tracing::info!(
                consumer = %self.durable,
                "updating the durable consumer to the runner's configuration"
            );
            return stream
                .create_consumer(wanted)
                .await
                .map_err(|e| error(format!("cannot update consumer `{}`: {e}", self.durable)));
        }
        Ok(consumer)
    }

    fn connects(&self) -> u64 {
        self.client.statistics().connects.load(Ordering::Relaxed)
    }

    /// Runs until `shutdown` is cancelled; see the [type documentation](Self).
    pub async fn run(self, shutdown: CancellationToken) -> RunnerReport {
        let consumer = self.inbox.clone();
        with_requeued_redelivery(&consumer, &shutdown, self.subscription(shutdown.clone())).await
    }

    /// The subscription loop of [`run`](Self::run).
    pub(super) async fn subscription(self, shutdown: CancellationToken) -> RunnerReport {
        let mut report = RunnerReport::default();
        let mut failures: u32 = 0;
        let mut redeliveries: u32 = 0;
        let mut consumer: Option<PullConsumer> = None;
        // At start, a crashed runner may have left unacknowledged deliveries.
        let mut check_lost = true;
        let mut seen_connects = self.connects();
        let consumer_name = self.inbox.name().to_owned();
        tracing::info!(
            consumer = %consumer_name,
            stream = %self.stream,
            durable = %self.durable,
            "NATS consumer runner started"
        );
        'run: while !shutdown.is_cancelled() {
            let failure = 'attempt: {
                if self.client.connection_state() != State::Connected {
                    break 'attempt Some("not connected to the NATS server".to_owned());
                }
                // A reconnect anywhere (during a batch or between two) may have lost
                // deliveries in the old connection.
                let connects = self.connects();
                if connects != seen_connects {
                    seen_connects = connects;
                    report.reconnects += 1;
                    check_lost = true;
                }
                let pull = match &consumer {
                    Some(pull) => pull.clone(),
                    None => match self.ensure_consumer().await {
                        Ok(pull) => {
                            consumer = Some(pull.clone());
                            pull
                        }
                        Err(error) => break 'attempt Some(error.to_string()),
                    },
                };
                if check_lost && self.held.is_some() {
                    match self.restart_at_ack_floor(&pull).await {
                        Ok(Some(restarted)) => {
                            consumer = Some(restarted);
                            check_lost = false;
                            continue 'run;
                        }
                        Ok(None) => check_lost = false,
                        Err(error) => break 'attempt Some(error),
                    }
                } else if check_lost {
                    match self.wait_for_lost(&pull, &shutdown).await {
                        Ok(true) => break 'run,
                        Ok(false) => check_lost = false,
                        Err(error) => break 'attempt Some(error),
                    }
                }
                match self
                    .batch(&pull, &shutdown, &mut report, &mut redeliveries)
                    .await
                {
                    BatchEnd::Done => None,
                    BatchEnd::Cancelled => break 'run,
                    BatchEnd::Redeliver(delay) => {
                        if pause(&shutdown, delay + TIMER_SLACK).await {
                            break 'run;
                        }
                        None
                    }
                    BatchEnd::Reconnected => {
                        check_lost = true;
                        None
                    }
                    BatchEnd::Failed(error) => {
                        // Recreate the consumer handle (it may have been deleted), and check
                        // for lost deliveries once the connection is back.
                        consumer = None;
                        check_lost = true;
                        Some(error)
                    }
                }
            };
            match failure {
                None => failures = 0,
                Some(error) => {
                    failures = failures.saturating_add(1);
                    report.broker_errors += 1;
                    let delay = self.retry_backoff.delay(failures);
                    tracing::warn!(
                        consumer = %consumer_name,
                        stream = %self.stream,
                        %error,
                        retry_in = ?delay,
                        "NATS consumer runner: broker error"
                    );
                    if pause(&shutdown, delay).await {
                        break;
                    }
                }
            }
        }
        tracing::info!(consumer = %consumer_name, ?report, "NATS consumer runner stopped");
        report
    }

    /// When the durable consumer has unacknowledged deliveries (lost with a connection, or
    /// left by a runner that stopped), waits one `ack_wait` so that JetStream queues them
    /// for redelivery — ahead of newer messages — before the next pull. `Ok(true)` when
    /// shut down meanwhile.
    async fn wait_for_lost(
        &self,
        pull: &PullConsumer,
        shutdown: &CancellationToken,
    ) -> Result<bool, String> {
        let info = pull.get_info().await.map_err(|e| e.to_string())?;
        if info.num_ack_pending == 0 {
            return Ok(false);
        }
        tracing::info!(
            consumer = %self.durable,
            unacknowledged = info.num_ack_pending,
            wait = ?self.ack_wait,
            "unacknowledged deliveries: waiting for their redelivery before pulling new messages"
        );
        Ok(pause(shutdown, self.ack_wait + TIMER_SLACK).await)
    }

    /// A partition runner's [`wait_for_lost`](Self::wait_for_lost): the lease makes the
    /// durable this runner's alone, so deliveries left unacknowledged (by a killed
    /// predecessor, or lost with a connection) are nobody's: the durable is recreated to
    /// deliver from the first unacknowledged message (`ack_floor + 1`), at once. `None`
    /// when nothing was pending.
    async fn restart_at_ack_floor(
        &self,
        pull: &PullConsumer,
    ) -> Result<Option<PullConsumer>, String> {
        let info = pull.get_info().await.map_err(|e| e.to_string())?;
        if info.num_ack_pending == 0 {
            return Ok(None);
        }
        let start = info.ack_floor.stream_sequence + 1;
        tracing::info!(
            consumer = %self.durable,
            unacknowledged = info.num_ack_pending,
            start_sequence = start,
            "unacknowledged deliveries of a partition: restarting the durable at its ack floor"
        );
        let stream = self
            .context
            .get_stream(&self.stream)
            .await
            .map_err(|e| e.to_string())?;
        stream
            .delete_consumer(&self.durable)
            .await
            .map_err(|e| format!("cannot delete consumer `{}`: {e}", self.durable))?;
        let mut config = self.consumer_config();
        config.deliver_policy = DeliverPolicy::ByStartSequence {
            start_sequence: start,
        };
        let restarted = stream
            .create_consumer(config)
            .await
            .map_err(|e| format!("cannot recreate consumer `{}`: {e}", self.durable))?;
        Ok(Some(restarted))
    }

    /// Pulls one batch and settles it; see the [type documentation](Self).
    async fn batch(
        &self,
        pull: &PullConsumer,
        shutdown: &CancellationToken,
        report: &mut RunnerReport,
        redeliveries: &mut u32,
    ) -> BatchEnd {
        if self.held.as_ref().is_some_and(|held| !held.holds()) {
            tracing::info!(consumer = %self.durable, "partition lease no longer held: not pulling");
            return BatchEnd::Cancelled;
        }
        let connects = self.connects();
        let request = pull
            .batch()
            .max_messages(self.batch_size)
            .expires(self.fetch_wait)
            .messages();
        let mut messages = tokio::select! {
            () = shutdown.cancelled() => return BatchEnd::Cancelled,
            result = tokio::time::timeout(self.fetch_wait + Duration::from_secs(5), request) => {
                match result {
                    Ok(Ok(messages)) => messages,
                    Ok(Err(error)) => return BatchEnd::Failed(format!("pull request failed: {error}")),
                    Err(_) => return BatchEnd::Failed("pull request timed out".into()),
                }
            }
        };
        let mut halt: Option<Halt> = None;
        let mut drain_until = None;
        let mut held = Vec::new();
        let mut failed = None;
        loop {
            let next = match drain_until {
                None => tokio::select! {
                    biased;
                    () = shutdown.cancelled() => {
                        halt = Some(Halt::Shutdown);
                        drain_until = Some(Instant::now() + Duration::from_secs(1));
                        continue;
                    }
                    next = messages.next() => next,
                },
                Some(deadline) => tokio::time::timeout_at(deadline, messages.next())
                    .await
                    .unwrap_or_default(),
            };
            let message = match next {
                None => break,
                Some(Ok(message)) => message,
                Some(Err(error)) => {
                    failed = Some(format!("pull request failed: {error}"));
                    break;
                }
            };
            if halt.is_none() && self.connects() != connects {
                halt = Some(Halt::Reconnected);
            }
            if halt.is_some() {
                held.push(message);
                continue;
            }
            match self.settle(&message).await {
                Settlement::Ack(delivered) => {
                    *redeliveries = 0;
                    report.acked += 1;
                    tracing::trace!(consumer = %self.durable, ?delivered, "settled");
                    if let Err(error) = message.ack().await {
                        // Delivered again later; the inbox recognises the duplicate.
                        tracing::warn!(consumer = %self.durable, %error, "acknowledgement not sent");
                    }
                }
                Settlement::Redeliver(ConsumerError::LeaseLost { .. }) => {
                    halt = Some(Halt::LeaseLost);
                    drain_until = Some(Instant::now() + Duration::from_millis(200));
                    held.push(message);
                }
                Settlement::Redeliver(_) => {
                    report.redelivered += 1;
                    halt = Some(Halt::Redeliver);
                    // Keep receiving what this pull request still brings, to hand it back
                    // in order (bounded by the request's expiry).
                    drain_until = Some(Instant::now() + self.fetch_wait + Duration::from_secs(1));
                    held.push(message);
                }
            }
        }
        if halt.is_none() && self.connects() != connects {
            halt = Some(Halt::Reconnected);
        }
        let (delay, end) = match halt {
            None => return failed.map_or(BatchEnd::Done, BatchEnd::Failed),
            Some(Halt::Redeliver) => {
                *redeliveries = redeliveries.saturating_add(1);
                let delay =
                    redelivery_pause(&self.inbox, self.redelivery_backoff.delay(*redeliveries));
                (Some(delay), BatchEnd::Redeliver(delay))
            }
            Some(Halt::Reconnected) => (Some(self.ack_wait), BatchEnd::Reconnected),
            Some(Halt::Shutdown | Halt::LeaseLost) => (None, BatchEnd::Cancelled),
        };
        let handed_back = held.len();
        for message in held {
            if let Err(error) = message.ack_with(AckKind::Nak(delay)).await {
                tracing::debug!(consumer = %self.durable, %error, "nak not sent");
            }
        }
        // The unsettled message itself is counted in `redelivered`.
        let unsettled = usize::from(halt == Some(Halt::Redeliver));
        report.held_back +=
            u64::try_from(handed_back.saturating_sub(unsettled)).unwrap_or(u64::MAX);
        tracing::debug!(
            consumer = %self.durable,
            ?halt,
            handed_back,
            ?delay,
            "batch stopped: messages handed back in stream order"
        );
        end
    }

    /// Settles one message, extending its `ack_wait` with progress acknowledgements while
    /// the inbox works on it.
    async fn settle(&self, message: &jetstream::Message) -> Settlement {
        let headers = headers_of(message);
        let settling = settle(&self.inbox, &headers, &message.payload);
        tokio::pin!(settling);
        let period = (self.ack_wait / 2).max(Duration::from_millis(100));
        let mut progress = tokio::time::interval_at(Instant::now() + period, period);
        loop {
            tokio::select! {
                settlement = &mut settling => return settlement,
                _ = progress.tick() => {
                    if let Err(error) = message.ack_with(AckKind::Progress).await {
                        tracing::debug!(%error, "progress acknowledgement not sent");
                    }
                }
            }
        }
    }
}

/// The envelope's headers of a message: every header but the broker's own (`Nats-…`).
fn headers_of(message: &async_nats::Message) -> Vec<(String, String)> {
    let mut headers = Vec::new();
    if let Some(map) = &message.headers {
        for (name, values) in map.iter() {
            let name: &str = name.as_ref();
            if is_broker_header(name) {
                continue;
            }
            for value in values {
                headers.push((name.to_owned(), value.as_str().to_owned()));
            }
        }
    }
    headers
}
