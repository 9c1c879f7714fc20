//! The scenarios on NATS JetStream: a stream of the scenario's own.

use std::sync::Mutex;
use std::time::Duration;

use outbox_brokers::nats::async_nats::connection::State;
use outbox_brokers::nats::async_nats::{self, jetstream};
use outbox_brokers::nats::{self, NatsPublisher, NatsStream};
use outbox_brokers::route::Route;
use outbox_brokers::testing::Proxy;
use uuid::Uuid;

use super::{DemoPublisher, Received, through};
use crate::error::DemoError;

/// JetStream's duplicate window in the demo. JetStream drops a message whose
/// `Nats-Msg-Id` it saw within the window; the demo keeps it short so that scenario 4's
/// restarted relay (which starts after it) shows the inbox doing the deduplication. The
/// default is 2 minutes.
pub(super) const DUPLICATE_WINDOW: Duration = Duration::from_millis(500);

pub(super) struct NatsChannel {
    url: String,
    /// A client straight to the server (setup, read-back).
    admin: async_nats::Client,
    stream: NatsStream,
    /// Subject prefix captured by the stream (`bookstore-s1-<id>.`).
    prefix: String,
    /// The publishers' clients, to see whether they reconnected.
    clients: Mutex<Vec<async_nats::Client>>,
}

async fn connected(url: &str) -> Result<async_nats::Client, DemoError> {
    let client = nats::connect(url).await.map_err(DemoError::broker)?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while client.connection_state() != State::Connected {
        if tokio::time::Instant::now() >= deadline {
            return Err(DemoError::Broker(format!(
                "cannot connect to NATS at {url}"
            )));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(client)
}

impl NatsChannel {
    pub(super) async fn open(url: &str, name: &str) -> Result<Self, DemoError> {
        let admin = connected(url).await?;
        let prefix = format!("{name}.");
        let stream = NatsStream::new(name.to_ascii_uppercase(), [format!("{prefix}>")])
            .duplicate_window(DUPLICATE_WINDOW);
        stream.ensure(&admin).await.map_err(DemoError::broker)?;
        Ok(Self {
            url: url.to_owned(),
            admin,
            stream,
            prefix,
            clients: Mutex::new(Vec::new()),
        })
    }

    pub(super) async fn publisher(
        &self,
        proxy: Option<&Proxy>,
    ) -> Result<DemoPublisher, DemoError> {
        let client = connected(&through(&self.url, proxy, 4222)).await?;
        if let Ok(mut clients) = self.clients.lock() {
            clients.push(client.clone());
        }
        Ok(DemoPublisher::Nats(Box::new(
            NatsPublisher::builder(client)
                .route(Route::event_type(self.prefix.clone()))
                .ack_timeout(Duration::from_secs(1))
                .build(),
        )))
    }

    pub(super) fn ready(&self, _publisher: &NatsPublisher) -> bool {
        self.clients
            .lock()
            .map(|clients| {
                clients
                    .iter()
                    .all(|c| c.connection_state() == State::Connected)
            })
            .unwrap_or(true)
    }

    pub(super) async fn messages(&self) -> Result<Vec<Received>, DemoError> {
        let context = jetstream::new(self.admin.clone());
        let mut stream = context
            .get_stream(self.stream.name())
            .await
            .map_err(DemoError::broker)?;
        let state = stream
            .info()
            .await
            .map_err(DemoError::broker)?
            .state
            .clone();
        let mut messages = Vec::new();
        if state.messages > 0 {
            for sequence in state.first_sequence..=state.last_sequence {
                let message = stream
                    .get_raw_message(sequence)
                    .await
                    .map_err(DemoError::broker)?;
                let headers: Vec<(String, String)> = message
                    .headers
                    .iter()
                    .filter(|(name, _)| !name.to_string().to_ascii_lowercase().starts_with("nats-"))
                    .flat_map(|(name, values)| {
                        values
                            .iter()
                            .map(|value| (name.to_string(), value.as_str().to_owned()))
                    })
                    .collect();
                let message_id = headers
                    .iter()
                    .find(|(name, _)| {
                        name.eq_ignore_ascii_case(outbox_core::cloudevents::header::ID)
                    })
                    .and_then(|(_, id)| Uuid::parse_str(id).ok());
                messages.push(Received::Binary {
                    message_id,
                    headers,
                    body: message.payload.to_vec(),
                });
            }
        }
        Ok(messages)
    }

    pub(super) async fn close(self) {
        if let Err(error) = self.stream.delete(&self.admin).await {
            tracing::warn!(%error, "could not delete the demo stream");
        }
    }
}
