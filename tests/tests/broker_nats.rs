//! The NATS JetStream adapter against the real server on 127.0.0.1:4222 (JetStream enabled):
//! what the publisher puts on the wire, JetStream's deduplication by `Nats-Msg-Id`, error
//! classification (unreachable server, missing stream, oversized message), the consumer
//! runner (applies once, acknowledges, redelivers in order what the inbox could not settle,
//! reconnects after a cut), and the end-to-end scenario of issue 6.
//!
//! Every test makes its own stream (`T<uuid>` capturing `t<uuid>.>`) and deletes it.
//! Connection cuts go through [`Proxy`], never through the shared server.

#![allow(clippy::unwrap_used)]

mod e2e_orders;

use std::time::{Duration, Instant};

use futures_util::StreamExt as _;

use e2e_orders::{
    CONSUMER, applied, assert_in_order, closed_port, consumer_tables, count, eventually,
    inbox_and_dead_letters, inbox_consumer, order, partitioned_consumer,
    partitioned_kills_and_a_join, through_proxy, with_payload,
};
use outbox_brokers::nats::async_nats::connection::State;
use outbox_brokers::nats::async_nats::jetstream;
use outbox_brokers::nats::{
    self, NatsConsumerRunner, NatsPublisher, NatsStream, async_nats, durable_name_for,
};
use outbox_brokers::route::{PartitionedRoute, Route};
use outbox_core::cloudevents::{self, header};
use outbox_core::publish::{PublishErrorKind, Publisher as _};
use outbox_core::{Envelope, EnvelopeConfig};
use outbox_seaorm::Outbox;
use outbox_seaorm::inbox::partitioned::PartitionedConsumer;
use outbox_tests::db::TestDb;
use outbox_tests::proxy::Proxy;
use outbox_tests::{Service, service};
use tokio_util::sync::CancellationToken;

/// A stream of the test's own and a client.
struct Fixture {
    client: async_nats::Client,
    stream: NatsStream,
    /// Subject prefix captured by the stream (`t<uuid>.`).
    prefix: String,
}

impl Fixture {
    async fn new(test: &str) -> Option<Self> {
        let url = service(Service::Nats, test)?;
        let client = connected(&url).await;
        let id = uuid::Uuid::now_v7().simple().to_string();
        let prefix = format!("t{id}.");
        let stream = NatsStream::new(format!("T{id}"), [format!("{prefix}>")]);
        stream.ensure(&client).await.unwrap();
        Some(Self {
            client,
            stream,
            prefix,
        })
    }

    fn publisher(&self, client: &async_nats::Client) -> NatsPublisher {
        NatsPublisher::builder(client.clone())
            .route(Route::event_type(self.prefix.clone()))
            .ack_timeout(Duration::from_secs(1))
            .build()
    }

    /// The stream's messages, in order.
    async fn messages(&self) -> Vec<jetstream::message::StreamMessage> {
        let context = jetstream::new(self.client.clone());
        let mut stream = context.get_stream(self.stream.name()).await.unwrap();
        let state = stream.info().await.unwrap().state.clone();
        let mut messages = Vec::new();
        if state.messages > 0 {
            for sequence in state.first_sequence..=state.last_sequence {
                messages.push(stream.get_raw_message(sequence).await.unwrap());
            }
        }
        messages
    }

    fn runner(
        &self,
        client: &async_nats::Client,
        inbox: outbox_seaorm::inbox::Consumer,
    ) -> NatsConsumerRunner {
        NatsConsumerRunner::builder(client.clone(), inbox, self.stream.name())
            .ack_wait(Duration::from_secs(2))
            .fetch_wait(Duration::from_millis(300))
            .redelivery_backoff(
                outbox_core::policy::Backoff::new()
                    .with_min_delay(Duration::from_millis(200))
                    .with_max_delay(Duration::from_millis(500)),
            )
            .retry_backoff(
                outbox_core::policy::Backoff::new()
                    .with_min_delay(Duration::from_millis(100))
                    .with_max_delay(Duration::from_secs(1)),
            )
            .build()
            .unwrap()
    }

    async fn close(self) {
        self.stream.delete(&self.client).await.unwrap();
    }
}

/// A client (see [`nats::connect`]) once it is connected.
async fn connected(url: &str) -> async_nats::Client {
    let client = nats::connect(url).await.unwrap();
    assert!(
        eventually(Duration::from_secs(10), async || client.connection_state()
            == State::Connected)
        .await,
        "cannot connect to {url}"
    );
    client
}

/// The envelope's headers of a stored message (the broker's `Nats-*` ones left out).
fn envelope_headers(message: &jetstream::message::StreamMessage) -> Vec<(String, String)> {
    message
        .headers
        .iter()
        .filter(|(name, _)| !name.to_string().to_ascii_lowercase().starts_with("nats-"))
        .flat_map(|(name, values)| {
            values
                .iter()
                .map(|value| (name.to_string(), value.as_str().to_owned()))
        })
        .collect()
}

fn header_of<'m>(message: &'m jetstream::message::StreamMessage, name: &str) -> Option<&'m str> {
    message
        .headers
        .get(name)
        .map(async_nats::HeaderValue::as_str)
}

