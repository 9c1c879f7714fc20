//! [`RabbitPublisher`]: the relay's batches to a topic exchange, with publisher confirms.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{
    BasicProperties, Channel, Confirmation, Connection, ConnectionProperties, PublisherConfirm,
};
use outbox_core::Envelope;
use outbox_core::cloudevents::{self, header};
use outbox_core::publish::{BatchOutcome, MessageOutcome, PublishError, Publisher};
use tokio::sync::Mutex;
use tokio::time::Instant;

use super::{RabbitError, declare_exchange, short};
use crate::route::Route;

/// Default time to wait for the confirmations of a batch: 5 s (below the relay's default
/// publish timeout of 10 s).
pub const DEFAULT_CONFIRM_TIMEOUT: Duration = Duration::from_secs(5);
/// Default time to open a connection and its channel: 5 s.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Default largest body: 16 MiB, RabbitMQ 4's default `max_message_size` (3.x allows 128
/// MiB). A larger message is reported `too large` without being sent: the broker would
/// close the channel, failing every message in flight with it.
pub const DEFAULT_MAX_MESSAGE_SIZE: usize = 16 * 1024 * 1024;

/// Configures a [`RabbitPublisher`]. Defaults:
///
/// | setting | default |
/// |---|---|
/// | [`route`](Self::route) | [`Route::event_type("")`](Route::event_type): routing key = event type |
/// | [`confirm_timeout`](Self::confirm_timeout) | [`DEFAULT_CONFIRM_TIMEOUT`] (5 s) |
/// | [`connect_timeout`](Self::connect_timeout) | [`DEFAULT_CONNECT_TIMEOUT`] (5 s) |
/// | [`mandatory`](Self::mandatory) | `true`: unroutable messages are failures |
/// | [`declare_exchange`](Self::declare_exchange) | `true`: a durable topic exchange, declared on every connection |
/// | [`max_message_size`](Self::max_message_size) | [`DEFAULT_MAX_MESSAGE_SIZE`] (16 MiB) |
/// | [`connection_name`](Self::connection_name) | `outbox-relay` |
#[derive(Debug)]
#[must_use]
pub struct RabbitPublisherBuilder {
    uri: String,
    exchange: String,
    route: Route,
    confirm_timeout: Duration,
    connect_timeout: Duration,
    mandatory: bool,
    declare_exchange: bool,
    max_message_size: usize,
    connection_name: String,
}

impl RabbitPublisherBuilder {
    /// How the routing key is derived (default: the event type).
    pub fn route(mut self, route: Route) -> Self {
        self.route = route;
        self
    }

    /// How long to wait for a batch's confirmations, from the end of sending it (default 5
    /// s). Unconfirmed messages are reported as `timeout` (transient: the broker may have
    /// them, the retry publishes them again with the same message id).
    pub fn confirm_timeout(mut self, timeout: Duration) -> Self {
        self.confirm_timeout = timeout;
        self
    }

    /// How long connecting, opening the channel and declaring the exchange may take
    /// (default 5 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Whether messages are published `mandatory` (default `true`): an unroutable message
    /// is returned and reported as a transient failure. With `false` the broker drops
    /// unroutable messages and confirms them: they count as published.
    pub fn mandatory(mut self, mandatory: bool) -> Self {
        self.mandatory = mandatory;
        self
    }

    /// Whether the exchange is declared (durable, topic) on every connection (default
    /// `true`). Turn it off when the exchange is managed elsewhere or the user may not
    /// declare it.
    pub fn declare_exchange(mut self, declare: bool) -> Self {
        self.declare_exchange = declare;
        self
    }

    /// The largest body sent (default 16 MiB); a larger message is `too large`.
    pub fn max_message_size(mut self, bytes: usize) -> Self {
        self.max_message_size = bytes;
        self
    }

    /// The connection name shown in RabbitMQ's management tools (default `outbox-relay`).
    pub fn connection_name(mut self, name: impl Into<String>) -> Self {
        self.connection_name = name.into();
        self
    }

