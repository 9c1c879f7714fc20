//! [`RabbitConsumerRunner`]: a durable queue, settled through the inbox, acknowledged after.

use std::future::Future;
use std::time::Duration;

use futures_util::StreamExt as _;
use lapin::options::{
    BasicAckOptions, BasicCancelOptions, BasicConsumeOptions, BasicNackOptions, BasicQosOptions,
    QueueBindOptions, QueueDeclareOptions,
};
use lapin::protocol::{AMQPErrorKind, AMQPSoftError};
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{Channel, Connection, ConnectionProperties, ErrorKind};
use outbox_seaorm::inbox::partitioned::LeaseHeld;
use outbox_seaorm::inbox::{Consumer, ConsumerError};
use tokio_util::sync::CancellationToken;

use super::{RabbitError, declare_exchange, received_headers, short};
use crate::settle::{Settlement, redelivery_pause, settle, with_requeued_redelivery};

/// Default prefetch (unacknowledged messages the broker sends ahead): 32.
pub const DEFAULT_PREFETCH: u16 = 32;
/// Default first delay before reconnecting after the connection failed: 500 ms.
pub const DEFAULT_RECONNECT_DELAY: Duration = Duration::from_millis(500);
/// Default longest delay between reconnection attempts (the delay doubles up to it): 30 s.
pub const DEFAULT_RECONNECT_DELAY_MAX: Duration = Duration::from_secs(30);
/// Default pause after a message could not be settled, before consuming again: 1 s.
pub const DEFAULT_REDELIVERY_DELAY: Duration = Duration::from_secs(1);
/// Default longest wait for an acknowledgement, a cancel or a close to be sent: 5 s.
pub const DEFAULT_ACK_TIMEOUT: Duration = Duration::from_secs(5);
/// How often a consuming session checks that its connection still lives.
const LIVENESS_CHECK: Duration = Duration::from_millis(100);

/// Configures a [`RabbitConsumerRunner`]. Defaults:
///
/// | setting | default |
/// |---|---|
/// | [`bind`](Self::bind) | `#` (every routing key) when no pattern is given |
/// | [`prefetch`](Self::prefetch) | [`DEFAULT_PREFETCH`] (32) |
/// | [`reconnect_delay`](Self::reconnect_delay) | [`DEFAULT_RECONNECT_DELAY`] (500 ms) doubling up to [`DEFAULT_RECONNECT_DELAY_MAX`] (30 s) |
/// | [`redelivery_delay`](Self::redelivery_delay) | [`DEFAULT_REDELIVERY_DELAY`] (1 s) |
/// | [`single_active_consumer`](Self::single_active_consumer) | `false` |
/// | [`queue_argument`](Self::queue_argument) | none: a classic durable queue |
/// | [`declare`](Self::declare) | `true`: exchange, queue and bindings declared on every connection |
/// | [`connect_timeout`](Self::connect_timeout) | 5 s |
/// | [`ack_timeout`](Self::ack_timeout) | [`DEFAULT_ACK_TIMEOUT`] (5 s) |
/// | [`connection_name`](Self::connection_name) | the consumer's name |
#[derive(Debug)]
#[must_use]
pub struct RabbitConsumerRunnerBuilder {
    uri: String,
    exchange: String,
    queue: String,
    consumer: Consumer,
    bindings: Vec<String>,
    prefetch: u16,
    reconnect_delay: Duration,
    reconnect_delay_max: Duration,
    redelivery_delay: Duration,
    arguments: FieldTable,
    declare: bool,
    connect_timeout: Duration,
    ack_timeout: Duration,
    connection_name: Option<String>,
}

impl RabbitConsumerRunnerBuilder {
    /// Binds the queue to the exchange with a topic pattern (`*` one word, `#` any number),
    /// e.g. `bookstore.ordering.#`. Repeatable; without any, the queue is bound with `#`.
    pub fn bind(mut self, pattern: impl Into<String>) -> Self {
        self.bindings.push(pattern.into());
        self
    }

    /// How many unacknowledged messages the broker sends ahead (`basic.qos`, default 32).
    /// Messages are still settled one at a time, in queue order.
    pub fn prefetch(mut self, prefetch: u16) -> Self {
        self.prefetch = prefetch.max(1);
        self
    }

