//! [`KafkaConsumerRunner`]: a consumer group, settled through the inbox, offsets stored after.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use outbox_seaorm::inbox::Consumer;
use rdkafka::consumer::{CommitMode, Consumer as _, StreamConsumer};
use rdkafka::error::KafkaError as RdKafkaError;
use rdkafka::message::{Headers as _, Message as _};
use rdkafka::{ClientConfig, Offset};
use tokio_util::sync::CancellationToken;

use super::KafkaError;
use crate::settle::{Settlement, redelivery_pause, settle, with_requeued_redelivery};

/// Default interval between commits of the stored offsets (`auto.commit.interval.ms`): 1 s.
pub const DEFAULT_COMMIT_INTERVAL: Duration = Duration::from_secs(1);
/// Default pause after a message could not be settled, before it is consumed again: 1 s.
pub const DEFAULT_REDELIVERY_DELAY: Duration = Duration::from_secs(1);

/// How long a seek back to an unsettled message may take.
const SEEK_TIMEOUT: Duration = Duration::from_secs(10);

/// Configures a [`KafkaConsumerRunner`]. Defaults:
///
/// | setting | default |
/// |---|---|
/// | [`group_id`](Self::group_id) | the inbox consumer's name (`inventory.reserve-stock`) |
/// | `auto.offset.reset` | `earliest`: a new group reads the topics from the beginning |
/// | `enable.auto.offset.store` | `false`: an offset is stored only after its message is settled |
/// | `enable.auto.commit` | `true`: librdkafka commits the *stored* offsets, every [`commit_interval`](Self::commit_interval), on rebalance and on close |
/// | [`commit_interval`](Self::commit_interval) | [`DEFAULT_COMMIT_INTERVAL`] (1 s) |
/// | [`redelivery_delay`](Self::redelivery_delay) | [`DEFAULT_REDELIVERY_DELAY`] (1 s) |
/// | `client.id` | the inbox consumer's name |
/// | anything else | librdkafka's defaults; override with [`set`](Self::set) |
#[must_use]
pub struct KafkaConsumerRunnerBuilder {
    topics: Vec<String>,
    consumer: Consumer,
    config: BTreeMap<String, String>,
    redelivery_delay: Duration,
}

impl fmt::Debug for KafkaConsumerRunnerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KafkaConsumerRunnerBuilder")
            .field("topics", &self.topics)
            .field("consumer", &self.consumer.name())
            .field("config", &self.config)
            .field("redelivery_delay", &self.redelivery_delay)
            .finish()
    }
}

impl KafkaConsumerRunnerBuilder {
    /// The consumer group (default: the inbox consumer's name). Runners of one group share
    /// the topics' partitions.
    pub fn group_id(self, group: impl Into<String>) -> Self {
        self.set("group.id", group)
    }

    /// How often stored offsets are committed (default 1 s). A crash re-delivers at most
    /// the messages settled since the last commit (the inbox skips them).
    pub fn commit_interval(self, interval: Duration) -> Self {
        let millis = interval.as_millis().max(1).to_string();
        self.set("auto.commit.interval.ms", millis)
    }

    /// The pause after a message could not be settled (the inbox's database failed),
    /// before it is consumed again (default 1 s).
    pub fn redelivery_delay(mut self, delay: Duration) -> Self {
        self.redelivery_delay = delay;
        self
    }

    /// Sets any librdkafka consumer property (`session.timeout.ms`,
    /// `auto.offset.reset`, `security.protocol`, …). Setting `enable.auto.offset.store`
    /// to `true` would commit offsets of unsettled messages: the runner resets it.
    pub fn set(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.config.insert(key.into(), value.into());
        self
    }