/// Orders 0..2 of customers 0..2, interleaved as a relay batch would be.
fn batch() -> Vec<Envelope> {
    (0..2)
        .flat_map(|n| (0..3).map(move |customer| order(customer, n)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publishes_a_batch_with_cloudevents_headers_and_the_message_id() {
    let Some(fixture) =
        Fixture::new("publishes_a_batch_with_cloudevents_headers_and_the_message_id").await
    else {
        return;
    };
    let publisher = fixture.publisher(&fixture.client);
    let batch = batch();
    let outcomes = publisher.publish(&batch).await.unwrap();
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");

    let messages = fixture.messages().await;
    assert_eq!(messages.len(), batch.len());
    let expected: Vec<&Envelope> = batch.iter().collect();
    assert_eq!(
        by_aggregate(&messages),
        by_aggregate_of(&expected),
        "stored in batch order per aggregate"
    );
    for message in &messages {
        let envelope = batch
            .iter()
            .find(|e| header_of(message, "Nats-Msg-Id") == Some(e.message_id.to_string().as_str()))
            .expect("Nats-Msg-Id is the message id of an envelope of the batch");
        assert_eq!(
            message.subject.as_str(),
            format!("{}{}", fixture.prefix, envelope.event_type),
            "subject = prefix + event type"
        );
        let id = envelope.message_id.to_string();
        assert_eq!(header_of(message, header::ID), Some(id.as_str()));
        assert_eq!(
            header_of(message, header::SUBJECT),
            Some(envelope.aggregate_id.as_str()),
            "the aggregate id (the key) travels as ce-subject"
        );
        assert_eq!(
            header_of(message, header::TYPE),
            Some(envelope.event_type.as_str())
        );
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&message.payload).unwrap(),
            envelope.payload
        );
        let decoded = cloudevents::from_binary(
            envelope_headers(message)
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_bytes())),
            &message.payload,
            &EnvelopeConfig::default(),
        )
        .unwrap();
        assert_eq!(
            &decoded, envelope,
            "the stored message decodes to the envelope"
        );
    }
    fixture.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_message_published_twice_is_stored_once() {
    let Some(fixture) = Fixture::new("the_same_message_published_twice_is_stored_once").await
    else {
        return;
    };
    let publisher = fixture.publisher(&fixture.client);
    let batch = batch();
    for _ in 0..2 {
        let outcomes = publisher.publish(&batch).await.unwrap();
        assert!(
            outcomes.iter().all(Result::is_ok),
            "a duplicate is acknowledged: {outcomes:?}"
        );
    }
    let messages = fixture.messages().await;
    assert_eq!(
        messages.len(),
        batch.len(),
        "JetStream dropped the duplicates"
    );
    let expected: Vec<&Envelope> = batch.iter().collect();
    assert_eq!(by_aggregate(&messages), by_aggregate_of(&expected));
    fixture.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_server_gives_transient_errors_and_the_publisher_recovers() {
    let Some(fixture) =
        Fixture::new("an_unreachable_server_gives_transient_errors_and_the_publisher_recovers")
            .await
    else {
        return;
    };
    // Never reachable: the batch fails at once as unavailable.
    let nowhere = nats::connect(&format!("nats://127.0.0.1:{}", closed_port().await))
        .await
        .unwrap();
    let started = Instant::now();
    let error = fixture
        .publisher(&nowhere)
        .publish(&batch())
        .await
        .unwrap_err();
    assert_eq!(error.kind(), PublishErrorKind::Unavailable, "{error}");
    assert!(started.elapsed() < Duration::from_secs(1));

    // Reachable, then cut: transient errors within the ack timeout, no panic.
    let proxy = Proxy::start("127.0.0.1:4222").await.unwrap();
    let client = connected(&format!("nats://{}", proxy.addr())).await;
    let publisher = fixture.publisher(&client);
    let first = vec![order(0, 0)];
    assert!(publisher.publish(&first).await.unwrap()[0].is_ok());
    // Once the connection is closed: a batch sent while the proxy is still closing it can
    // get through (seen with RabbitMQ in CI).
    proxy.cut_and_wait().await;
    let during = vec![order(0, 1), order(0, 2), order(1, 0)];
    let started = Instant::now();
    match publisher.publish(&during).await {
        Err(error) => assert!(error.is_transient(), "{error}"),
        Ok(outcomes) => {
            assert_eq!(outcomes.len(), during.len());
            for outcome in &outcomes {
                let error = outcome.as_ref().unwrap_err();
                assert!(error.is_transient(), "{error}");
            }
        }
    }
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );

    // Back: the client reconnects and the same messages go through, once each.
    proxy.restore();
    assert!(
        eventually(Duration::from_secs(15), async || client.connection_state()
            == State::Connected)
        .await,
        "the client reconnects"
    );
    let outcomes = publisher.publish(&during).await.unwrap();
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    assert!(proxy.connections() >= 2, "a new connection was made");
    // Messages the client still had queued when the connection dropped may be stored after
    // the reconnect, before the republished ones: across aggregates the stream's order is
    // free, within one it is `seq` order.
    let expected: Vec<&Envelope> = first.iter().chain(&during).collect();
    assert_eq!(
        by_aggregate(&fixture.messages().await),
        by_aggregate_of(&expected),
        "each message stored once, in order per aggregate"
    );
    fixture.close().await;
}