    /// The first delay before reconnecting (default 500 ms) and the longest (default 30
    /// s); the delay doubles after each failed attempt and resets once consuming again.
    pub fn reconnect_delay(mut self, first: Duration, max: Duration) -> Self {
        self.reconnect_delay = first;
        self.reconnect_delay_max = max.max(first);
        self
    }

    /// The pause after a message could not be settled (the inbox's database failed),
    /// before the runner consumes again (default 1 s).
    pub fn redelivery_delay(mut self, delay: Duration) -> Self {
        self.redelivery_delay = delay;
        self
    }

    /// Declares the queue with `x-single-active-consumer` (default `false`): with several
    /// runners on the queue only one receives messages, the others stand by, so the
    /// queue's order is kept across instances. The queue's arguments cannot change once
    /// it exists.
    pub fn single_active_consumer(self, single: bool) -> Self {
        if single {
            self.queue_argument("x-single-active-consumer", AMQPValue::Boolean(true))
        } else {
            self
        }
    }

    /// Adds an argument to the queue declaration, e.g. `x-queue-type` = `quorum`. (A
    /// quorum queue has a delivery limit, 20 by default in RabbitMQ 4: a message nacked
    /// that often is dropped or dead-lettered by the broker.)
    pub fn queue_argument(mut self, name: &str, value: AMQPValue) -> Self {
        if let Ok(name) = ShortString::try_new(name) {
            self.arguments.insert(name, value);
        }
        self
    }

    /// Whether the exchange (durable, topic), the queue (durable) and the bindings are
    /// declared on every connection (default `true`). Without it they must exist.
    pub fn declare(mut self, declare: bool) -> Self {
        self.declare = declare;
        self
    }

    /// How long connecting and setting up the subscription may take (default 5 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long sending an acknowledgement (or a nack, a cancel, a close) may take before
    /// the session is given up and the connection reopened (default 5 s). A session also
    /// ends as soon as its connection is seen lost (checked every 100 ms): lapin can leave an
    /// acknowledgement issued while its connection dies pending forever.
    pub fn ack_timeout(mut self, timeout: Duration) -> Self {
        self.ack_timeout = timeout;
        self
    }

    /// The connection name shown in RabbitMQ's management tools (default: the consumer's
    /// name).
    pub fn connection_name(mut self, name: impl Into<String>) -> Self {
        self.connection_name = Some(name.into());
        self
    }

    /// Whether bindings were given.
    pub(super) fn has_bindings(&self) -> bool {
        !self.bindings.is_empty()
    }

    /// Checks the configuration. Does not connect: [`RabbitConsumerRunner::run`] does.
    ///
    /// # Errors
    /// [`RabbitError::Config`] for a URI that does not parse or a name over 255 bytes.
    pub fn build(mut self) -> Result<RabbitConsumerRunner, RabbitError> {
        self.uri
            .parse::<lapin::uri::AMQPUri>()
            .map_err(|error| RabbitError::Config(format!("invalid AMQP URI: {error}")))?;
        if self.bindings.is_empty() {
            self.bindings.push("#".to_owned());
        }
        for name in [&self.exchange, &self.queue]
            .into_iter()
            .chain(&self.bindings)
        {
            if ShortString::try_new(name.as_str()).is_err() {
                return Err(RabbitError::Config(format!(
                    "`{name}` is longer than 255 bytes"
                )));
            }
        }
        let connection_name = self
            .connection_name
            .unwrap_or_else(|| self.consumer.name().to_owned());
        Ok(RabbitConsumerRunner {
            uri: self.uri,
            exchange: self.exchange,
            queue: self.queue,
            consumer: self.consumer,
            bindings: self.bindings,
            prefetch: self.prefetch,
            reconnect_delay: self.reconnect_delay,
            reconnect_delay_max: self.reconnect_delay_max,
            redelivery_delay: self.redelivery_delay,
            arguments: self.arguments,
            declare: self.declare,
            connect_timeout: self.connect_timeout,
            ack_timeout: self.ack_timeout,
            connection_name,
            held: None,
        })
    }
}

