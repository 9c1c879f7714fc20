//! The broker the scenarios publish to: the in-process broker (default) or a real one
//! (NATS JetStream, RabbitMQ, Kafka, Redis Streams through `outbox-brokers`).
//!
//! Each scenario opens a [`Channel`] of its own — an in-process broker, or on a real broker
//! a stream / exchange and queue / topic named after the scenario and a fresh id — so it
//! counts only its own messages. A channel gives:
//!
//! - publishers ([`Channel::publisher`]) for the naive handlers and for the relays;
//! - an outage ([`Channel::go_down`], [`Channel::come_up`]): the in-process broker's own
//!   switch; on a real broker the publishers connect through a loopback
//!   [`Proxy`](outbox_brokers::testing::Proxy) that the demo cuts and restores (the shared
//!   broker itself is never touched);
//! - the messages the broker holds ([`Channel::messages`]), read back from the broker
//!   itself (not through the proxy), and handed to an inbox consumer exactly as the
//!   broker runners do ([`Received::deliver`]).
//!
//! Two publisher wrappers play the failures the scenarios need on any broker:
//! [`CrashAfterPublish`] (the process dies between publish and mark) and [`Hold`] (a batch
//! waits in the middle of a relay's transaction); a third, [`Tally`], counts what the
//! broker confirmed and refused, so that a scenario can wait for a log relay that runs in
//! its own task.

#[cfg(feature = "kafka")]
mod kafka;
#[cfg(feature = "nats")]
mod nats;
#[cfg(feature = "rabbitmq")]
mod rabbitmq;
#[cfg(feature = "redis")]
mod redis;

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use outbox_core::in_process::InProcessBroker;
use outbox_core::publish::{BatchOutcome, PublishErrorKind, Publisher};
use outbox_core::{Envelope, EnvelopeConfig};
use outbox_seaorm::inbox::{Consumer, Delivered};
use tokio::sync::{Notify, watch};
use uuid::Uuid;

use crate::error::DemoError;

/// Default NATS URL.
pub const DEFAULT_NATS_URL: &str = "nats://127.0.0.1:4222";
/// Default AMQP URL.
pub const DEFAULT_AMQP_URL: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";
/// Default Redis URL.
pub const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379";
/// Default Kafka bootstrap servers.
pub const DEFAULT_KAFKA_BROKERS: &str = "127.0.0.1:9092";

/// Which broker the relays publish to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BrokerChoice {
    /// [`InProcessBroker`]: in memory, no service needed.
    InProcess,
    /// NATS JetStream at this URL.
    Nats {
        /// `nats://host:port`.
        url: String,
    },
    /// RabbitMQ at this AMQP URL.
    RabbitMq {
        /// `amqp://user:password@host:port/vhost`.
        url: String,
    },
    /// Kafka (or a Kafka-compatible broker such as tansu) at these bootstrap servers.
    Kafka {
        /// `host:port[,host:port…]`.
        brokers: String,
    },
    /// Redis Streams at this URL.
    Redis {
        /// `redis://host:port`.
        url: String,
    },
}

impl BrokerChoice {
    /// For the demo's header line.
    pub fn describe(&self) -> String {
        match self {
            Self::InProcess => "in-process (in memory)".to_owned(),
            Self::Nats { url } => format!("NATS JetStream at {url}"),
            Self::RabbitMq { url } => format!("RabbitMQ at {}", hide_password(url)),
            Self::Kafka { brokers } => format!("Kafka at {brokers}"),
            Self::Redis { url } => format!("Redis Streams at {}", hide_password(url)),
        }
    }

    /// The cargo feature this broker needs, when the binary was built without it.
    fn missing_feature(&self) -> Option<&'static str> {
        match self {
            Self::InProcess => None,
            Self::Nats { .. } => (!cfg!(feature = "nats")).then_some("nats"),
            Self::RabbitMq { .. } => (!cfg!(feature = "rabbitmq")).then_some("rabbitmq"),
            Self::Kafka { .. } => (!cfg!(feature = "kafka")).then_some("kafka"),
            Self::Redis { .. } => (!cfg!(feature = "redis")).then_some("redis"),
        }
    }
}