/// Message ids per aggregate, each list in the order given.
type ByAggregate = std::collections::BTreeMap<String, Vec<String>>;

/// Groups `(aggregate id, message id)` pairs by aggregate, keeping their order.
fn grouped(pairs: impl IntoIterator<Item = (String, String)>) -> ByAggregate {
    let mut ids = ByAggregate::new();
    for (aggregate, id) in pairs {
        ids.entry(aggregate).or_default().push(id);
    }
    ids
}

/// The message ids of stored messages, per aggregate (`ce-subject`), in stream order.
fn by_aggregate(messages: &[jetstream::message::StreamMessage]) -> ByAggregate {
    grouped(messages.iter().map(|message| {
        (
            header_of(message, header::SUBJECT).unwrap().to_owned(),
            header_of(message, header::ID).unwrap().to_owned(),
        )
    }))
}

/// The message ids of envelopes, per aggregate, in the given order.
fn by_aggregate_of(envelopes: &[&Envelope]) -> ByAggregate {
    grouped(
        envelopes
            .iter()
            .map(|e| (e.aggregate_id.clone(), e.message_id.to_string())),
    )
}

/// The regression of a CI run: the connection dropped while a batch was in flight, the
/// client lost order 0/1 in the dead socket and sent 0/2 (still queued) after reconnecting,
/// so 0/2 preceded 0/1 in the stream. The publisher keeps one message per aggregate
/// unacknowledged: a network that stalls sees the first message of each aggregate, nothing
/// queued behind it, and whatever of it is lost, the aggregate's order holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_connection_sees_one_message_per_aggregate_and_order_holds() {
    let Some(fixture) =
        Fixture::new("a_stalled_connection_sees_one_message_per_aggregate_and_order_holds").await
    else {
        return;
    };
    let proxy = Proxy::start("127.0.0.1:4222").await.unwrap();
    let client = connected(&format!("nats://{}", proxy.addr())).await;
    let publisher = fixture.publisher(&client);
    // Customers 0..2, orders 0..2 each, interleaved.
    let batch = batch();

    proxy.hold();
    let outcomes = publisher.publish(&batch).await.unwrap();
    for outcome in &outcomes {
        let error = outcome.as_ref().unwrap_err();
        assert!(error.is_transient(), "{error}");
    }
    let held = String::from_utf8_lossy(&proxy.held()).into_owned();
    for envelope in &batch {
        let first_of_its_aggregate = batch
            .iter()
            .find(|e| e.aggregate_id == envelope.aggregate_id)
            .is_some_and(|first| first.message_id == envelope.message_id);
        assert_eq!(
            held.contains(&envelope.message_id.to_string()),
            first_of_its_aggregate,
            "only the first message of each aggregate is sent, then the publisher waits for \
             its acknowledgement: {} of {} ({held:?})",
            envelope.message_id,
            envelope.aggregate_id,
        );
    }

    // What the stalled connection held is lost; the batch goes through on a new one.
    proxy.cut_and_wait().await;
    proxy.restore();
    assert!(
        eventually(Duration::from_secs(15), async || client.connection_state()
            == State::Connected)
        .await,
        "the client reconnects"
    );
    let outcomes = publisher.publish(&batch).await.unwrap();
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    let expected: Vec<&Envelope> = batch.iter().collect();
    assert_eq!(
        by_aggregate(&fixture.messages().await),
        by_aggregate_of(&expected),
        "each message stored once, in order per aggregate"
    );
    fixture.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_message_holds_back_the_rest_of_its_aggregate_only() {
    let Some(fixture) =
        Fixture::new("a_failed_message_holds_back_the_rest_of_its_aggregate_only").await
    else {
        return;
    };
    // Customer 0's first order goes to a subject no stream captures.
    let uncaptured = format!("u{}", uuid::Uuid::now_v7().simple());
    let first = order(0, 0);
    let route = {
        let (prefix, first_id, uncaptured) =
            (fixture.prefix.clone(), first.message_id, uncaptured.clone());
        Route::custom(move |e| {
            if e.message_id == first_id {
                format!("{uncaptured}.{}", e.event_type)
            } else {
                format!("{prefix}{}", e.event_type)
            }
        })
    };
    let publisher = NatsPublisher::builder(fixture.client.clone())
        .route(route)
        .ack_timeout(Duration::from_secs(1))
        .build();
    // Customer 1's first order is over the server's max_payload (1 MiB by default).
    let big = with_payload(
        &order(1, 0),
        serde_json::json!({ "blob": "x".repeat(2 * 1024 * 1024) }),
    );
    let batch = vec![
        first,
        big,
        order(2, 0),
        order(0, 1),
        order(1, 1),
        order(2, 1),
    ];
    let outcomes = publisher.publish(&batch).await.unwrap();
    let kinds: Vec<Option<PublishErrorKind>> = outcomes
        .iter()
        .map(|o| {
            o.as_ref()
                .err()
                .map(outbox_core::publish::PublishError::kind)
        })
        .collect();
    assert_eq!(
        kinds,
        [
            Some(PublishErrorKind::Unavailable), // no stream: transient (JetStream may be starting)
            Some(PublishErrorKind::TooLarge),    // permanent
            None,
            Some(PublishErrorKind::NotAttempted), // not sent, behind customer 0's failure
            Some(PublishErrorKind::NotAttempted), // not sent, behind customer 1's failure
            None,
        ]
    );
    let stored: Vec<String> = fixture
        .messages()
        .await
        .iter()
        .map(|m| header_of(m, header::ID).unwrap().to_owned())
        .collect();
    assert_eq!(
        stored,
        [&batch[2], &batch[5]]
            .iter()
            .map(|e| e.message_id.to_string())
            .collect::<Vec<_>>(),
        "nothing of customers 0 and 1 is sent after their failures"
    );
    fixture.close().await;
}

