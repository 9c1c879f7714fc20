//! [`BrokerPublisher`]: the publisher a `[relay.broker]` describes, built with
//! `outbox-brokers`, and the probe `/readyz` asks whether the broker is reachable.

use std::time::Duration;

#[cfg(feature = "kafka")]
use outbox_brokers::kafka::KafkaPublisher;
#[cfg(feature = "nats")]
use outbox_brokers::nats::{NatsPublisher, NatsStream, async_nats};
#[cfg(feature = "rabbitmq")]
use outbox_brokers::rabbitmq::RabbitPublisher;
#[cfg(feature = "redis")]
use outbox_brokers::redis::{self as redis_streams, RedisPublisher, client as redis};
use outbox_core::Envelope;
use outbox_core::publish::{BatchOutcome, Publisher};

use crate::config::{BrokerKind, BrokerSettings};

/// How long a readiness probe of a broker may take.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// The broker could not be set up (the relay retries).
#[derive(Debug, thiserror::Error)]
#[error("{broker}: {message}")]
pub struct BrokerError {
    /// `nats`, `rabbitmq`, `kafka` or `redis`.
    pub broker: &'static str,
    /// What failed.
    pub message: String,
}

impl BrokerError {
    fn of(kind: BrokerKind, error: impl std::fmt::Display) -> Self {
        Self {
            broker: kind.as_str(),
            message: error.to_string(),
        }
    }
}

/// One of the four broker publishers.
#[derive(Debug)]
pub enum BrokerPublisher {
    /// NATS JetStream.
    #[cfg(feature = "nats")]
    Nats(Box<NatsPublisher>),
    /// RabbitMQ.
    #[cfg(feature = "rabbitmq")]
    RabbitMq(RabbitPublisher),
    /// Kafka.
    #[cfg(feature = "kafka")]
    Kafka(KafkaPublisher),
    /// Redis Streams.
    #[cfg(feature = "redis")]
    Redis(RedisPublisher),
}

impl Publisher for BrokerPublisher {
    async fn publish(&self, batch: &[Envelope]) -> BatchOutcome {
        match self {
            #[cfg(feature = "nats")]
            Self::Nats(publisher) => publisher.publish(batch).await,
            #[cfg(feature = "rabbitmq")]
            Self::RabbitMq(publisher) => publisher.publish(batch).await,
            #[cfg(feature = "kafka")]
            Self::Kafka(publisher) => publisher.publish(batch).await,
            #[cfg(feature = "redis")]
            Self::Redis(publisher) => publisher.publish(batch).await,
            #[cfg(not(any(
                feature = "nats",
                feature = "rabbitmq",
                feature = "kafka",
                feature = "redis"
            )))]
            _ => {
                let _ = batch;
                unreachable!("no broker is compiled in, so no publisher exists")
            }
        }
    }
}

/// What `/readyz` asks the broker.
#[derive(Debug, Clone)]
pub enum BrokerProbe {
    /// The NATS client's connection state.
    #[cfg(feature = "nats")]
    Nats(async_nats::Client),
    /// A Redis `PING`.
    #[cfg(feature = "redis")]
    Redis(redis::aio::ConnectionManager),
    /// A TCP connection to one of these `host:port` (RabbitMQ, Kafka).
    Tcp(Vec<String>),
}

impl BrokerProbe {
    /// `Ok` when the broker answers within [`PROBE_TIMEOUT`].
    ///
    /// # Errors
    /// Why it is not reachable.
    pub async fn check(&self) -> Result<(), String> {
        let probe = async {
            match self {
                #[cfg(feature = "nats")]
                Self::Nats(client) => match client.connection_state() {
                    async_nats::connection::State::Connected => Ok(()),
                    state => Err(format!("NATS connection is {state}")),
                },
                #[cfg(feature = "redis")]
                Self::Redis(connection) => {
                    let mut connection = connection.clone();
                    redis::cmd("PING")
                        .query_async::<String>(&mut connection)
                        .await
                        .map(drop)
                        .map_err(|error| error.to_string())
                }
                Self::Tcp(addresses) => {
                    let mut last = String::from("no address");
                    for address in addresses {
                        match tokio::net::TcpStream::connect(address.as_str()).await {
                            Ok(_) => return Ok(()),
                            Err(error) => last = format!("{address}: {error}"),
                        }
                    }
                    Err(last)
                }
            }
        };
        tokio::time::timeout(PROBE_TIMEOUT, probe)
            .await
            .unwrap_or_else(|_| Err(format!("no answer within {PROBE_TIMEOUT:?}")))
    }
}