fn hide_password(url: &str) -> String {
    match (url.split_once("://"), url.rsplit_once('@')) {
        (Some((scheme, rest)), Some((_, host))) => match rest.split_once(':') {
            Some((user, _)) if !user.contains('@') => format!("{scheme}://{user}:***@{host}"),
            _ => url.to_owned(),
        },
        _ => url.to_owned(),
    }
}

/// Whether a channel's publishers go through a cuttable proxy (real brokers only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outage {
    /// The scenario plays a broker outage.
    Playable,
    /// Publishers connect straight to the broker.
    None,
}

/// A publisher for one of the brokers (see the [module documentation](self)).
#[non_exhaustive]
pub enum DemoPublisher {
    /// The in-process broker.
    InProcess(InProcessBroker),
    /// NATS JetStream.
    #[cfg(feature = "nats")]
    Nats(Box<outbox_brokers::nats::NatsPublisher>),
    /// RabbitMQ.
    #[cfg(feature = "rabbitmq")]
    RabbitMq(outbox_brokers::rabbitmq::RabbitPublisher),
    /// Kafka.
    #[cfg(feature = "kafka")]
    Kafka(outbox_brokers::kafka::KafkaPublisher),
    /// Redis Streams.
    #[cfg(feature = "redis")]
    Redis(outbox_brokers::redis::RedisPublisher),
}

impl fmt::Debug for DemoPublisher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            Self::InProcess(_) => "InProcess",
            #[cfg(feature = "nats")]
            Self::Nats(_) => "Nats",
            #[cfg(feature = "rabbitmq")]
            Self::RabbitMq(_) => "RabbitMq",
            #[cfg(feature = "kafka")]
            Self::Kafka(_) => "Kafka",
            #[cfg(feature = "redis")]
            Self::Redis(_) => "Redis",
        };
        f.debug_tuple("DemoPublisher").field(&name).finish()
    }
}

impl Publisher for DemoPublisher {
    async fn publish(&self, batch: &[Envelope]) -> BatchOutcome {
        match self {
            Self::InProcess(broker) => broker.publish(batch).await,
            #[cfg(feature = "nats")]
            Self::Nats(publisher) => publisher.publish(batch).await,
            #[cfg(feature = "rabbitmq")]
            Self::RabbitMq(publisher) => publisher.publish(batch).await,
            #[cfg(feature = "kafka")]
            Self::Kafka(publisher) => publisher.publish(batch).await,
            #[cfg(feature = "redis")]
            Self::Redis(publisher) => publisher.publish(batch).await,
        }
    }
}

/// Publishes `envelopes` as one batch and turns the outcome into a plain result: the
/// first error of the batch, if any (what a naive handler sees).
///
/// # Errors
/// The publisher's error, as text.
pub async fn publish_all<P: Publisher>(
    publisher: &P,
    envelopes: &[Envelope],
) -> Result<(), String> {
    let outcomes = publisher
        .publish(envelopes)
        .await
        .map_err(|error| error.to_string())?;
    if outcomes.len() != envelopes.len() {
        return Err(format!(
            "the broker answered {} outcomes for {} messages",
            outcomes.len(),
            envelopes.len()
        ));
    }
    outcomes
        .into_iter()
        .find_map(Result::err)
        .map_or(Ok(()), |error| Err(error.to_string()))
}

/// A message the broker holds, as read back from it.
#[derive(Debug, Clone)]
pub enum Received {
    /// From the in-process broker.
    Envelope(Box<Envelope>),
    /// From a real broker: its CloudEvents binary-mode headers and body.
    Binary {
        /// The message id the broker stored (`ce-id`).
        message_id: Option<Uuid>,
        /// Headers, broker-specific ones left out.
        headers: Vec<(String, String)>,
        /// The JSON body.
        body: Vec<u8>,
    },
}

impl Received {
    /// The message id, if the message carries one.
    pub fn message_id(&self) -> Option<Uuid> {
        match self {
            Self::Envelope(envelope) => Some(envelope.message_id),
            Self::Binary { message_id, .. } => *message_id,
        }
    }