/// Consumes a durable RabbitMQ queue bound to a topic exchange and settles every message
/// through an inbox [`Consumer`]: acknowledged (`basic.ack`) only after
/// [`settle`] said [`Settlement::Ack`]; on [`Settlement::Redeliver`] the message is nacked
/// with requeue and the channel closed, which puts the prefetched messages back in the
/// queue in order, then the runner consumes again after the redelivery delay. A lost
/// connection is reopened with backoff (the broker requeues what was not acknowledged).
/// See the [module documentation](super) for the guarantees.
#[derive(Debug)]
pub struct RabbitConsumerRunner {
    uri: String,
    exchange: String,
    queue: String,
    consumer: Consumer,
    bindings: Vec<String>,
    prefetch: u16,
    reconnect_delay: Duration,
    reconnect_delay_max: Duration,
    redelivery_delay: Duration,
    arguments: FieldTable,
    declare: bool,
    connect_timeout: Duration,
    ack_timeout: Duration,
    connection_name: String,
    /// A partition runner's lease: checked before every message is settled.
    held: Option<LeaseHeld>,
}

/// How a consuming session ended without an error.
enum Ended {
    Shutdown,
    Redeliver,
}

impl RabbitConsumerRunner {
    /// The runner of one partition: this runner's settings on queue `queue` bound with
    /// `binding` only, single active consumer, settling with `inbox` (fenced by the
    /// partition's lease).
    pub(super) fn for_partition(
        &self,
        inbox: Consumer,
        held: Option<LeaseHeld>,
        queue: String,
        binding: String,
    ) -> Self {
        let mut arguments = self.arguments.clone();
        arguments.insert(
            ShortString::from("x-single-active-consumer"),
            AMQPValue::Boolean(true),
        );
        Self {
            uri: self.uri.clone(),
            exchange: self.exchange.clone(),
            connection_name: format!("{} {queue}", self.connection_name),
            queue,
            consumer: inbox,
            bindings: vec![binding],
            prefetch: self.prefetch,
            reconnect_delay: self.reconnect_delay,
            reconnect_delay_max: self.reconnect_delay_max,
            redelivery_delay: self.redelivery_delay,
            arguments,
            declare: self.declare,
            connect_timeout: self.connect_timeout,
            ack_timeout: self.ack_timeout,
            held,
        }
    }

    /// The exchange.
    pub(super) fn exchange(&self) -> &str {
        &self.exchange
    }
}

impl RabbitConsumerRunner {
    /// Starts configuring a runner of `consumer` on `queue`, bound to `exchange`, on the
    /// broker at `uri`.
    pub fn builder(
        uri: impl Into<String>,
        exchange: impl Into<String>,
        queue: impl Into<String>,
        consumer: Consumer,
    ) -> RabbitConsumerRunnerBuilder {
        RabbitConsumerRunnerBuilder {
            uri: uri.into(),
            exchange: exchange.into(),
            queue: queue.into(),
            consumer,
            bindings: Vec::new(),
            prefetch: DEFAULT_PREFETCH,
            reconnect_delay: DEFAULT_RECONNECT_DELAY,
            reconnect_delay_max: DEFAULT_RECONNECT_DELAY_MAX,
            redelivery_delay: DEFAULT_REDELIVERY_DELAY,
            arguments: FieldTable::default(),
            declare: true,
            connect_timeout: Duration::from_secs(5),
            ack_timeout: DEFAULT_ACK_TIMEOUT,
            connection_name: None,
        }
    }

    /// The queue consumed.
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// The inbox consumer messages are handed to.
    pub fn consumer(&self) -> &Consumer {
        &self.consumer
    }

    /// Declares the exchange, the queue and its bindings once and disconnects: run it at
    /// deployment (or before the first publication), so that messages published before the
    /// runner first starts are not unroutable.
    ///
    /// # Errors
    /// A [`RabbitError`] when the broker cannot be reached or refuses the topology.
    pub async fn declare_topology(&self) -> Result<(), RabbitError> {
        let (connection, _channel) = self.open(true).await?;
        let _ = connection.close(200, "declared".into()).await;
        Ok(())
    }