    /// Checks the configuration. Does not connect: the first batch does (see
    /// [`RabbitPublisher::connect`] to connect eagerly).
    ///
    /// # Errors
    /// [`RabbitError::Config`] for a URI that does not parse or an exchange name over 255
    /// bytes.
    pub fn build(self) -> Result<RabbitPublisher, RabbitError> {
        self.uri
            .parse::<lapin::uri::AMQPUri>()
            .map_err(|error| RabbitError::Config(format!("invalid AMQP URI: {error}")))?;
        if ShortString::try_new(self.exchange.as_str()).is_err() {
            return Err(RabbitError::Config(format!(
                "exchange name `{}` is longer than 255 bytes",
                self.exchange
            )));
        }
        Ok(RabbitPublisher {
            inner: Arc::new(Inner {
                uri: self.uri,
                exchange: self.exchange,
                route: self.route,
                confirm_timeout: self.confirm_timeout,
                connect_timeout: self.connect_timeout,
                mandatory: self.mandatory,
                declare_exchange: self.declare_exchange,
                max_message_size: self.max_message_size,
                connection_name: self.connection_name,
                session: Mutex::new(None),
            }),
        })
    }
}

/// Publishes envelopes to a RabbitMQ topic exchange with publisher confirms; implements
/// [`Publisher`] for the relay. See the [module documentation](super) for the wire format
/// and the guarantees. Cheap to clone (clones share the connection).
///
/// One connection with one confirm-mode channel, opened by the first batch and reopened by
/// the next batch after it failed: a batch on a dead connection fails as `unavailable`
/// (transient), nothing panics. A batch is sent in order, then all its confirmations are
/// awaited together.
#[derive(Debug, Clone)]
pub struct RabbitPublisher {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    uri: String,
    exchange: String,
    route: Route,
    confirm_timeout: Duration,
    connect_timeout: Duration,
    mandatory: bool,
    declare_exchange: bool,
    max_message_size: usize,
    connection_name: String,
    session: Mutex<Option<Session>>,
}

#[derive(Debug)]
struct Session {
    /// Kept open while the session lives (dropping it closes the connection).
    connection: Connection,
    channel: Channel,
    /// Distinguishes this session from its successors.
    generation: u64,
}

impl Session {
    fn usable(&self) -> bool {
        self.connection.status().connected() && self.channel.status().connected()
    }
}

/// A message ready to send.
struct Prepared {
    routing_key: ShortString,
    properties: BasicProperties,
    body: Vec<u8>,
}

/// A message after the send phase.
enum Slot {
    Done(MessageOutcome),
    Sent(PublisherConfirm),
}

impl RabbitPublisher {
    /// Starts configuring a publisher to `exchange` on the broker at `uri`
    /// (`amqp://user:password@host:5672/vhost`, vhost `/` written `%2f`).
    pub fn builder(uri: impl Into<String>, exchange: impl Into<String>) -> RabbitPublisherBuilder {
        RabbitPublisherBuilder {
            uri: uri.into(),
            exchange: exchange.into(),
            route: Route::event_type(""),
            confirm_timeout: DEFAULT_CONFIRM_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            mandatory: true,
            declare_exchange: true,
            max_message_size: DEFAULT_MAX_MESSAGE_SIZE,
            connection_name: "outbox-relay".to_owned(),
        }
    }

    /// The exchange messages are published to.
    pub fn exchange(&self) -> &str {
        &self.inner.exchange
    }

    /// The route deriving routing keys.
    pub fn route(&self) -> &Route {
        &self.inner.route
    }

    /// Connects now (and declares the exchange) unless connected, instead of on the first
    /// batch: to fail fast at startup.
    ///
    /// # Errors
    /// A transient [`PublishError`] when the broker cannot be reached in time.
    pub async fn connect(&self) -> Result<(), PublishError> {
        let mut session = self.inner.session.lock().await;
        self.inner.ensure(&mut session).await.map(|_| ())
    }

    /// Closes the connection, if open. The next batch opens a new one.
    pub async fn close(&self) {
        if let Some(session) = self.inner.session.lock().await.take() {
            let _ = session.connection.close(200, "bye".into()).await;
        }
    }
}