    /// Checks the configuration (librdkafka parses it). Does not connect:
    /// [`KafkaConsumerRunner::run`] does.
    ///
    /// # Errors
    /// [`KafkaError::Client`] for a property librdkafka refuses.
    pub fn build(mut self) -> Result<KafkaConsumerRunner, KafkaError> {
        self.config
            .insert("enable.auto.offset.store".to_owned(), "false".to_owned());
        let mut config = ClientConfig::new();
        for (key, value) in &self.config {
            config.set(key, value);
        }
        // Parses every property without creating a client (which needs a runtime).
        config.create_native_config().map_err(KafkaError::Client)?;
        Ok(KafkaConsumerRunner {
            topics: self.topics,
            consumer: self.consumer,
            config,
            redelivery_delay: self.redelivery_delay,
        })
    }
}

/// Consumes topics in a Kafka consumer group and settles every message through an inbox
/// [`Consumer`], one at a time: a message's offset is stored for commit only after
/// [`settle`] said [`Settlement::Ack`]; on [`Settlement::Redeliver`] the runner seeks the
/// message's partition back to it and consumes it again after the redelivery delay, so
/// nothing after it in its partition is settled first. Reconnecting is librdkafka's job;
/// after a fatal consumer error the runner starts a new consumer (it resumes at the
/// committed offsets). See the [module documentation](super) for the guarantees.
pub struct KafkaConsumerRunner {
    topics: Vec<String>,
    consumer: Consumer,
    config: ClientConfig,
    redelivery_delay: Duration,
}

impl fmt::Debug for KafkaConsumerRunner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KafkaConsumerRunner")
            .field("topics", &self.topics)
            .field("consumer", &self.consumer.name())
            .field("group", &self.config.get("group.id"))
            .finish_non_exhaustive()
    }
}

/// How a consumer's life ended.
enum Ended {
    Shutdown,
    Recreate,
}

/// What the runner keeps of a message while settling it.
struct Received {
    topic: String,
    partition: i32,
    offset: i64,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl KafkaConsumerRunner {
    /// Starts configuring a runner of `consumer` on `topics`, with the brokers
    /// `bootstrap_servers` (`host:port[,host:port…]`).
    pub fn builder<I, T>(
        bootstrap_servers: impl Into<String>,
        topics: I,
        consumer: Consumer,
    ) -> KafkaConsumerRunnerBuilder
    where
        I: IntoIterator<Item = T>,
        T: Into<String>,
    {
        let mut config = BTreeMap::new();
        for (key, value) in [
            ("bootstrap.servers", bootstrap_servers.into()),
            ("group.id", consumer.name().to_owned()),
            ("client.id", consumer.name().to_owned()),
            ("enable.auto.commit", "true".to_owned()),
            ("enable.auto.offset.store", "false".to_owned()),
            (
                "auto.commit.interval.ms",
                DEFAULT_COMMIT_INTERVAL.as_millis().to_string(),
            ),
            ("auto.offset.reset", "earliest".to_owned()),
            ("enable.partition.eof", "false".to_owned()),
        ] {
            config.insert(key.to_owned(), value);
        }
        KafkaConsumerRunnerBuilder {
            topics: topics.into_iter().map(Into::into).collect(),
            consumer,
            config,
            redelivery_delay: DEFAULT_REDELIVERY_DELAY,
        }
    }

    /// The topics consumed.
    pub fn topics(&self) -> &[String] {
        &self.topics
    }

    /// The inbox consumer messages are handed to.
    pub fn consumer(&self) -> &Consumer {
        &self.consumer
    }

    /// Consumes until `shutdown` is cancelled. On shutdown the runner finishes the message
    /// in hand, commits the stored offsets and leaves the group.
    ///
    /// # Errors
    /// [`KafkaError::Client`] when the consumer cannot be created, [`KafkaError::Subscribe`]
    /// when the subscription is refused. Broker outages are not errors: librdkafka
    /// reconnects and the runner goes on.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), KafkaError> {
        let consumer = self.consumer.clone();
        with_requeued_redelivery(&consumer, &shutdown, self.subscription(shutdown.clone())).await
    }