/// Connects the publisher `settings` describe (and, for NATS, makes sure its stream
/// exists), named `connection_name` where the broker shows client names.
///
/// # Errors
/// [`BrokerError`]: the broker is unreachable or refused the setup.
pub async fn connect(
    settings: &BrokerSettings,
    connection_name: &str,
) -> Result<(BrokerPublisher, BrokerProbe), BrokerError> {
    let kind = settings.kind;
    let url = settings.url.expose();
    let route = settings.route.route();
    match kind {
        #[cfg(feature = "nats")]
        BrokerKind::Nats => {
            let client = async_nats::ConnectOptions::new()
                .name(connection_name)
                .connect(url)
                .await
                .map_err(|error| BrokerError::of(kind, error))?;
            if let Some(stream) = &settings.stream {
                let mut ensure = NatsStream::new(stream.name.clone(), stream.subjects.clone());
                if let Some(window) = stream.duplicate_window {
                    ensure = ensure.duplicate_window(window);
                }
                if let Some(max_age) = stream.max_age {
                    ensure = ensure.max_age(max_age);
                }
                if let Some(replicas) = stream.replicas {
                    ensure = ensure.replicas(replicas);
                }
                ensure
                    .ensure(&client)
                    .await
                    .map_err(|error| BrokerError::of(kind, error))?;
            }
            let mut builder = NatsPublisher::builder(client.clone()).route(route);
            if let Some(timeout) = settings.ack_timeout {
                builder = builder.ack_timeout(timeout);
            }
            Ok((
                BrokerPublisher::Nats(Box::new(builder.build())),
                BrokerProbe::Nats(client),
            ))
        }
        #[cfg(feature = "rabbitmq")]
        BrokerKind::RabbitMq => {
            let exchange = settings.exchange.clone().unwrap_or_default();
            let mut builder = RabbitPublisher::builder(url, exchange)
                .route(route)
                .connection_name(connection_name);
            if let Some(timeout) = settings.ack_timeout {
                builder = builder.confirm_timeout(timeout);
            }
            let publisher = builder
                .build()
                .map_err(|error| BrokerError::of(kind, error))?;
            publisher
                .connect()
                .await
                .map_err(|error| BrokerError::of(kind, error))?;
            let probe = BrokerProbe::Tcp(host_ports(url, 5672));
            Ok((BrokerPublisher::RabbitMq(publisher), probe))
        }
        #[cfg(feature = "kafka")]
        BrokerKind::Kafka => {
            let mut builder = KafkaPublisher::builder(url)
                .route(route)
                .set("client.id", connection_name);
            if let Some(timeout) = settings.ack_timeout {
                builder = builder.delivery_timeout(timeout);
            }
            for (key, value) in &settings.options {
                builder = builder.set(key.clone(), value.clone());
            }
            let publisher = builder
                .build()
                .map_err(|error| BrokerError::of(kind, error))?;
            let probe = BrokerProbe::Tcp(url.split(',').map(|s| s.trim().to_owned()).collect());
            probe
                .check()
                .await
                .map_err(|error| BrokerError::of(kind, error))?;
            Ok((BrokerPublisher::Kafka(publisher), probe))
        }
        #[cfg(feature = "redis")]
        BrokerKind::Redis => {
            let client = redis_streams::open(url).map_err(|error| BrokerError::of(kind, error))?;
            let connection =
                redis_streams::connection(&client).map_err(|error| BrokerError::of(kind, error))?;
            let probe = BrokerProbe::Redis(connection.clone());
            probe
                .check()
                .await
                .map_err(|error| BrokerError::of(kind, error))?;
            let mut builder = RedisPublisher::builder(connection).route(route);
            if let Some(entries) = settings.max_len {
                builder = builder.max_len(entries);
            }
            Ok((BrokerPublisher::Redis(builder.build()), probe))
        }
        #[allow(unreachable_patterns)]
        other => {
            let _ = (url, route, connection_name);
            Err(BrokerError::of(
                other,
                "this build has no client for it (cargo feature)",
            ))
        }
    }
}

/// `host:port` of a URL, with `default_port` when it names none.
#[cfg(feature = "rabbitmq")]
fn host_ports(url: &str, default_port: u16) -> Vec<String> {
    match url::Url::parse(url) {
        Ok(parsed) => match parsed.host_str() {
            Some(host) => vec![format!("{host}:{}", parsed.port().unwrap_or(default_port))],
            None => Vec::new(),
        },
        Err(_) => Vec::new(),
    }
}