    /// The envelope, decoded from the broker's headers and body.
    ///
    /// # Errors
    /// [`DemoError::Broker`] when it does not decode.
    pub fn envelope(&self) -> Result<Envelope, DemoError> {
        match self {
            Self::Envelope(envelope) => Ok(envelope.as_ref().clone()),
            Self::Binary { headers, body, .. } => outbox_core::cloudevents::from_binary(
                headers.iter().map(|(k, v)| (k.as_str(), v.as_bytes())),
                body,
                &EnvelopeConfig::default(),
            )
            .map_err(DemoError::broker),
        }
    }

    /// Hands the message to an inbox consumer the way the broker runners do.
    ///
    /// # Errors
    /// [`DemoError::Consumer`] when the consumer could not settle it.
    pub async fn deliver(&self, consumer: &Consumer) -> Result<Delivered, DemoError> {
        let delivered = match self {
            Self::Envelope(envelope) => consumer.deliver(envelope).await,
            Self::Binary { headers, body, .. } => consumer.deliver_binary(headers, body).await,
        };
        delivered.map_err(|error| DemoError::Consumer(error.to_string()))
    }
}

enum Kind {
    InProcess(InProcessBroker),
    #[cfg(feature = "nats")]
    Nats(Box<nats::NatsChannel>),
    #[cfg(feature = "rabbitmq")]
    RabbitMq(rabbitmq::RabbitChannel),
    #[cfg(feature = "kafka")]
    Kafka(kafka::KafkaChannel),
    #[cfg(feature = "redis")]
    Redis(redis::RedisChannel),
}

/// One scenario's place on the broker; see the [module documentation](self).
pub struct Channel {
    kind: Kind,
    #[cfg(any(
        feature = "nats",
        feature = "rabbitmq",
        feature = "kafka",
        feature = "redis"
    ))]
    proxy: Option<outbox_brokers::testing::Proxy>,
}

impl fmt::Debug for Channel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Channel")
            .field("broker", &self.broker_name())
            .finish_non_exhaustive()
    }
}