/// `NatsStream::ensure` creates, then updates; the runner's durable consumer is created, then
/// updated to a changed configuration.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stream_and_consumer_are_created_and_updated() {
    let Some(fixture) = Fixture::new("the_stream_and_consumer_are_created_and_updated").await
    else {
        return;
    };
    let info = fixture.stream.ensure(&fixture.client).await.unwrap();
    assert_eq!(info.config.duplicate_window, nats::DEFAULT_DUPLICATE_WINDOW);
    let longer = fixture
        .stream
        .clone()
        .duplicate_window(Duration::from_secs(600));
    let info = longer.ensure(&fixture.client).await.unwrap();
    assert_eq!(info.config.duplicate_window, Duration::from_secs(600));
    assert_eq!(info.config.subjects, [format!("{}>", fixture.prefix)]);

    let db = TestDb::sqlite_memory().await;
    let outbox = Outbox::default();
    let runner = fixture.runner(&fixture.client, inbox_consumer(db.conn(), &outbox, 3));
    let consumer = runner.ensure_consumer().await.unwrap();
    let config = &consumer.cached_info().config;
    assert_eq!(
        config.durable_name.as_deref(),
        Some(durable_name_for(CONSUMER).as_str())
    );
    assert_eq!(config.ack_wait, Duration::from_secs(2));
    assert_eq!(
        config.max_deliver, -1,
        "unlimited: the inbox dead-letters poison messages"
    );
    assert_eq!(
        config.max_ack_pending, 1,
        "one delivery outstanding at a time"
    );
    let changed = NatsConsumerRunner::builder(
        fixture.client.clone(),
        inbox_consumer(db.conn(), &outbox, 3),
        fixture.stream.name(),
    )
    .ack_wait(Duration::from_secs(5))
    .max_deliver(50)
    .max_ack_pending(64)
    .build()
    .unwrap();
    let consumer = changed.ensure_consumer().await.unwrap();
    let config = &consumer.cached_info().config;
    assert_eq!(
        (config.ack_wait, config.max_deliver, config.max_ack_pending),
        (Duration::from_secs(5), 50, 64)
    );

    let none_pending = NatsConsumerRunner::builder(
        fixture.client.clone(),
        inbox_consumer(db.conn(), &outbox, 3),
        fixture.stream.name(),
    )
    .max_ack_pending(0)
    .build();
    assert!(
        matches!(&none_pending, Err(nats::NatsError::Config(message)) if message.contains("max_ack_pending")),
        "{none_pending:?}"
    );

    assert!(longer.delete(&fixture.client).await.unwrap());
    assert!(
        !longer.delete(&fixture.client).await.unwrap(),
        "already gone"
    );
    db.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runner_applies_each_message_once_and_acknowledges_it() {
    let Some(fixture) =
        Fixture::new("the_runner_applies_each_message_once_and_acknowledges_it").await
    else {
        return;
    };
    let db = TestDb::sqlite_file().await;
    let outbox = Outbox::default();
    consumer_tables(db.conn(), &outbox).await;
    let publisher = fixture.publisher(&fixture.client);
    let batch = batch();
    assert!(
        publisher
            .publish(&batch)
            .await
            .unwrap()
            .iter()
            .all(Result::is_ok)
    );
    // A copy of the first message without `Nats-Msg-Id` (JetStream cannot drop it): the
    // runner delivers it, the inbox skips it.
    let copy = cloudevents::to_binary(&batch[0]).unwrap();
    let mut headers = async_nats::HeaderMap::new();
    for (name, value) in &copy.headers {
        headers.insert(name.as_ref(), value.as_str());
    }
    jetstream::new(fixture.client.clone())
        .publish_with_headers(
            format!("{}{}", fixture.prefix, batch[0].event_type),
            headers,
            copy.body.into(),
        )
        .await
        .unwrap()
        .await
        .unwrap();

    let runner = fixture.runner(&fixture.client, inbox_consumer(db.conn(), &outbox, 3));
    assert_eq!(runner.durable_name(), durable_name_for(CONSUMER));
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(runner.run(shutdown.clone()));
    assert!(
        eventually(Duration::from_secs(10), async || applied(db.conn())
            .await
            .len()
            >= 6)
        .await
    );
    // The duplicate comes last and is acknowledged too.
    let context = jetstream::new(fixture.client.clone());
    let consumer: jetstream::consumer::PullConsumer = context
        .get_stream(fixture.stream.name())
        .await
        .unwrap()
        .get_consumer(&durable_name_for(CONSUMER))
        .await
        .unwrap();
    assert!(
        eventually(Duration::from_secs(5), async || {
            let info = consumer.get_info().await.unwrap();
            info.num_ack_pending == 0
                && info.num_pending == 0
                && info.ack_floor.stream_sequence == 7
        })
        .await,
        "every message acknowledged: {:?}",
        consumer.get_info().await.unwrap()
    );
    shutdown.cancel();
    let report = running.await.unwrap();
    assert_eq!(report.acked, 7, "{report:?}");
    assert_eq!(report.redelivered, 0);
    let rows = applied(db.conn()).await;
    assert_eq!(rows.len(), 6, "the copy was not applied again");
    assert_in_order(&rows, 2);
    assert_eq!(inbox_and_dead_letters(db.conn(), &outbox).await, (6, 0));
    db.close().await;
    fixture.close().await;
}

