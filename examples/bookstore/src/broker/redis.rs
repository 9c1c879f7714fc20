//! The scenarios on Redis Streams: a stream key of the scenario's own.

use std::sync::Mutex;

use outbox_brokers::redis::client::aio::ConnectionManager;
use outbox_brokers::redis::client::streams::StreamRangeReply;
use outbox_brokers::redis::{self, FIELD_BODY, FIELD_KEY, RedisPublisher};
use outbox_brokers::route::Route;
use outbox_brokers::testing::Proxy;
use uuid::Uuid;

use super::{DemoPublisher, Received, through};
use crate::error::DemoError;

pub(super) struct RedisChannel {
    url: String,
    /// A connection straight to the server (read-back, cleanup).
    admin: ConnectionManager,
    /// The stream key.
    stream: String,
    /// The publishers' connections, to see whether they reconnected.
    connections: Mutex<Vec<ConnectionManager>>,
}

async fn ping(connection: &ConnectionManager) -> bool {
    let mut connection = connection.clone();
    redis::client::cmd("PING")
        .query_async::<String>(&mut connection)
        .await
        .is_ok()
}

impl RedisChannel {
    pub(super) async fn open(url: &str, name: &str) -> Result<Self, DemoError> {
        let client = redis::open(url).map_err(DemoError::broker)?;
        let admin = redis::connection(&client).map_err(DemoError::broker)?;
        if !ping(&admin).await {
            return Err(DemoError::Broker(format!("cannot reach Redis at {url}")));
        }
        Ok(Self {
            url: url.to_owned(),
            admin,
            stream: name.to_owned(),
            connections: Mutex::new(Vec::new()),
        })
    }

    pub(super) fn publisher(&self, proxy: Option<&Proxy>) -> Result<DemoPublisher, DemoError> {
        let client = redis::open(&through(&self.url, proxy, 6379)).map_err(DemoError::broker)?;
        let connection = redis::connection(&client).map_err(DemoError::broker)?;
        if let Ok(mut connections) = self.connections.lock() {
            connections.push(connection.clone());
        }
        Ok(DemoPublisher::Redis(
            RedisPublisher::builder(connection)
                .route(Route::fixed(self.stream.clone()))
                .build(),
        ))
    }

    pub(super) async fn ready(&self) -> bool {
        let connections: Vec<ConnectionManager> = self
            .connections
            .lock()
            .map(|connections| connections.clone())
            .unwrap_or_default();
        for connection in &connections {
            if !ping(connection).await {
                return false;
            }
        }
        true
    }

    pub(super) async fn messages(&self) -> Result<Vec<Received>, DemoError> {
        let mut connection = self.admin.clone();
        let reply: StreamRangeReply = redis::client::cmd("XRANGE")
            .arg(&self.stream)
            .arg("-")
            .arg("+")
            .query_async(&mut connection)
            .await
            .map_err(DemoError::broker)?;
        let mut messages = Vec::new();
        for entry in &reply.ids {
            let mut headers = Vec::new();
            let mut body = Vec::new();
            for name in entry.map.keys() {
                let value: String = entry.get(name).unwrap_or_default();
                if name == FIELD_BODY {
                    body = value.into_bytes();
                } else if name != FIELD_KEY {
                    headers.push((name.clone(), value));
                }
            }
            let message_id = headers
                .iter()
                .find(|(name, _)| name.eq_ignore_ascii_case(outbox_core::cloudevents::header::ID))
                .and_then(|(_, id)| Uuid::parse_str(id).ok());
            messages.push(Received::Binary {
                message_id,
                headers,
                body,
            });
        }
        Ok(messages)
    }

    pub(super) async fn close(self) {
        let mut connection = self.admin.clone();
        let _ = redis::client::cmd("DEL")
            .arg(&self.stream)
            .query_async::<i64>(&mut connection)
            .await;
    }
}