    /// The subscription loop of [`run`](Self::run).
    async fn subscription(self, shutdown: CancellationToken) -> Result<(), KafkaError> {
        let topics: Vec<&str> = self.topics.iter().map(String::as_str).collect();
        loop {
            let consumer: StreamConsumer = self.config.create().map_err(KafkaError::Client)?;
            consumer
                .subscribe(&topics)
                .map_err(|source| KafkaError::Subscribe {
                    topics: self.topics.clone(),
                    source,
                })?;
            tracing::info!(topics = ?self.topics, consumer = self.consumer.name(), "Kafka consumer runner: subscribed");
            let ended = self.consume(&consumer, &shutdown).await;
            if let Err(error) = consumer.commit_consumer_state(CommitMode::Sync)
                && !matches!(
                    error.rdkafka_error_code(),
                    Some(rdkafka::types::RDKafkaErrorCode::NoOffset)
                )
            {
                tracing::warn!(%error, "Kafka consumer runner: final commit failed");
            }
            // Dropping the consumer leaves the group (librdkafka's close).
            drop(consumer);
            match ended {
                Ended::Shutdown => return Ok(()),
                Ended::Recreate => {
                    tokio::select! {
                        () = shutdown.cancelled() => return Ok(()),
                        () = tokio::time::sleep(self.redelivery_delay) => {}
                    }
                }
            }
        }
    }

    async fn consume(&self, consumer: &StreamConsumer, shutdown: &CancellationToken) -> Ended {
        loop {
            let received = tokio::select! {
                biased;
                () = shutdown.cancelled() => return Ended::Shutdown,
                received = consumer.recv() => received,
            };
            let message = match received {
                Ok(message) => Received {
                    topic: message.topic().to_owned(),
                    partition: message.partition(),
                    offset: message.offset(),
                    headers: message
                        .headers()
                        .map(|headers| {
                            headers
                                .iter()
                                .map(|h| {
                                    let value = h.value.unwrap_or_default();
                                    (
                                        h.key.to_owned(),
                                        String::from_utf8_lossy(value).into_owned(),
                                    )
                                })
                                .collect()
                        })
                        .unwrap_or_default(),
                    body: message.payload().unwrap_or_default().to_vec(),
                },
                Err(RdKafkaError::MessageConsumptionFatal(code)) => {
                    tracing::error!(%code, "Kafka consumer runner: fatal consumer error, starting a new consumer");
                    return Ended::Recreate;
                }
                Err(error) => {
                    // Transport failures, all brokers down, …: librdkafka reconnects.
                    tracing::warn!(%error, "Kafka consumer runner: consumer error");
                    continue;
                }
            };
            match settle(&self.consumer, &message.headers, &message.body).await {
                Settlement::Ack(_) => {
                    // librdkafka stores `offset + 1`: the next message to consume.
                    let stored =
                        consumer.store_offset(&message.topic, message.partition, message.offset);
                    if let Err(error) = stored {
                        // The partition was revoked meanwhile: its new owner delivers the
                        // message again and the inbox skips it.
                        tracing::debug!(%error, topic = %message.topic, partition = message.partition, "offset not stored");
                    }
                }
                Settlement::Redeliver(_) => {
                    let sought = consumer.seek(
                        &message.topic,
                        message.partition,
                        Offset::Offset(message.offset),
                        SEEK_TIMEOUT,
                    );
                    if let Err(error) = sought {
                        tracing::warn!(%error, "Kafka consumer runner: cannot seek back to an unsettled message, starting a new consumer");
                        return Ended::Recreate;
                    }
                    let delay = redelivery_pause(&self.consumer, self.redelivery_delay);
                    tokio::select! {
                        () = shutdown.cancelled() => return Ended::Shutdown,
                        () = tokio::time::sleep(delay) => {}
                    }
                }
            }
        }
    }
}