/// A session that stalls holds deliveries of the durable: alive, it keeps them with
/// progress acknowledgements (as the runner does while a handler is slow), then dies without
/// acknowledging. A runner started meanwhile (a restart, a second instance) must not be handed
/// the messages behind them first: with more than one delivery pending, JetStream hands out
/// newer messages while older ones wait for their redelivery (the soak saw it after server
/// restarts). Every message is applied once, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_held_by_a_stalled_session_are_not_overtaken() {
    let Some(fixture) = Fixture::new("messages_held_by_a_stalled_session_are_not_overtaken").await
    else {
        return;
    };
    let db = TestDb::sqlite_file().await;
    let outbox = Outbox::default();
    consumer_tables(db.conn(), &outbox).await;
    let publisher = fixture.publisher(&fixture.client);
    let orders: Vec<Envelope> = (0..10).map(|n| order(0, n)).collect();
    assert!(
        publisher
            .publish(&orders)
            .await
            .unwrap()
            .iter()
            .all(Result::is_ok)
    );
    let runner = fixture.runner(&fixture.client, inbox_consumer(db.conn(), &outbox, 3));
    let durable = runner.ensure_consumer().await.unwrap();

    // The stalled session: takes what JetStream hands it, keeps it for 2.5 s, then dies.
    let mut taken = durable
        .batch()
        .max_messages(5)
        .expires(Duration::from_millis(500))
        .messages()
        .await
        .unwrap();
    let mut held = Vec::new();
    while let Some(message) = taken.next().await {
        held.push(message.unwrap());
    }
    assert!(
        !held.is_empty(),
        "the stalled session took the first message"
    );
    let stalled = tokio::spawn(async move {
        for _ in 0..5 {
            for message in &held {
                message
                    .ack_with(jetstream::AckKind::Progress)
                    .await
                    .unwrap();
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        held.len()
    });

    let shutdown = CancellationToken::new();
    let running = tokio::spawn(runner.run(shutdown.clone()));
    assert!(
        eventually(Duration::from_secs(20), async || applied(db.conn())
            .await
            .len()
            >= 10)
        .await,
        "{} of 10 applied",
        applied(db.conn()).await.len()
    );
    let held = stalled.await.unwrap();
    shutdown.cancel();
    let report = running.await.unwrap();
    let rows = applied(db.conn()).await;
    eprintln!(
        "  the stalled session held {held} deliveries; applied: {:?}; {report:?}",
        rows.iter().map(|row| row.order_no).collect::<Vec<_>>()
    );
    assert_eq!(rows.len(), 10);
    assert_in_order(&rows, 10);
    db.close().await;
    fixture.close().await;
}

/// The consumer's database is unreachable: the inbox cannot settle (not even dead-letter)
/// the message, so the runner naks it and every later message of the batch; once the
/// database is back they are applied, once each and in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_the_inbox_cannot_settle_are_redelivered_in_order() {
    const TEST: &str = "messages_the_inbox_cannot_settle_are_redelivered_in_order";
    let Some(fixture) = Fixture::new(TEST).await else {
        return;
    };
    let Some(db) = TestDb::mariadb(TEST).await else {
        return;
    };
    let outbox = Outbox::default();
    consumer_tables(db.conn(), &outbox).await;
    let db_proxy = Proxy::start("127.0.0.1:3306").await.unwrap();
    let through = through_proxy(&db, &db_proxy).await;
    db_proxy.cut();

    let publisher = fixture.publisher(&fixture.client);
    let batch = vec![order(0, 0), order(0, 1), order(1, 0), order(0, 2)];
    assert!(
        publisher
            .publish(&batch)
            .await
            .unwrap()
            .iter()
            .all(Result::is_ok)
    );
    let runner = fixture.runner(&fixture.client, inbox_consumer(&through, &outbox, 2));
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(runner.run(shutdown.clone()));
    // One settle while the database is down: two attempts and the dead-letter insert,
    // each failing after the pool's 800 ms acquire timeout.
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    assert!(applied(db.conn()).await.is_empty());
    db_proxy.restore();
    let caught_up = eventually(Duration::from_secs(15), async || {
        applied(db.conn()).await.len() >= 4
    })
    .await;
    assert!(
        caught_up,
        "applied after the database came back: {:?}",
        (
            applied(db.conn()).await,
            inbox_and_dead_letters(db.conn(), &outbox).await
        )
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    shutdown.cancel();
    let report = running.await.unwrap();
    eprintln!("  {report:?}");
    assert!(report.redelivered >= 1, "{report:?}");
    assert_eq!(report.acked, 4, "{report:?}");
    let rows = applied(db.conn()).await;
    assert_eq!(rows.len(), 4);
    let customer_0: Vec<u32> = rows
        .iter()
        .filter(|r| r.customer_id == "customer-000")
        .map(|r| r.order_no)
        .collect();
    assert_eq!(customer_0, [0, 1, 2]);
    assert_eq!(
        inbox_and_dead_letters(db.conn(), &outbox).await,
        (4, 0),
        "no dead letter"
    );
    through.close().await.unwrap();
    db.close().await;
    fixture.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runner_reconnects_after_a_cut() {
    let Some(fixture) = Fixture::new("the_runner_reconnects_after_a_cut").await else {
        return;
    };
    let db = TestDb::sqlite_file().await;
    let outbox = Outbox::default();
    consumer_tables(db.conn(), &outbox).await;
    let publisher = fixture.publisher(&fixture.client);
    let proxy = Proxy::start("127.0.0.1:4222").await.unwrap();
    let client = connected(&format!("nats://{}", proxy.addr())).await;
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(
        fixture
            .runner(&client, inbox_consumer(db.conn(), &outbox, 3))
            .run(shutdown.clone()),
    );
    assert!(publisher.publish(&[order(0, 0)]).await.unwrap()[0].is_ok());
    assert!(
        eventually(Duration::from_secs(10), async || applied(db.conn())
            .await
            .len()
            == 1)
        .await
    );

    proxy.cut();
    let during = [order(0, 1), order(0, 2)];
    assert!(
        publisher
            .publish(&during)
            .await
            .unwrap()
            .iter()
            .all(Result::is_ok)
    );
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(
        applied(db.conn()).await.len(),
        1,
        "nothing reaches the runner while cut"
    );
    proxy.restore();
    let started = Instant::now();
    assert!(
        eventually(Duration::from_secs(20), async || applied(db.conn())
            .await
            .len()
            == 3)
        .await,
        "applied after the reconnect"
    );
    eprintln!("  caught up {:?} after the restore", started.elapsed());
    shutdown.cancel();
    let report = running.await.unwrap();
    eprintln!("  {report:?}");
    assert_in_order(&applied(db.conn()).await, 3);
    assert!(proxy.connections() >= 2, "the runner's client reconnected");
    assert_eq!(
        count(db.conn(), "SELECT COUNT(*) FROM stock WHERE reserved < 0").await,
        0
    );
    db.close().await;
    fixture.close().await;
}

/// Issue 6, item 4, on NATS JetStream: 1 000 orders over 100 customers; midway the broker is
/// cut for 2 s (publisher and runner connections alike) and the relay task is replaced.
/// Order holds per customer: one stream, one runner on its durable consumer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn end_to_end_through_nats_with_a_cut_and_a_relay_restart() {
    const TEST: &str = "end_to_end_through_nats_with_a_cut_and_a_relay_restart";
    let Some(fixture) = Fixture::new(TEST).await else {
        return;
    };
    let proxy = Proxy::start("127.0.0.1:4222").await.unwrap();
    let url = format!("nats://{}", proxy.addr());
    let runner_client = connected(&url).await;
    let runner_fixture = &fixture;
    e2e_orders::end_to_end(
        TEST,
        &proxy,
        100,
        10,
        async || runner_fixture.publisher(&connected(&url).await),
        |inbox, shutdown| {
            let runner = NatsConsumerRunner::builder(runner_client, inbox, fixture.stream.name())
                .ack_wait(Duration::from_secs(2))
                .fetch_wait(Duration::from_millis(500))
                .redelivery_backoff(
                    outbox_core::policy::Backoff::new()
                        .with_min_delay(Duration::from_millis(200))
                        .with_max_delay(Duration::from_secs(1)),
                )
                .retry_backoff(
                    outbox_core::policy::Backoff::new()
                        .with_min_delay(Duration::from_millis(100))
                        .with_max_delay(Duration::from_secs(1)),
                )
                .build()
                .unwrap();
            tokio::spawn(async move { format!("{:?}", runner.run(shutdown).await) })
        },
    )
    .await;
    fixture.close().await;
}

/// A requeued dead letter is redelivered by the running runner (no restart, no call of
/// `redeliver_requeued` by the application).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runner_redelivers_requeued_dead_letters() {
    let Some(fixture) = Fixture::new("the_runner_redelivers_requeued_dead_letters").await else {
        return;
    };
    let db = TestDb::sqlite_file().await;
    let outbox = Outbox::default();
    let publisher = fixture.publisher(&fixture.client);
    let report = e2e_orders::a_requeued_dead_letter_is_redelivered(
        db.conn(),
        &outbox,
        &publisher,
        |consumer, shutdown| tokio::spawn(fixture.runner(&fixture.client, consumer).run(shutdown)),
    )
    .await;
    assert_eq!(report.acked, 1, "{report:?}");
    db.close().await;
    fixture.close().await;
}