    /// Consumes until `shutdown` is cancelled, reconnecting after failures. On shutdown the
    /// runner stops consuming, finishes the message in hand (settled and acknowledged) and
    /// closes the connection: prefetched messages go back to the queue.
    ///
    /// # Errors
    /// [`RabbitError::Refused`] when the broker refuses the topology or the subscription
    /// for good (e.g. a queue declared with other arguments); [`RabbitError::Config`].
    /// Connection failures are retried, not returned.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), RabbitError> {
        let consumer = self.consumer.clone();
        with_requeued_redelivery(&consumer, &shutdown, self.subscription(shutdown.clone())).await
    }

    /// The subscription loop of [`run`](Self::run).
    pub(super) async fn subscription(self, shutdown: CancellationToken) -> Result<(), RabbitError> {
        let mut delay = self.reconnect_delay;
        loop {
            if shutdown.is_cancelled() {
                return Ok(());
            }
            let mut consumed = false;
            let pause = match self.session(&shutdown, &mut consumed).await {
                Ok(Ended::Shutdown) => return Ok(()),
                Ok(Ended::Redeliver) => redelivery_pause(&self.consumer, self.redelivery_delay),
                Err(error @ (RabbitError::Refused { .. } | RabbitError::Config(_))) => {
                    tracing::error!(queue = %self.queue, %error, "RabbitMQ consumer runner stops");
                    return Err(error);
                }
                Err(error) => {
                    if consumed {
                        delay = self.reconnect_delay;
                    }
                    tracing::warn!(
                        queue = %self.queue,
                        %error,
                        retry_in = ?delay,
                        "RabbitMQ consumer runner: connection lost, reconnecting"
                    );
                    let pause = delay;
                    delay = (delay * 2).min(self.reconnect_delay_max);
                    pause
                }
            };
            tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                () = tokio::time::sleep(pause) => {}
            }
        }
    }

    /// Connects, sets up the channel and, with `declare`, the topology.
    async fn open(&self, declare: bool) -> Result<(Connection, Channel), RabbitError> {
        let setup = async {
            let properties = ConnectionProperties::default()
                .with_connection_name(LongString::from(self.connection_name.as_str()));
            let connection = Connection::connect(&self.uri, properties)
                .await
                .map_err(|e| classify("connect", e))?;
            let channel = connection
                .create_channel()
                .await
                .map_err(|e| classify("open a channel", e))?;
            channel
                .basic_qos(self.prefetch, BasicQosOptions::default())
                .await
                .map_err(|e| classify("basic.qos", e))?;
            if declare {
                declare_exchange(&channel, &self.exchange)
                    .await
                    .map_err(|e| classify(&format!("exchange `{}`", self.exchange), e))?;
                channel
                    .queue_declare(
                        short(&self.queue).map_err(|e| classify("queue name", e))?,
                        QueueDeclareOptions {
                            durable: true,
                            ..QueueDeclareOptions::default()
                        },
                        self.arguments.clone(),
                    )
                    .await
                    .map_err(|e| classify(&format!("queue `{}`", self.queue), e))?;
                for pattern in &self.bindings {
                    channel
                        .queue_bind(
                            short(&self.queue).map_err(|e| classify("queue name", e))?,
                            short(&self.exchange).map_err(|e| classify("exchange name", e))?,
                            short(pattern).map_err(|e| classify("binding", e))?,
                            QueueBindOptions::default(),
                            FieldTable::default(),
                        )
                        .await
                        .map_err(|e| classify(&format!("binding `{pattern}`"), e))?;
                }
            }
            Ok((connection, channel))
        };
        tokio::time::timeout(self.connect_timeout, setup)
            .await
            .map_err(|_| RabbitError::Timeout {
                context: "connect and subscribe".to_owned(),
                timeout: self.connect_timeout,
            })?
    }

    /// One connection: consume until shutdown, an unsettled message, or a failure.
    async fn session(
        &self,
        shutdown: &CancellationToken,
        consumed: &mut bool,
    ) -> Result<Ended, RabbitError> {
        let (connection, channel) = self.open(self.declare).await?;
        let mut deliveries = channel
            .basic_consume(
                short(&self.queue).map_err(|e| classify("queue name", e))?,
                ShortString::default(),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await
            .map_err(|e| classify(&format!("consume `{}`", self.queue), e))?;
        *consumed = true;
        tracing::info!(queue = %self.queue, consumer = self.consumer.name(), "RabbitMQ consumer runner: consuming");
        // Whatever waits on lapin below also waits on this: a session ends once its
        // connection is lost, whether or not lapin completes what was in flight.
        let lost = connection_lost(&connection, &channel);
        tokio::pin!(lost);
        let ended = loop {
            let next = tokio::select! {
                biased;
                () = shutdown.cancelled() => {
                    let cancel = channel.basic_cancel(deliveries.tag(), BasicCancelOptions::default());
                    let _ = tokio::time::timeout(self.ack_timeout, cancel).await;
                    break Ok(Ended::Shutdown);
                }
                next = deliveries.next() => next,
                () = &mut lost => break Err(self.lost("waiting for a delivery")),
            };
            let delivery = match next {
                Some(Ok(delivery)) => delivery,
                Some(Err(error)) => break Err(classify("receive", error)),
                None => {
                    break Err(RabbitError::Closed(format!(
                        "the subscription to `{}` ended (consumer cancelled or channel closed)",
                        self.queue
                    )));
                }
            };
            let settlement = if self.held.as_ref().is_some_and(|held| !held.holds()) {
                None
            } else {
                let headers = received_headers(&delivery.properties);
                Some(settle(&self.consumer, &headers, &delivery.data).await)
            };
            match settlement {
                // A partition runner without its lease: everything back to the queue, in
                // order, for the new owner.
                None | Some(Settlement::Redeliver(ConsumerError::LeaseLost { .. })) => {
                    let nack = delivery.nack(BasicNackOptions {
                        multiple: false,
                        requeue: true,
                    });
                    let _ = self.bounded("basic.nack", nack, &mut lost).await;
                    break Ok(Ended::Shutdown);
                }
                Some(settlement) => match settlement {
                    Settlement::Ack(_) => {
                        let ack = delivery.ack(BasicAckOptions::default());
                        if let Err(error) = self.bounded("basic.ack", ack, &mut lost).await {
                            // Not acknowledged: the broker redelivers it; the inbox skips it.
                            break Err(error);
                        }
                    }
                    Settlement::Redeliver(_) => {
                        let nack = delivery.nack(BasicNackOptions {
                            multiple: false,
                            requeue: true,
                        });
                        if let Err(error) = self.bounded("basic.nack", nack, &mut lost).await {
                            break Err(error);
                        }
                        // Closing the channel requeues the prefetched messages behind it in
                        // their original order.
                        break Ok(Ended::Redeliver);
                    }
                },
            }
        };
        if connection.status().connected() {
            let _ = tokio::time::timeout(self.ack_timeout, channel.close(200, "bye".into())).await;
            let _ =
                tokio::time::timeout(self.ack_timeout, connection.close(200, "bye".into())).await;
        }
        ended
    }

    /// Awaits `operation` for at most the ack timeout, and only while the connection lives.
    async fn bounded<T>(
        &self,
        context: &str,
        operation: impl Future<Output = lapin::Result<T>>,
        lost: &mut (impl Future<Output = ()> + Unpin),
    ) -> Result<T, RabbitError> {
        tokio::select! {
            biased;
            done = tokio::time::timeout(self.ack_timeout, operation) => match done {
                Ok(result) => result.map_err(|error| classify(context, error)),
                Err(_) => Err(RabbitError::Timeout {
                    context: context.to_owned(),
                    timeout: self.ack_timeout,
                }),
            },
            () = lost => Err(self.lost(context)),
        }
    }

    /// The error of a session whose connection was lost during `context`.
    fn lost(&self, context: &str) -> RabbitError {
        RabbitError::Closed(format!(
            "the connection consuming `{}` was lost ({context})",
            self.queue
        ))
    }
}

/// Completes once `connection` or `channel` is no longer connected.
async fn connection_lost(connection: &Connection, channel: &Channel) {
    while connection.status().connected() && channel.status().connected() {
        tokio::time::sleep(LIVENESS_CHECK).await;
    }
}

/// A lapin error as a [`RabbitError`]: refusals that retrying cannot fix are
/// [`RabbitError::Refused`], the rest is retried.
fn classify(context: &str, error: lapin::Error) -> RabbitError {
    let refused = match error.kind() {
        ErrorKind::ProtocolError(amqp) => matches!(
            amqp.kind(),
            AMQPErrorKind::Soft(
                AMQPSoftError::PRECONDITIONFAILED
                    | AMQPSoftError::ACCESSREFUSED
                    | AMQPSoftError::NOTFOUND
            )
        ),
        _ => false,
    };
    if refused {
        RabbitError::Refused {
            context: context.to_owned(),
            source: error,
        }
    } else {
        RabbitError::Amqp {
            context: context.to_owned(),
            source: error,
        }
    }
}