impl Channel {
    /// Opens scenario `scenario`'s channel on `choice`.
    ///
    /// # Errors
    /// [`DemoError::Config`] when the binary lacks the broker's feature,
    /// [`DemoError::Broker`] when the broker cannot be reached or set up.
    #[allow(unused_variables)]
    pub async fn open(
        choice: &BrokerChoice,
        scenario: u8,
        outage: Outage,
    ) -> Result<Self, DemoError> {
        if let Some(feature) = choice.missing_feature() {
            return Err(DemoError::Config(format!(
                "this binary was built without the `{feature}` feature: \
                 cargo run -p bookstore --features {feature} -- --broker {feature}"
            )));
        }
        let name = format!("bookstore-s{scenario}-{}", Uuid::now_v7().simple());
        match choice {
            BrokerChoice::InProcess => Ok(Self {
                kind: Kind::InProcess(InProcessBroker::new()),
                #[cfg(any(
                    feature = "nats",
                    feature = "rabbitmq",
                    feature = "kafka",
                    feature = "redis"
                ))]
                proxy: None,
            }),
            #[cfg(feature = "nats")]
            BrokerChoice::Nats { url } => {
                let proxy = proxy_for(url, outage, 4222).await?;
                let kind = Kind::Nats(Box::new(
                    bounded("setting up the broker", nats::NatsChannel::open(url, &name)).await?,
                ));
                Ok(Self { kind, proxy })
            }
            #[cfg(feature = "rabbitmq")]
            BrokerChoice::RabbitMq { url } => {
                let proxy = proxy_for(url, outage, 5672).await?;
                let kind = Kind::RabbitMq(
                    bounded(
                        "setting up the broker",
                        rabbitmq::RabbitChannel::open(url, &name),
                    )
                    .await?,
                );
                Ok(Self { kind, proxy })
            }
            #[cfg(feature = "kafka")]
            BrokerChoice::Kafka { brokers } => {
                if outage == Outage::Playable {
                    return Err(DemoError::Skipped {
                        reason: kafka::NO_OUTAGE.to_owned(),
                    });
                }
                let kind = Kind::Kafka(
                    bounded(
                        "setting up the broker",
                        kafka::KafkaChannel::open(brokers, &name),
                    )
                    .await?,
                );
                Ok(Self { kind, proxy: None })
            }
            #[cfg(feature = "redis")]
            BrokerChoice::Redis { url } => {
                let proxy = proxy_for(url, outage, 6379).await?;
                let kind = Kind::Redis(
                    bounded(
                        "setting up the broker",
                        redis::RedisChannel::open(url, &name),
                    )
                    .await?,
                );
                Ok(Self { kind, proxy })
            }
            #[allow(unreachable_patterns)]
            other => Err(DemoError::Config(format!(
                "{} is not available in this build",
                other.describe()
            ))),
        }
    }

    fn broker_name(&self) -> &'static str {
        match &self.kind {
            Kind::InProcess(_) => "in-process",
            #[cfg(feature = "nats")]
            Kind::Nats(_) => "nats",
            #[cfg(feature = "rabbitmq")]
            Kind::RabbitMq(_) => "rabbitmq",
            #[cfg(feature = "kafka")]
            Kind::Kafka(_) => "kafka",
            #[cfg(feature = "redis")]
            Kind::Redis(_) => "redis",
        }
    }

    /// How long the broker itself drops a republished message id, if it does (NATS
    /// JetStream's duplicate window).
    pub fn duplicate_window(&self) -> Option<Duration> {
        match &self.kind {
            #[cfg(feature = "nats")]
            Kind::Nats(_) => Some(nats::DUPLICATE_WINDOW),
            _ => None,
        }
    }

    /// The in-process broker, when that is the broker.
    pub fn in_process(&self) -> Option<&InProcessBroker> {
        match &self.kind {
            Kind::InProcess(broker) => Some(broker),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }

    /// A new publisher (on a real broker: a new connection, through the proxy when the
    /// channel plays an outage).
    ///
    /// # Errors
    /// [`DemoError::Broker`] when the connection cannot be set up.
    pub async fn publisher(&self) -> Result<DemoPublisher, DemoError> {
        match &self.kind {
            Kind::InProcess(broker) => Ok(DemoPublisher::InProcess(broker.clone())),
            #[cfg(feature = "nats")]
            Kind::Nats(channel) => {
                bounded("connecting", channel.publisher(self.proxy.as_ref())).await
            }
            #[cfg(feature = "rabbitmq")]
            Kind::RabbitMq(channel) => {
                bounded("connecting", channel.publisher(self.proxy.as_ref())).await
            }
            #[cfg(feature = "kafka")]
            Kind::Kafka(channel) => channel.publisher(),
            #[cfg(feature = "redis")]
            Kind::Redis(channel) => channel.publisher(self.proxy.as_ref()),
        }
    }

    /// Makes the broker unreachable for this channel's publishers.
    pub fn go_down(&self) {
        if let Some(broker) = self.in_process() {
            broker.go_down();
        }
        #[cfg(any(
            feature = "nats",
            feature = "rabbitmq",
            feature = "kafka",
            feature = "redis"
        ))]
        if let Some(proxy) = &self.proxy {
            proxy.cut();
        }
    }

    /// Makes the broker reachable again and waits (up to 20 s) until `publisher` is
    /// connected again, so that the next relay batch does not fail on a reconnect.
    ///
    /// # Errors
    /// [`DemoError::Timeout`] when the publisher does not reconnect.
    #[allow(unused_variables)]
    pub async fn come_up(&self, publisher: &DemoPublisher) -> Result<(), DemoError> {
        if let Some(broker) = self.in_process() {
            broker.come_up();
        }
        #[cfg(any(
            feature = "nats",
            feature = "rabbitmq",
            feature = "kafka",
            feature = "redis"
        ))]
        if let Some(proxy) = &self.proxy {
            proxy.restore();
            let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
            while !self.ready(publisher).await {
                if tokio::time::Instant::now() >= deadline {
                    return Err(DemoError::Timeout(
                        "the publisher did not reconnect within 20 s".to_owned(),
                    ));
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        Ok(())
    }

    /// Whether `publisher` is connected (always for the in-process broker).
    #[allow(unused_variables, dead_code)]
    async fn ready(&self, publisher: &DemoPublisher) -> bool {
        match (&self.kind, publisher) {
            #[cfg(feature = "nats")]
            (Kind::Nats(channel), DemoPublisher::Nats(publisher)) => channel.ready(publisher),
            #[cfg(feature = "rabbitmq")]
            (Kind::RabbitMq(_), DemoPublisher::RabbitMq(publisher)) => {
                publisher.connect().await.is_ok()
            }
            #[cfg(feature = "redis")]
            (Kind::Redis(channel), DemoPublisher::Redis(_)) => channel.ready().await,
            _ => true,
        }
    }

    /// Every message the broker holds for this channel, in the broker's order (read from
    /// the broker directly, not through the proxy).
    ///
    /// # Errors
    /// [`DemoError::Broker`] when the broker cannot be read.
    pub async fn messages(&self) -> Result<Vec<Received>, DemoError> {
        match &self.kind {
            Kind::InProcess(broker) => Ok(broker
                .published()
                .into_iter()
                .map(|envelope| Received::Envelope(Box::new(envelope)))
                .collect()),
            #[cfg(feature = "nats")]
            Kind::Nats(channel) => bounded("reading the stream", channel.messages()).await,
            #[cfg(feature = "rabbitmq")]
            Kind::RabbitMq(channel) => bounded("reading the queue", channel.messages()).await,
            #[cfg(feature = "kafka")]
            Kind::Kafka(channel) => channel.messages().await,
            #[cfg(feature = "redis")]
            Kind::Redis(channel) => bounded("reading the stream", channel.messages()).await,
        }
    }

    /// Removes the channel's stream / exchange and queue / topic from the broker (best
    /// effort).
    pub async fn close(self) {
        let closing = self.close_inner();
        if tokio::time::timeout(BROKER_TIMEOUT, closing).await.is_err() {
            tracing::warn!("the demo's broker channel was not removed within {BROKER_TIMEOUT:?}");
        }
    }

    async fn close_inner(self) {
        match self.kind {
            Kind::InProcess(_) => {}
            #[cfg(feature = "nats")]
            Kind::Nats(channel) => (*channel).close().await,
            #[cfg(feature = "rabbitmq")]
            Kind::RabbitMq(channel) => channel.close().await,
            #[cfg(feature = "kafka")]
            Kind::Kafka(channel) => channel.close().await,
            #[cfg(feature = "redis")]
            Kind::Redis(channel) => channel.close().await,
        }
    }
}

/// How long one broker operation of the demo's own (setup, read-back, cleanup) may take.
pub const BROKER_TIMEOUT: Duration = Duration::from_secs(15);

/// `operation` within [`BROKER_TIMEOUT`], or a [`DemoError::Timeout`] naming `what`.
#[allow(dead_code)]
pub(crate) async fn bounded<T>(
    what: &str,
    operation: impl Future<Output = Result<T, DemoError>>,
) -> Result<T, DemoError> {
    tokio::time::timeout(BROKER_TIMEOUT, operation)
        .await
        .unwrap_or_else(|_| {
            Err(DemoError::Timeout(format!(
                "{what}: no answer from the broker within {BROKER_TIMEOUT:?}"
            )))
        })
}

/// A proxy in front of the broker of `url`, when the scenario plays an outage.
#[cfg(any(feature = "nats", feature = "rabbitmq", feature = "redis"))]
async fn proxy_for(
    url: &str,
    outage: Outage,
    default_port: u16,
) -> Result<Option<outbox_brokers::testing::Proxy>, DemoError> {
    if outage == Outage::None {
        return Ok(None);
    }
    let upstream = host_port(url, default_port)?;
    let proxy = outbox_brokers::testing::Proxy::start(&upstream).await?;
    Ok(Some(proxy))
}

/// `host:port` of a broker URL.
#[cfg(any(feature = "nats", feature = "rabbitmq", feature = "redis"))]
fn host_port(url: &str, default_port: u16) -> Result<String, DemoError> {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?']).next().unwrap_or_default();
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, hp)| hp);
    if host_port.is_empty() {
        return Err(DemoError::Config(format!("no host in `{url}`")));
    }
    if host_port
        .rsplit_once(':')
        .is_some_and(|(_, port)| port.parse::<u16>().is_ok())
    {
        Ok(host_port.to_owned())
    } else {
        Ok(format!("{host_port}:{default_port}"))
    }
}