/// Three processes of one consumer share six partitions (one durable each, filtered by
/// the partition in the subject), one killed and replaced three times, a fourth joining:
/// every order applied once, each customer's in order ([`partitioned_kills_and_a_join`]).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitioned_runners_apply_once_and_in_order_across_kills_and_a_join() {
    let test = "partitioned_runners_apply_once_and_in_order_across_kills_and_a_join";
    let Some(fixture) = Fixture::new(test).await else {
        return;
    };
    let Some(db) = TestDb::postgres(test).await else {
        return;
    };
    let outbox = Outbox::default();
    consumer_tables(db.conn(), &outbox).await;
    let route = PartitionedRoute::new(format!("{}p", fixture.prefix), 6).with_event_type();
    let publisher = NatsPublisher::builder(fixture.client.clone())
        .route(Route::partitioned(route.clone()))
        .ack_timeout(Duration::from_secs(2))
        .build();
    let shutdown = CancellationToken::new();
    partitioned_kills_and_a_join(db.conn(), &outbox, publisher, &shutdown, |id| {
        let (inbox, partitioned) = partitioned_consumer(db.conn(), &outbox, 6, id);
        let runner =
            NatsConsumerRunner::builder(fixture.client.clone(), inbox, fixture.stream.name())
                .ack_wait(Duration::from_secs(2))
                .fetch_wait(Duration::from_millis(300))
                .build_partitioned(partitioned, route.clone())
                .unwrap();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            runner.run(shutdown).await;
        })
    })
    .await;
    db.close().await;
    fixture.close().await;
}

