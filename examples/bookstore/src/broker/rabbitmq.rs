//! The scenarios on RabbitMQ: an exchange and a queue of the scenario's own.

use outbox_brokers::rabbitmq::lapin::options::{
    BasicGetOptions, ExchangeDeleteOptions, QueueBindOptions, QueueDeclareOptions,
    QueueDeleteOptions,
};
use outbox_brokers::rabbitmq::lapin::types::{AMQPValue, FieldTable};
use outbox_brokers::rabbitmq::lapin::{Channel, Connection, ConnectionProperties};
use outbox_brokers::rabbitmq::{self, RabbitPublisher};
use outbox_brokers::testing::Proxy;
use uuid::Uuid;

use super::{DemoPublisher, Received, through};
use crate::error::DemoError;

pub(super) struct RabbitChannel {
    url: String,
    /// The exchange the publishers publish to, and the queue bound to it (`#`).
    name: String,
}

async fn channel(url: &str) -> Result<(Connection, Channel), DemoError> {
    let connection = Connection::connect(url, ConnectionProperties::default())
        .await
        .map_err(DemoError::broker)?;
    let channel = connection
        .create_channel()
        .await
        .map_err(DemoError::broker)?;
    Ok((connection, channel))
}

impl RabbitChannel {
    pub(super) async fn open(url: &str, name: &str) -> Result<Self, DemoError> {
        let (connection, channel) = channel(url).await?;
        rabbitmq::declare_exchange(&channel, name)
            .await
            .map_err(DemoError::broker)?;
        channel
            .queue_declare(
                name.into(),
                QueueDeclareOptions {
                    durable: true,
                    ..QueueDeclareOptions::default()
                },
                FieldTable::default(),
            )
            .await
            .map_err(DemoError::broker)?;
        channel
            .queue_bind(
                name.into(),
                name.into(),
                "#".into(),
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .map_err(DemoError::broker)?;
        let _ = connection.close(200, "bye".into()).await;
        Ok(Self {
            url: url.to_owned(),
            name: name.to_owned(),
        })
    }

    pub(super) async fn publisher(
        &self,
        proxy: Option<&Proxy>,
    ) -> Result<DemoPublisher, DemoError> {
        let publisher = RabbitPublisher::builder(through(&self.url, proxy, 5672), &self.name)
            .connection_name("bookstore-demo")
            .build()
            .map_err(DemoError::broker)?;
        publisher.connect().await.map_err(DemoError::broker)?;
        Ok(DemoPublisher::RabbitMq(publisher))
    }

    /// Reads every ready message of the queue without acknowledging it; closing the channel
    /// puts them back, in order.
    pub(super) async fn messages(&self) -> Result<Vec<Received>, DemoError> {
        let (connection, channel) = channel(&self.url).await?;
        let mut messages = Vec::new();
        while let Some(got) = channel
            .basic_get(self.name.as_str().into(), BasicGetOptions { no_ack: false })
            .await
            .map_err(DemoError::broker)?
        {
            let delivery = got.delivery;
            let properties = &delivery.properties;
            let mut headers: Vec<(String, String)> = properties
                .headers()
                .as_ref()
                .map(|table| {
                    table
                        .into_iter()
                        .filter_map(|(name, value)| match value {
                            AMQPValue::LongString(text) => Some((
                                name.as_str().to_owned(),
                                String::from_utf8_lossy(text.as_bytes()).into_owned(),
                            )),
                            _ => None,
                        })
                        .collect()
                })
                .unwrap_or_default();
            if let Some(content_type) = properties.content_type() {
                headers.push((
                    outbox_core::cloudevents::header::CONTENT_TYPE.to_owned(),
                    content_type.as_str().to_owned(),
                ));
            }
            let message_id = properties
                .message_id()
                .as_ref()
                .and_then(|id| Uuid::parse_str(id.as_str()).ok());
            messages.push(Received::Binary {
                message_id,
                headers,
                body: delivery.data.clone(),
            });
        }
        let _ = channel.close(200, "read back".into()).await;
        let _ = connection.close(200, "bye".into()).await;
        Ok(messages)
    }

    pub(super) async fn close(self) {
        if let Ok((connection, channel)) = channel(&self.url).await {
            let _ = channel
                .queue_delete(self.name.as_str().into(), QueueDeleteOptions::default())
                .await;
            let _ = channel
                .exchange_delete(self.name.as_str().into(), ExchangeDeleteOptions::default())
                .await;
            let _ = connection.close(200, "bye".into()).await;
        }
    }
}
