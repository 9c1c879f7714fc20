//! The scenarios on Kafka (or a Kafka-compatible broker such as tansu): a topic of the
//! scenario's own, one partition, created and deleted with the admin API.
//!
//! No outage here: a Kafka client bootstraps from the given address but then connects to
//! the addresses the broker *advertises*, so a loopback proxy in front of the bootstrap
//! address cannot cut it. Scenarios 1 and 3 are skipped on Kafka (the workspace's Kafka
//! tests play that outage with a tansu broker that advertises the proxy's address).

use std::time::Duration;

use outbox_brokers::kafka::KafkaPublisher;
use outbox_brokers::kafka::rdkafka::ClientConfig;
use outbox_brokers::kafka::rdkafka::admin::{
    AdminClient, AdminOptions, NewTopic, TopicReplication,
};
use outbox_brokers::kafka::rdkafka::client::DefaultClientContext;
use outbox_brokers::kafka::rdkafka::consumer::{Consumer as _, StreamConsumer};
use outbox_brokers::kafka::rdkafka::message::{Headers as _, Message as _};
use outbox_brokers::route::Route;
use uuid::Uuid;

use super::{DemoPublisher, Received};
use crate::error::DemoError;

/// Why scenarios 1 and 3 are skipped on Kafka.
pub(super) const NO_OUTAGE: &str = "a Kafka client connects to the addresses the broker \
     advertises, so the demo's loopback proxy cannot cut it; the workspace's Kafka tests play \
     this outage with a tansu broker advertising the proxy (cargo test -p outbox-tests --test \
     broker_kafka)";

pub(super) struct KafkaChannel {
    brokers: String,
    topic: String,
}

fn admin(brokers: &str) -> Result<AdminClient<DefaultClientContext>, DemoError> {
    ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .create()
        .map_err(DemoError::broker)
}

impl KafkaChannel {
    pub(super) async fn open(brokers: &str, name: &str) -> Result<Self, DemoError> {
        let admin = admin(brokers)?;
        let topic = NewTopic::new(name, 1, TopicReplication::Fixed(1));
        let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
        let results = admin
            .create_topics([&topic], &options)
            .await
            .map_err(DemoError::broker)?;
        for result in results {
            if let Err((topic, code)) = result {
                return Err(DemoError::Broker(format!(
                    "cannot create the topic {topic}: {code}"
                )));
            }
        }
        Ok(Self {
            brokers: brokers.to_owned(),
            topic: name.to_owned(),
        })
    }

    pub(super) fn publisher(&self) -> Result<DemoPublisher, DemoError> {
        Ok(DemoPublisher::Kafka(
            KafkaPublisher::builder(self.brokers.clone())
                .route(Route::fixed(self.topic.clone()))
                .delivery_timeout(Duration::from_secs(2))
                .build()
                .map_err(DemoError::broker)?,
        ))
    }

    /// Every record of the topic, from a fresh consumer group reading from the start up to
    /// the high watermark.
    pub(super) async fn messages(&self) -> Result<Vec<Received>, DemoError> {
        let consumer: StreamConsumer = ClientConfig::new()
            .set("bootstrap.servers", &self.brokers)
            .set(
                "group.id",
                format!("bookstore-read-back-{}", Uuid::now_v7().simple()),
            )
            .set("auto.offset.reset", "earliest")
            .set("enable.auto.commit", "false")
            .create()
            .map_err(DemoError::broker)?;
        let topic = self.topic.clone();
        let (consumer, watermarks) = tokio::task::spawn_blocking(move || {
            let watermarks = consumer.fetch_watermarks(&topic, 0, Duration::from_secs(10));
            (consumer, watermarks)
        })
        .await
        .map_err(DemoError::broker)?;
        let (low, high) = watermarks.map_err(DemoError::broker)?;
        let expected = usize::try_from(high - low).unwrap_or(0);
        let mut messages = Vec::new();
        if expected == 0 {
            return Ok(messages);
        }
        consumer
            .subscribe(&[self.topic.as_str()])
            .map_err(DemoError::broker)?;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while messages.len() < expected {
            let received = tokio::time::timeout_at(deadline, consumer.recv())
                .await
                .map_err(|_| DemoError::Timeout(format!("reading back {}", self.topic)))?;
            let message = received.map_err(DemoError::broker)?;
            let headers: Vec<(String, String)> = message
                .headers()
                .map(|headers| {
                    headers
                        .iter()
                        .map(|header| {
                            (
                                header.key.to_owned(),
                                String::from_utf8_lossy(header.value.unwrap_or_default())
                                    .into_owned(),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            let message_id = headers
                .iter()
                .find(|(name, _)| name.eq_ignore_ascii_case(outbox_core::cloudevents::header::ID))
                .and_then(|(_, id)| Uuid::parse_str(id).ok());
            messages.push(Received::Binary {
                message_id,
                headers,
                body: message.payload().unwrap_or_default().to_vec(),
            });
        }
        Ok(messages)
    }

    pub(super) async fn close(self) {
        if let Ok(admin) = admin(&self.brokers) {
            let _ = admin
                .delete_topics(&[self.topic.as_str()], &AdminOptions::new())
                .await;
        }
    }
}