/// A partition runner that finds a delivery its killed predecessor left unacknowledged
/// restarts the durable at its ack floor at once: with a 30 s `ack_wait`, every message is
/// applied within seconds, the unacknowledged one first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_runner_does_not_wait_ack_wait_for_its_predecessors_deliveries() {
    let test = "a_partition_runner_does_not_wait_ack_wait_for_its_predecessors_deliveries";
    let Some(fixture) = Fixture::new(test).await else {
        return;
    };
    let db = TestDb::sqlite_file().await;
    let outbox = Outbox::default();
    consumer_tables(db.conn(), &outbox).await;
    let route = PartitionedRoute::new(format!("{}p", fixture.prefix), 1).with_event_type();
    let publisher = NatsPublisher::builder(fixture.client.clone())
        .route(Route::partitioned(route.clone()))
        .build();
    let batch: Vec<Envelope> = (0..3).map(|n| order(0, n)).collect();
    assert!(
        publisher
            .publish(&batch)
            .await
            .unwrap()
            .iter()
            .all(Result::is_ok)
    );

    let inbox = inbox_consumer(db.conn(), &outbox, 3);
    let partitioned = PartitionedConsumer::builder(inbox.clone(), 1)
        .lease_ttl(Duration::from_secs(2))
        .heartbeat_interval(Duration::from_millis(250))
        .build()
        .unwrap();
    let runner = NatsConsumerRunner::builder(fixture.client.clone(), inbox, fixture.stream.name())
        .ack_wait(Duration::from_secs(30))
        .fetch_wait(Duration::from_millis(300))
        .build_partitioned(partitioned, route)
        .unwrap();
    // The predecessor: took the first message on the partition's durable, then died.
    let durable = runner.durable_name(0);
    let stream = jetstream::new(fixture.client.clone())
        .get_stream(fixture.stream.name())
        .await
        .unwrap();
    let predecessor: jetstream::consumer::PullConsumer = stream
        .create_consumer(jetstream::consumer::pull::Config {
            durable_name: Some(durable.clone()),
            filter_subject: runner.filter_subject(0),
            ack_policy: jetstream::consumer::AckPolicy::Explicit,
            ack_wait: Duration::from_secs(30),
            max_ack_pending: 1,
            ..Default::default()
        })
        .await
        .unwrap();
    let mut taken = predecessor
        .fetch()
        .max_messages(1)
        .messages()
        .await
        .unwrap();
    assert!(
        taken.next().await.unwrap().is_ok(),
        "the predecessor got one delivery"
    );
    drop(taken);
    assert_eq!(predecessor.clone().info().await.unwrap().num_ack_pending, 1);

    let shutdown = CancellationToken::new();
    let started = Instant::now();
    let running = tokio::spawn(runner.run(shutdown.clone()));
    assert!(
        eventually(Duration::from_secs(8), async || applied(db.conn())
            .await
            .len()
            == 3)
        .await,
        "not applied within 8 s (ack_wait is 30 s): {:?}",
        applied(db.conn()).await
    );
    let elapsed = started.elapsed();
    assert_in_order(&applied(db.conn()).await, 3);
    eprintln!("applied after {elapsed:?}");
    shutdown.cancel();
    let report = running.await.unwrap();
    assert_eq!(report.runners.acked, 3, "{report:?}");
    db.close().await;
    fixture.close().await;
}

/// A partitioned runner whose layout does not fit is refused with a clear error: another
/// partition count than the consumer's, a route without the event type suffix (NATS filters
/// `<prefix><p>.>`), a filter subject of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn build_partitioned_refuses_a_layout_that_does_not_fit() {
    let test = "build_partitioned_refuses_a_layout_that_does_not_fit";
    let Some(fixture) = Fixture::new(test).await else {
        return;
    };
    let db = TestDb::sqlite_file().await;
    let outbox = Outbox::default();
    consumer_tables(db.conn(), &outbox).await;
    let route = PartitionedRoute::new("orders.p", 4).with_event_type();
    let build = |route: PartitionedRoute, partitions: u32, filter: bool| {
        let (inbox, partitioned) = partitioned_consumer(db.conn(), &outbox, partitions, "x");
        let mut builder =
            NatsConsumerRunner::builder(fixture.client.clone(), inbox, fixture.stream.name());
        if filter {
            builder = builder.filter_subject("orders.>");
        }
        builder.build_partitioned(partitioned, route).map(|_| ())
    };
    let message = |result: Result<(), nats::NatsError>| match result {
        Err(nats::NatsError::Config(message)) => message,
        other => panic!("expected a configuration error, got {other:?}"),
    };
    assert!(build(route.clone(), 4, false).is_ok());
    assert!(message(build(route.clone(), 8, false)).contains("4 partitions"));
    assert!(
        message(build(PartitionedRoute::new("orders.p", 4), 4, false)).contains("with_event_type")
    );
    assert!(message(build(route.clone(), 4, true)).contains("filter subject"));
    db.close().await;
    fixture.close().await;
}