/// `url` with its `host:port` replaced by the proxy's address.
#[cfg(any(feature = "nats", feature = "rabbitmq", feature = "redis"))]
fn through(url: &str, proxy: Option<&outbox_brokers::testing::Proxy>, default_port: u16) -> String {
    let Some(proxy) = proxy else {
        return url.to_owned();
    };
    let Ok(upstream) = host_port(url, default_port) else {
        return url.to_owned();
    };
    let bare = upstream
        .strip_suffix(&format!(":{default_port}"))
        .unwrap_or(&upstream);
    if url.contains(&upstream) {
        url.replacen(&upstream, &proxy.addr().to_string(), 1)
    } else {
        url.replacen(bare, &proxy.addr().to_string(), 1)
    }
}

/// A publisher that publishes one batch to the broker, then never answers — the process
/// "crashes" between publish and mark: abort the relay's task (its rows stay `pending`).
/// Later batches go through normally.
#[derive(Debug)]
pub struct CrashAfterPublish<P> {
    inner: P,
    crashed: AtomicBool,
    published: Notify,
}

impl<P: Publisher> CrashAfterPublish<P> {
    /// Wraps `inner`.
    pub fn new(inner: P) -> Self {
        Self {
            inner,
            crashed: AtomicBool::new(false),
            published: Notify::new(),
        }
    }