impl Publisher for RabbitPublisher {
    async fn publish(&self, batch: &[Envelope]) -> BatchOutcome {
        self.inner.publish(batch).await
    }
}

impl Inner {
    /// The open session's channel, connecting first when there is none or it died.
    async fn ensure(&self, session: &mut Option<Session>) -> Result<(Channel, u64), PublishError> {
        if let Some(open) = session.as_ref().filter(|s| s.usable()) {
            return Ok((open.channel.clone(), open.generation));
        }
        let generation = session.as_ref().map_or(0, |s| s.generation + 1);
        if let Some(stale) = session.take() {
            tracing::debug!(exchange = %self.exchange, "RabbitMQ publisher: reconnecting");
            drop(stale);
        }
        let opened = tokio::time::timeout(self.connect_timeout, self.open(generation))
            .await
            .map_err(|_| {
                PublishError::unavailable(format!(
                    "RabbitMQ: no connection within {:?}",
                    self.connect_timeout
                ))
            })?
            .map_err(|error| {
                PublishError::unavailable(format!("RabbitMQ: cannot connect: {error}"))
                    .with_source(error)
            })?;
        let channel = opened.channel.clone();
        *session = Some(opened);
        Ok((channel, generation))
    }

    async fn open(&self, generation: u64) -> Result<Session, lapin::Error> {
        let properties = ConnectionProperties::default()
            .with_connection_name(LongString::from(self.connection_name.as_str()));
        let connection = Connection::connect(&self.uri, properties).await?;
        let channel = connection.create_channel().await?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await?;
        if self.declare_exchange {
            declare_exchange(&channel, &self.exchange).await?;
        }
        Ok(Session {
            connection,
            channel,
            generation,
        })
    }

    /// Drops the session of `generation` (a later one stays).
    async fn invalidate(&self, generation: u64) {
        let mut session = self.session.lock().await;
        if session.as_ref().is_some_and(|s| s.generation == generation) {
            *session = None;
        }
    }

    fn prepare(&self, envelope: &Envelope) -> Result<Prepared, PublishError> {
        let binary = cloudevents::to_binary(envelope).map_err(|error| {
            PublishError::rejected(format!("cannot map to CloudEvents headers: {error}"))
        })?;
        if binary.body.len() > self.max_message_size {
            return Err(PublishError::too_large(
                binary.body.len(),
                self.max_message_size,
            ));
        }
        let destination = self.route.destination(envelope);
        let routing_key = ShortString::try_new(destination.as_str()).map_err(|_| {
            PublishError::rejected(format!(
                "routing key `{destination}` is longer than 255 bytes"
            ))
        })?;
        let mut table = FieldTable::default();
        let mut content_type = None;
        for (name, value) in binary.headers {
            if name == header::CONTENT_TYPE {
                content_type = Some(value);
                continue;
            }
            let name = ShortString::try_new(&*name).map_err(|_| {
                PublishError::rejected(format!("header name `{name}` is longer than 255 bytes"))
            })?;
            table.insert(name, AMQPValue::LongString(LongString::from(value)));
        }
        let message_id = envelope.message_id.to_string();
        let mut properties = BasicProperties::default()
            .with_message_id(message_id.as_str().into())
            .with_delivery_mode(2)
            .with_headers(table)
            .with_timestamp(u64::try_from(envelope.occurred_at.timestamp()).unwrap_or(0));
        if let Ok(kind) = ShortString::try_new(envelope.event_type.as_str()) {
            properties = properties.with_type(kind);
        }
        if let Some(content_type) = content_type
            && let Ok(content_type) = ShortString::try_new(content_type)
        {
            properties = properties.with_content_type(content_type);
        }
        if let Some(correlation_id) = envelope.correlation_id {
            properties = properties.with_correlation_id(correlation_id.to_string().into());
        }
        Ok(Prepared {
            routing_key,
            properties,
            body: binary.body,
        })
    }