/// Issue 20, item 7: 1 000 orders of 100 customers, written on a `wal_level = logical`
/// PostgreSQL, published by the **log relay** to NATS JetStream, applied by the NATS runner
/// into a MariaDB inbox. Midway the log relay is killed (its task aborted: no final
/// acknowledgement) and a new one starts on the same slot: what was not acknowledged comes
/// again with the same ids. Every order is applied exactly once, in order per customer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_relay_end_to_end_through_nats_into_mariadb() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use outbox_seaorm::relay::log::LogRelay;
    const TEST: &str = "log_relay_end_to_end_through_nats_into_mariadb";
    const CUSTOMERS: usize = 100;
    const PER_CUSTOMER: u32 = 10;
    let total = CUSTOMERS * PER_CUSTOMER as usize;
    let Some(fixture) = Fixture::new(TEST).await else {
        return;
    };
    let Some(producer) = TestDb::logical_postgres(TEST).await else {
        return;
    };
    let Some(consumer_db) = TestDb::mariadb(TEST).await else {
        return;
    };
    let started = Instant::now();
    let outbox = Outbox::default();
    outbox_seaorm::schema::install(producer.conn(), &outbox)
        .await
        .unwrap();
    consumer_tables(consumer_db.conn(), &outbox).await;
    let shutdown = CancellationToken::new();
    let runner = fixture.runner(
        &fixture.client,
        inbox_consumer(consumer_db.conn(), &outbox, 5),
    );
    let running = tokio::spawn(runner.run(shutdown.clone()));
    let slot = format!("t_{}", uuid::Uuid::now_v7().simple());
    let log_relay = |instance: &str| {
        LogRelay::builder(
            producer.conn().clone(),
            outbox.clone(),
            fixture.publisher(&fixture.client),
        )
        .slot(&slot)
        .instance_id(instance)
        .lease_ttl(Duration::from_secs(2))
        .heartbeat_interval(Duration::from_millis(300))
        .build()
        .unwrap()
    };
    let relays = CancellationToken::new();
    let first = tokio::spawn(log_relay("log-relay-1").run(relays.clone()));
    // The slot must exist before the first order, or the backfill would publish it.
    assert!(
        eventually(Duration::from_secs(20), async || count(
            producer.conn(),
            &format!("SELECT COUNT(*)::bigint FROM pg_replication_slots WHERE slot_name = '{slot}' AND active")
        )
        .await
            == 1)
        .await,
        "the log relay did not start streaming"
    );
    let placed = Arc::new(AtomicUsize::new(0));
    let producing = tokio::spawn(e2e_orders::place_orders(
        producer.conn().clone(),
        outbox.clone(),
        CUSTOMERS,
        PER_CUSTOMER,
        placed.clone(),
    ));
    assert!(
        eventually(Duration::from_secs(60), async || placed
            .load(Ordering::SeqCst)
            >= total / 2)
        .await,
        "the producer is too slow"
    );
    first.abort();
    assert!(first.await.unwrap_err().is_cancelled());
    eprintln!(
        "  {:?}: log relay 1 killed at {} placed, {} applied",
        started.elapsed(),
        placed.load(Ordering::SeqCst),
        applied(consumer_db.conn()).await.len()
    );
    let second = tokio::spawn(log_relay("log-relay-2").run(relays.clone()));
    producing.await.unwrap();
    let all_applied = eventually(Duration::from_secs(60), async || {
        applied(consumer_db.conn()).await.len() >= total
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    shutdown.cancel();
    relays.cancel();
    let runner_report = running.await.unwrap();
    let relay_report = second.await.unwrap().unwrap();
    eprintln!("  runner: {runner_report:?}\n  log-relay-2: {relay_report:?}");
    let rows = applied(consumer_db.conn()).await;
    assert!(all_applied, "only {} of {total} orders applied", rows.len());
    assert_eq!(rows.len(), total, "every order applied exactly once");
    assert_in_order(&rows, PER_CUSTOMER);
    assert_eq!(
        e2e_orders::reserved(consumer_db.conn()).await,
        e2e_orders::expected_reserved(CUSTOMERS, PER_CUSTOMER),
        "stock counters exact"
    );
    assert_eq!(
        inbox_and_dead_letters(consumer_db.conn(), &outbox).await,
        (i64::try_from(total).unwrap(), 0)
    );
    assert_eq!(relay_report.dead_lettered, 0);
    eprintln!("{TEST}: {:?}", started.elapsed());
    consumer_db.close().await;
    producer.close().await;
    fixture.close().await;
}