    /// Waits until the batch was published and the "process" hangs, or `timeout` passes;
    /// whether it did.
    pub async fn wait_for_crash(&self, timeout: Duration) -> bool {
        let wait = async {
            loop {
                let notified = self.published.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                if self.crashed.load(Ordering::SeqCst) {
                    return;
                }
                notified.await;
            }
        };
        tokio::time::timeout(timeout, wait).await.is_ok()
    }
}

impl<P: Publisher> Publisher for CrashAfterPublish<P> {
    async fn publish(&self, batch: &[Envelope]) -> BatchOutcome {
        let outcome = self.inner.publish(batch).await;
        let accepted = matches!(&outcome, Ok(outcomes) if outcomes.iter().any(Result::is_ok));
        if accepted && !self.crashed.swap(true, Ordering::SeqCst) {
            self.published.notify_waiters();
            tracing::warn!(
                "publisher: batch published, now hanging before the relay can mark it (simulated crash)"
            );
            return std::future::pending().await;
        }
        outcome
    }
}

/// A gate that holds publishing batches until [`release`](Self::release); shared by the
/// [`Hold`] publishers of scenario 6.
#[derive(Debug)]
pub struct Gate {
    open: watch::Sender<bool>,
    waiting: AtomicUsize,
    changed: Notify,
}

impl Default for Gate {
    fn default() -> Self {
        Self::new()
    }
}

impl Gate {
    /// A closed gate.
    pub fn new() -> Self {
        Self {
            open: watch::channel(false).0,
            waiting: AtomicUsize::new(0),
            changed: Notify::new(),
        }
    }

    /// Lets every held batch (and every later one) through.
    pub fn release(&self) {
        self.open.send_replace(true);
    }

    /// Waits until `count` batches are held, or `timeout` passes; whether they are.
    pub async fn wait_for_held(&self, count: usize, timeout: Duration) -> bool {
        let wait = async {
            loop {
                let notified = self.changed.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                if self.waiting.load(Ordering::SeqCst) >= count {
                    return;
                }
                notified.await;
            }
        };
        tokio::time::timeout(timeout, wait).await.is_ok()
    }

    async fn pass(&self) {
        let mut open = self.open.subscribe();
        if *open.borrow() {
            return;
        }
        self.waiting.fetch_add(1, Ordering::SeqCst);
        self.changed.notify_waiters();
        let _ = open.wait_for(|open| *open).await;
    }
}

/// A publisher whose batches wait at a [`Gate`] (while the relay holds its claimed rows),
/// and that records the message ids it was given.
#[derive(Debug)]
pub struct Hold<P> {
    inner: P,
    gate: Arc<Gate>,
    claimed: std::sync::Mutex<Vec<Uuid>>,
}