    async fn publish(&self, batch: &[Envelope]) -> BatchOutcome {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let prepared: Vec<_> = batch.iter().map(|e| self.prepare(e)).collect();
        let exchange = short(&self.exchange).map_err(|error| {
            PublishError::rejected(format!("exchange name: {error}")).with_source(error)
        })?;
        let options = BasicPublishOptions {
            mandatory: self.mandatory,
            immediate: false,
        };

        // Send phase, in batch order, on the one channel (under the session lock, so
        // concurrent batches do not interleave and reconnect once).
        let mut session = self.session.lock().await;
        let (channel, generation) = self.ensure(&mut session).await?;
        let mut stopped: HashSet<(&str, &str)> = HashSet::new();
        let mut broken: Option<PublishError> = None;
        let mut slots = Vec::with_capacity(batch.len());
        for (envelope, prepared) in batch.iter().zip(prepared) {
            let key = (
                envelope.aggregate_type.as_str(),
                envelope.aggregate_id.as_str(),
            );
            if stopped.contains(&key) {
                slots.push(Slot::Done(Err(PublishError::not_attempted())));
                continue;
            }
            let prepared = match (prepared, &broken) {
                (Ok(prepared), None) => prepared,
                (Err(error), _) => {
                    stopped.insert(key);
                    slots.push(Slot::Done(Err(error)));
                    continue;
                }
                (Ok(_), Some(error)) => {
                    stopped.insert(key);
                    slots.push(Slot::Done(Err(error.clone())));
                    continue;
                }
            };
            match channel
                .basic_publish(
                    exchange.clone(),
                    prepared.routing_key,
                    options,
                    &prepared.body,
                    prepared.properties,
                )
                .await
            {
                Ok(confirm) => slots.push(Slot::Sent(confirm)),
                Err(error) => {
                    let error = PublishError::unavailable(format!("RabbitMQ: publish: {error}"))
                        .with_source(error);
                    broken = Some(error.clone());
                    stopped.insert(key);
                    slots.push(Slot::Done(Err(error)));
                }
            }
        }
        if broken.is_some() {
            *session = None;
        }
        drop(session);

        // Confirm phase: every confirmation at once, one deadline for the batch.
        let deadline = Instant::now() + self.confirm_timeout;
        let timeout = self.confirm_timeout;
        let exchange = self.exchange.as_str();
        let outcomes = join_all(slots.into_iter().map(|slot| async move {
            match slot {
                Slot::Done(outcome) => (outcome, false),
                Slot::Sent(confirm) => match tokio::time::timeout_at(deadline, confirm).await {
                    Err(_) => (
                        Err(PublishError::timeout(format!(
                            "RabbitMQ: no confirmation within {timeout:?}"
                        ))),
                        true,
                    ),
                    Ok(Err(error)) => (
                        Err(PublishError::unavailable(format!(
                            "RabbitMQ: confirmation lost: {error}"
                        ))
                        .with_source(error)),
                        true,
                    ),
                    Ok(Ok(confirmation)) => (confirmed(confirmation, exchange), false),
                },
            }
        }))
        .await;
        let mut reconnect = false;
        let mut outcomes: Vec<MessageOutcome> = outcomes
            .into_iter()
            .map(|(outcome, lost)| {
                reconnect |= lost;
                outcome
            })
            .collect();
        if reconnect {
            self.invalidate(generation).await;
        }
        outbox_core::publish::stop_after_failures(batch, &mut outcomes);
        Ok(outcomes)
    }
}

/// The outcome of one confirmation.
fn confirmed(confirmation: Confirmation, exchange: &str) -> MessageOutcome {
    match confirmation {
        Confirmation::Ack(None) => Ok(()),
        Confirmation::Ack(Some(returned)) | Confirmation::Nack(Some(returned)) => {
            Err(PublishError::unavailable(format!(
                "RabbitMQ returned the message ({} {}): exchange `{exchange}` has no queue \
                 bound for routing key `{}`",
                returned.reply_code,
                returned.reply_text.as_str(),
                returned.delivery.routing_key.as_str()
            )))
        }
        Confirmation::Nack(None) => Err(PublishError::unavailable(
            "RabbitMQ nacked the message (it could not store it)",
        )),
        Confirmation::NotRequested => Err(PublishError::unavailable(
            "RabbitMQ: the channel is not in confirm mode",
        )),
    }
}