impl<P: Publisher> Hold<P> {
    /// Wraps `inner` behind `gate`.
    pub fn new(inner: P, gate: Arc<Gate>) -> Self {
        Self {
            inner,
            gate,
            claimed: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// The message ids of every batch this publisher was given, in order.
    pub fn claimed(&self) -> Vec<Uuid> {
        self.claimed
            .lock()
            .map(|ids| ids.clone())
            .unwrap_or_else(|poisoned| poisoned.into_inner().clone())
    }
}

impl<P: Publisher> Publisher for Hold<P> {
    async fn publish(&self, batch: &[Envelope]) -> BatchOutcome {
        {
            let mut claimed = self
                .claimed
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            claimed.extend(batch.iter().map(|envelope| envelope.message_id));
        }
        self.gate.pass().await;
        self.inner.publish(batch).await
    }
}

/// A publisher that counts what the broker confirmed (in order) and refused, and lets a
/// scenario wait for it (a log relay runs in a task of its own and reports only when it
/// stops).
#[derive(Debug)]
pub struct Tally<P> {
    inner: P,
    state: std::sync::Mutex<TallyState>,
    changed: Notify,
    /// Never answer once the broker confirmed a batch (see [`Tally::freezing`]).
    freeze: bool,
}

#[derive(Debug, Default)]
struct TallyState {
    confirmed: Vec<Uuid>,
    refused: usize,
    last_error: Option<String>,
}

impl<P: Publisher> Tally<P> {
    /// Wraps `inner`.
    pub fn new(inner: P) -> Self {
        Self {
            inner,
            state: std::sync::Mutex::new(TallyState::default()),
            changed: Notify::new(),
            freeze: false,
        }
    }

    /// Wraps `inner`, and never answers the relay once the broker confirmed a batch: the
    /// relay freezes between the broker's confirmation and its own acknowledgement, as a
    /// process that dies there (the scenario then kills it).
    pub fn freezing(inner: P) -> Self {
        Self {
            freeze: true,
            ..Self::new(inner)
        }
    }

    /// The wrapped publisher.
    pub fn inner(&self) -> &P {
        &self.inner
    }

    fn state(&self) -> std::sync::MutexGuard<'_, TallyState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The message ids the broker confirmed, in order.
    pub fn confirmed(&self) -> Vec<Uuid> {
        self.state().confirmed.clone()
    }

    /// Messages the broker refused (or that failed to reach it); a message not attempted
    /// because an earlier one of its aggregate failed does not count.
    pub fn refused(&self) -> usize {
        self.state().refused
    }

    /// The last refusal's error.
    pub fn last_error(&self) -> Option<String> {
        self.state().last_error.clone()
    }

    /// Waits until `done` holds for (confirmed, refused), or `timeout` passes; whether it
    /// does.
    pub async fn wait_until(&self, timeout: Duration, done: impl Fn(usize, usize) -> bool) -> bool {
        let wait = async {
            loop {
                let notified = self.changed.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                {
                    let state = self.state();
                    if done(state.confirmed.len(), state.refused) {
                        return;
                    }
                }
                notified.await;
            }
        };
        tokio::time::timeout(timeout, wait).await.is_ok()
    }
}

impl<P: Publisher> Publisher for Tally<P> {
    async fn publish(&self, batch: &[Envelope]) -> BatchOutcome {
        let outcome = self.inner.publish(batch).await;
        {
            let mut state = self.state();
            match &outcome {
                Ok(outcomes) => {
                    for (envelope, result) in batch.iter().zip(outcomes) {
                        match result {
                            Ok(()) => state.confirmed.push(envelope.message_id),
                            Err(error) if error.kind() == PublishErrorKind::NotAttempted => {}
                            Err(error) => {
                                state.refused += 1;
                                state.last_error = Some(error.to_string());
                            }
                        }
                    }
                }
                Err(error) => {
                    state.refused += batch.len();
                    state.last_error = Some(error.to_string());
                }
            }
        }
        self.changed.notify_waiters();
        if self.freeze && outcome.is_ok() {
            std::future::pending::<()>().await;
        }
        outcome
    }
}
