//! The Redis Streams adapter against the real server on 127.0.0.1:6379: the entries the
//! publisher appends (CloudEvents fields, `key`, `body`), duplicates (appended, absorbed by
//! the inbox), error classification (unreachable server, wrong key type, oversized entry,
//! reserved field names), the consumer runner (applies once and acknowledges, leaves
//! unsettled entries pending and rereads them in order, reconnects after a cut, claims a
//! dead consumer's entries), and the end-to-end scenario of issue 6.
//!
//! Every test uses stream keys of its own (`t<uuid>:…`) and deletes them. Connection cuts go
//! through [`Proxy`], never through the shared server.

#![allow(clippy::unwrap_used)]

mod e2e_orders;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use e2e_orders::{
    CONSUMER, applied, assert_in_order, closed_port, consumer_tables, eventually,
    inbox_and_dead_letters, inbox_consumer, order, partitioned_consumer,
    partitioned_kills_and_a_join, through_proxy, with_payload,
};
use outbox_brokers::redis::client::aio::ConnectionManager;
use outbox_brokers::redis::client::streams::StreamRangeReply;
use outbox_brokers::redis::{
    self, FIELD_BODY, FIELD_KEY, RedisConsumerRunner, RedisPartitionedRunner, RedisPublisher,
    connection_config,
};
use outbox_brokers::route::{PartitionedRoute, Route};
use outbox_core::cloudevents::{self, header};
use outbox_core::policy::Backoff;
use outbox_core::publish::{PublishErrorKind, Publisher as _};
use outbox_core::{Envelope, EnvelopeConfig};
use outbox_seaorm::Outbox;
use outbox_seaorm::inbox::Consumer;
use outbox_tests::db::TestDb;
use outbox_tests::proxy::Proxy;
use outbox_tests::{Service, service};
use sea_orm::{ConnectionTrait as _, TransactionTrait as _};
use tokio_util::sync::CancellationToken;

/// Stream keys of the test's own.
struct Fixture {
    client: redis::client::Client,
    connection: ConnectionManager,
    /// Key prefix (`t<uuid>:`); the default-style route gives `t<uuid>:brokertest.shop`.
    prefix: String,
}

impl Fixture {
    async fn new(test: &str) -> Option<Self> {
        let url = service(Service::Redis, test)?;
        let client = redis::open(&url).unwrap();
        let connection = redis::connection(&client).unwrap();
        Some(Self {
            client,
            connection,
            prefix: format!("t{}:", uuid::Uuid::now_v7().simple()),
        })
    }

    /// The stream every order goes to.
    fn stream(&self) -> String {
        format!("{}brokertest.shop", self.prefix)
    }

    fn publisher(&self, connection: ConnectionManager) -> RedisPublisher {
        RedisPublisher::builder(connection)
            .route(Route::context(self.prefix.clone()))
            .build()
    }

    fn runner(&self, client: redis::client::Client, inbox: Consumer) -> RedisConsumerRunner {
        RedisConsumerRunner::builder(client, inbox, self.stream())
            .consumer_name("test-runner")
            .block(Duration::from_millis(300))
            .claim_interval(Duration::ZERO)
            .redelivery_backoff(
                Backoff::new()
                    .with_min_delay(Duration::from_millis(200))
                    .with_max_delay(Duration::from_millis(500)),
            )
            .retry_backoff(
                Backoff::new()
                    .with_min_delay(Duration::from_millis(100))
                    .with_max_delay(Duration::from_secs(1)),
            )
            .build()
            .unwrap()
    }

    /// The entries of `key`, in order: id and fields.
    async fn entries(&self, key: &str) -> Vec<(String, BTreeMap<String, String>)> {
        let mut connection = self.connection.clone();
        let reply: StreamRangeReply = redis::client::cmd("XRANGE")
            .arg(key)
            .arg("-")
            .arg("+")
            .query_async(&mut connection)
            .await
            .unwrap();
        reply
            .ids
            .iter()
            .map(|entry| {
                let fields = entry
                    .map
                    .keys()
                    .map(|name| (name.clone(), entry.get::<String>(name).unwrap()))
                    .collect();
                (entry.id.clone(), fields)
            })
            .collect()
    }

    /// Pending entries of the group.
    async fn pending(&self) -> i64 {
        let mut connection = self.connection.clone();
        let reply: redis::client::Value = redis::client::cmd("XPENDING")
            .arg(self.stream())
            .arg(CONSUMER)
            .query_async(&mut connection)
            .await
            .unwrap();
        match reply {
            redis::client::Value::Array(items) => match items.first() {
                Some(redis::client::Value::Int(n)) => *n,
                other => panic!("unexpected XPENDING reply {other:?}"),
            },
            other => panic!("unexpected XPENDING reply {other:?}"),
        }
    }

    async fn close(self) {
        let mut connection = self.connection.clone();
        let keys: Vec<String> = redis::client::cmd("KEYS")
            .arg(format!("{}*", self.prefix))
            .query_async(&mut connection)
            .await
            .unwrap();
        for key in keys {
            let _: i64 = redis::client::cmd("DEL")
                .arg(key)
                .query_async(&mut connection)
                .await
                .unwrap();
        }
    }
}

/// Orders 0..2 of customers 0..2, interleaved as a relay batch would be.
fn batch() -> Vec<Envelope> {
    (0..2)
        .flat_map(|n| (0..3).map(move |customer| order(customer, n)))
        .collect()
}

fn ids(entries: &[(String, BTreeMap<String, String>)]) -> Vec<String> {
    entries
        .iter()
        .map(|(_, fields)| fields[header::ID].clone())
        .collect()
}

fn message_ids<'e>(envelopes: impl IntoIterator<Item = &'e Envelope>) -> Vec<String> {
    envelopes
        .into_iter()
        .map(|e| e.message_id.to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publishes_a_batch_as_stream_entries() {
    let Some(fixture) = Fixture::new("publishes_a_batch_as_stream_entries").await else {
        return;
    };
    let publisher = fixture.publisher(fixture.connection.clone());
    let batch = batch();
    let outcomes = publisher.publish(&batch).await.unwrap();
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");

    let entries = fixture.entries(&fixture.stream()).await;
    assert_eq!(
        ids(&entries),
        message_ids(&batch),
        "appended in batch order"
    );
    for ((_, fields), envelope) in entries.iter().zip(&batch) {
        assert_eq!(fields[FIELD_KEY], envelope.aggregate_id, "the key field");
        assert_eq!(fields[header::SUBJECT], envelope.aggregate_id);
        assert_eq!(fields[header::TYPE], envelope.event_type);
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&fields[FIELD_BODY]).unwrap(),
            envelope.payload
        );
        let headers = fields
            .iter()
            .filter(|(name, _)| *name != FIELD_KEY && *name != FIELD_BODY);
        let decoded = cloudevents::from_binary(
            headers.map(|(k, v)| (k.as_str(), v.as_bytes())),
            fields[FIELD_BODY].as_bytes(),
            &EnvelopeConfig::default(),
        )
        .unwrap();
        assert_eq!(&decoded, envelope, "the entry decodes to the envelope");
    }
    fixture.close().await;
}

/// Redis appends a republished message again; the runner delivers both copies and the
/// inbox applies it once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicates_are_appended_and_the_runner_applies_each_message_once() {
    let Some(fixture) =
        Fixture::new("duplicates_are_appended_and_the_runner_applies_each_message_once").await
    else {
        return;
    };
    let publisher = fixture.publisher(fixture.connection.clone());
    let batch = batch();
    for _ in 0..2 {
        assert!(
            publisher
                .publish(&batch)
                .await
                .unwrap()
                .iter()
                .all(Result::is_ok)
        );
    }
    let entries = fixture.entries(&fixture.stream()).await;
    assert_eq!(entries.len(), 12, "no broker-side deduplication");

    let db = TestDb::sqlite_file().await;
    let outbox = Outbox::default();
    consumer_tables(db.conn(), &outbox).await;
    let runner = fixture.runner(
        fixture.client.clone(),
        inbox_consumer(db.conn(), &outbox, 3),
    );
    assert_eq!(
        runner.group(),
        CONSUMER,
        "the group is named after the inbox consumer"
    );
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(runner.run(shutdown.clone()));
    assert!(
        eventually(Duration::from_secs(10), async || applied(db.conn())
            .await
            .len()
            >= 6)
        .await
    );
    assert!(
        eventually(Duration::from_secs(5), async || fixture.pending().await
            == 0)
        .await,
        "every entry acknowledged"
    );
    shutdown.cancel();
    let report = running.await.unwrap();
    assert_eq!(report.acked, 12, "{report:?}");
    assert_eq!(report.redelivered, 0);
    let rows = applied(db.conn()).await;
    assert_eq!(rows.len(), 6, "each message applied once");
    assert_in_order(&rows, 2);
    assert_eq!(inbox_and_dead_letters(db.conn(), &outbox).await, (6, 0));
    db.close().await;
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
    // Never reachable.
    let nowhere = redis::open(&format!("redis://127.0.0.1:{}", closed_port().await)).unwrap();
    let started = Instant::now();
    let error = fixture
        .publisher(redis::connection(&nowhere).unwrap())
        .publish(&batch())
        .await
        .unwrap_err();
    assert_eq!(error.kind(), PublishErrorKind::Unavailable, "{error}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );

    // Reachable, then cut: the batch fails transiently, no panic.
    let proxy = Proxy::start("127.0.0.1:6379").await.unwrap();
    let client = redis::open(&format!("redis://{}", proxy.addr())).unwrap();
    let connection = client
        .get_connection_manager_lazy(connection_config(Duration::from_secs(1)))
        .unwrap();
    let publisher = fixture.publisher(connection);
    let first = vec![order(0, 0)];
    assert!(publisher.publish(&first).await.unwrap()[0].is_ok());
    // Once the connection is closed: a batch sent while the proxy is still closing it can
    // get through (seen with RabbitMQ in CI).
    proxy.cut_and_wait().await;
    let during = vec![order(0, 1), order(0, 2), order(1, 0)];
    let started = Instant::now();
    let error = publisher.publish(&during).await.unwrap_err();
    assert!(error.is_transient(), "{error}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );

    // Back: the connection manager reconnects (the first command after the restore may still
    // fail, as a relay's next batch would) and the batch goes through.
    proxy.restore();
    assert!(
        eventually(Duration::from_secs(10), async || {
            publisher
                .publish(&during)
                .await
                .is_ok_and(|outcomes| outcomes.iter().all(Result::is_ok))
        })
        .await,
        "the publisher recovers"
    );
    let entries = fixture.entries(&fixture.stream()).await;
    let stored = ids(&entries);
    assert_eq!(stored[0], first[0].message_id.to_string());
    assert_eq!(
        stored[stored.len() - 3..],
        message_ids(&during)[..],
        "the batch is appended in order (after copies of it if a failed attempt appended any)"
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
    // Customer 0's first order goes to a key that holds a string: WRONGTYPE.
    let wrong_key = format!("{}not-a-stream", fixture.prefix);
    let mut connection = fixture.connection.clone();
    let _: () = redis::client::cmd("SET")
        .arg(&wrong_key)
        .arg("x")
        .query_async(&mut connection)
        .await
        .unwrap();
    let first = order(0, 0);
    let route = {
        let (stream, first_id, wrong_key) = (fixture.stream(), first.message_id, wrong_key.clone());
        Route::custom(move |e| {
            if e.message_id == first_id {
                wrong_key.clone()
            } else {
                stream.clone()
            }
        })
    };
    let publisher = RedisPublisher::builder(fixture.connection.clone())
        .route(route)
        .max_message_bytes(16 * 1024)
        .build();
    // Customer 1's first order is over the entry limit; customer 3's carries a header that
    // would collide with the `key` field.
    let big = with_payload(
        &order(1, 0),
        serde_json::json!({ "blob": "x".repeat(20_000) }),
    );
    let mut colliding = order(3, 0);
    colliding.headers.insert("Key".to_owned(), "x".to_owned());
    let batch = vec![
        first,
        big,
        order(2, 0),
        order(0, 1),
        order(1, 1),
        colliding,
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
            Some(PublishErrorKind::Rejected), // WRONGTYPE: permanent
            Some(PublishErrorKind::TooLarge),
            None,
            Some(PublishErrorKind::NotAttempted), // appended, but behind customer 0's failure
            Some(PublishErrorKind::NotAttempted), // not sent, behind customer 1's failure
            Some(PublishErrorKind::Rejected),     // header `Key`
            None,
        ],
        "{outcomes:?}"
    );
    let entries = fixture.entries(&fixture.stream()).await;
    assert_eq!(
        ids(&entries),
        message_ids([&batch[2], &batch[3], &batch[6]])
    );
    fixture.close().await;
}

/// The consumer's database is unreachable: the inbox cannot settle the entry, which stays
/// pending with everything after it; once the database is back the runner rereads its
/// pending entries and applies them, once each and in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_the_inbox_cannot_settle_stay_pending_and_are_applied_in_order() {
    const TEST: &str = "entries_the_inbox_cannot_settle_stay_pending_and_are_applied_in_order";
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

    let publisher = fixture.publisher(fixture.connection.clone());
    let batch = vec![order(0, 0), order(0, 1), order(1, 0), order(0, 2)];
    assert!(
        publisher
            .publish(&batch)
            .await
            .unwrap()
            .iter()
            .all(Result::is_ok)
    );
    let runner = fixture.runner(fixture.client.clone(), inbox_consumer(&through, &outbox, 2));
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(runner.run(shutdown.clone()));
    // One settle while the database is down: two attempts and the dead-letter insert,
    // each failing after the pool's 800 ms acquire timeout.
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    assert!(applied(db.conn()).await.is_empty());
    assert_eq!(fixture.pending().await, 4, "delivered, left pending");
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
    assert!(
        eventually(Duration::from_secs(5), async || fixture.pending().await
            == 0)
        .await
    );
    shutdown.cancel();
    let report = running.await.unwrap();
    eprintln!("  {report:?}");
    assert!(report.redelivered >= 1, "{report:?}");
    assert_eq!(report.acked, 4, "{report:?}");
    let rows = applied(db.conn()).await;
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
    let publisher = fixture.publisher(fixture.connection.clone());
    let proxy = Proxy::start("127.0.0.1:6379").await.unwrap();
    let client = redis::open(&format!("redis://{}", proxy.addr())).unwrap();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(
        fixture
            .runner(client, inbox_consumer(db.conn(), &outbox, 3))
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
        eventually(Duration::from_secs(15), async || applied(db.conn())
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
    assert!(report.broker_errors >= 1, "{report:?}");
    assert_in_order(&applied(db.conn()).await, 3);
    assert!(proxy.connections() >= 2, "the runner reconnected");
    db.close().await;
    fixture.close().await;
}

/// A consumer of the group read three entries and died without acknowledging them: a live
/// runner claims them once they have been idle long enough, and applies them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_consumers_entries_are_claimed_and_applied() {
    let Some(fixture) = Fixture::new("a_dead_consumers_entries_are_claimed_and_applied").await
    else {
        return;
    };
    let publisher = fixture.publisher(fixture.connection.clone());
    let batch = vec![order(0, 0), order(0, 1), order(1, 0)];
    assert!(
        publisher
            .publish(&batch)
            .await
            .unwrap()
            .iter()
            .all(Result::is_ok)
    );
    let mut connection = fixture.connection.clone();
    let _: () = redis::client::cmd("XGROUP")
        .arg("CREATE")
        .arg(fixture.stream())
        .arg(CONSUMER)
        .arg("0")
        .query_async(&mut connection)
        .await
        .unwrap();
    let _: redis::client::Value = redis::client::cmd("XREADGROUP")
        .arg("GROUP")
        .arg(CONSUMER)
        .arg("crashed-instance")
        .arg("STREAMS")
        .arg(fixture.stream())
        .arg(">")
        .query_async(&mut connection)
        .await
        .unwrap();
    assert_eq!(fixture.pending().await, 3);

    let db = TestDb::sqlite_file().await;
    let outbox = Outbox::default();
    consumer_tables(db.conn(), &outbox).await;
    let runner = RedisConsumerRunner::builder(
        fixture.client.clone(),
        inbox_consumer(db.conn(), &outbox, 3),
        fixture.stream(),
    )
    .consumer_name("live-instance")
    .block(Duration::from_millis(200))
    .claim_interval(Duration::from_millis(200))
    .claim_min_idle(Duration::from_millis(800))
    .redelivery_backoff(
        Backoff::new()
            .with_min_delay(Duration::from_millis(100))
            .with_max_delay(Duration::from_millis(300)),
    )
    .build()
    .unwrap();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(runner.run(shutdown.clone()));
    assert!(
        eventually(Duration::from_secs(10), async || applied(db.conn())
            .await
            .len()
            == 3)
        .await,
        "claimed and applied"
    );
    assert!(
        eventually(Duration::from_secs(5), async || fixture.pending().await
            == 0)
        .await
    );
    shutdown.cancel();
    let report = running.await.unwrap();
    assert_eq!(report.claimed, 3, "{report:?}");
    assert_eq!(report.acked, 3, "{report:?}");
    db.close().await;
    fixture.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runner_refuses_a_claim_idle_time_below_its_redelivery_backoff() {
    let db = TestDb::sqlite_file().await;
    let outbox = Outbox::default();
    consumer_tables(db.conn(), &outbox).await;
    let client = redis::open("redis://127.0.0.1:6379").unwrap();
    let error = RedisConsumerRunner::builder(client, inbox_consumer(db.conn(), &outbox, 3), "s")
        .claim_min_idle(Duration::from_secs(10))
        .build()
        .unwrap_err();
    assert!(
        error.to_string().contains("claim minimum idle time"),
        "{error}"
    );
    db.close().await;
}

/// Issue 6, item 4, on Redis Streams: 1 000 orders over 100 customers; midway Redis is cut
/// for 2 s (publisher and runner connections alike) and the relay task is replaced. Order
/// holds per customer: one stream per context, one runner (one consumer name) in the group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn end_to_end_through_redis_with_a_cut_and_a_relay_restart() {
    const TEST: &str = "end_to_end_through_redis_with_a_cut_and_a_relay_restart";
    let Some(fixture) = Fixture::new(TEST).await else {
        return;
    };
    let proxy = Proxy::start("127.0.0.1:6379").await.unwrap();
    let client = redis::open(&format!("redis://{}", proxy.addr())).unwrap();
    let fixture_ref = &fixture;
    let publisher_client = client.clone();
    e2e_orders::end_to_end(
        TEST,
        &proxy,
        100,
        10,
        async || {
            let connection = publisher_client
                .get_connection_manager_lazy(connection_config(Duration::from_secs(1)))
                .unwrap();
            fixture_ref.publisher(connection)
        },
        |inbox, shutdown| {
            let runner = RedisConsumerRunner::builder(client, inbox, fixture.stream())
                .consumer_name("e2e-runner")
                .block(Duration::from_millis(500))
                .redelivery_backoff(
                    Backoff::new()
                        .with_min_delay(Duration::from_millis(200))
                        .with_max_delay(Duration::from_secs(1)),
                )
                .retry_backoff(
                    Backoff::new()
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
    let publisher = fixture.publisher(fixture.connection.clone());
    let report = e2e_orders::a_requeued_dead_letter_is_redelivered(
        db.conn(),
        &outbox,
        &publisher,
        |consumer, shutdown| {
            tokio::spawn(
                fixture
                    .runner(fixture.client.clone(), consumer)
                    .run(shutdown),
            )
        },
    )
    .await;
    assert_eq!(report.acked, 1, "{report:?}");
    db.close().await;
    fixture.close().await;
}

/// Issue 15 item 10 on a consumer database of `db`'s kind, through the Redis runner.
async fn a_dead_letter_holds_its_aggregate(db: Option<TestDb>, test: &str) {
    let Some(fixture) = Fixture::new(test).await else {
        return;
    };
    let Some(db) = db else {
        return;
    };
    let outbox = Outbox::default();
    let publisher = fixture.publisher(fixture.connection.clone());
    e2e_orders::a_dead_letter_holds_its_aggregate_across_a_crash(
        db.conn(),
        &outbox,
        &publisher,
        |consumer, shutdown| {
            tokio::spawn(
                fixture
                    .runner(fixture.client.clone(), consumer)
                    .run(shutdown),
            )
        },
    )
    .await;
    db.close().await;
    fixture.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_holds_its_aggregate_across_a_crash_postgres() {
    let test = "a_dead_letter_holds_its_aggregate_across_a_crash_postgres";
    a_dead_letter_holds_its_aggregate(TestDb::postgres(test).await, test).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_holds_its_aggregate_across_a_crash_mariadb() {
    let test = "a_dead_letter_holds_its_aggregate_across_a_crash_mariadb";
    a_dead_letter_holds_its_aggregate(TestDb::mariadb(test).await, test).await;
}

/// Issue 15 item 1 end to end: a 20 MiB message (a payload of 10 Mi `"` characters, escaped)
/// reaches a MariaDB consumer through the Redis runner. It is over the payload limit and over
/// MariaDB's `max_allowed_packet`: it is dead-lettered bounded and acknowledged, and the next
/// message applies — no poison message stalls the stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_message_is_dead_lettered_and_the_next_one_applies() {
    const TEST: &str = "an_oversized_message_is_dead_lettered_and_the_next_one_applies";
    let Some(fixture) = Fixture::new(TEST).await else {
        return;
    };
    let Some(db) = TestDb::mariadb(TEST).await else {
        return;
    };
    let outbox = Outbox::default();
    consumer_tables(db.conn(), &outbox).await;
    let mut oversized = order(5, 0);
    oversized.payload = serde_json::json!("\"".repeat(10 * 1024 * 1024)).into();
    assert!(oversized.payload.len() > 20 * 1024 * 1024);
    // A producer of another team, whose publisher allows large entries.
    let publisher = RedisPublisher::builder(fixture.connection.clone())
        .route(Route::context(fixture.prefix.clone()))
        .max_message_bytes(64 * 1024 * 1024)
        .build();
    let outcomes = publisher
        .publish(&[oversized.clone(), order(1, 0)])
        .await
        .unwrap();
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");

    let runner = fixture.runner(
        fixture.client.clone(),
        inbox_consumer(db.conn(), &outbox, 2),
    );
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(runner.run(shutdown.clone()));
    assert!(
        eventually(Duration::from_secs(30), async || applied(db.conn())
            .await
            .len()
            == 1)
        .await,
        "the next message applies"
    );
    assert!(
        eventually(Duration::from_secs(5), async || fixture.pending().await
            == 0)
        .await,
        "both acknowledged"
    );
    shutdown.cancel();
    let report = running.await.unwrap();
    assert_eq!((report.acked, report.redelivered), (2, 0), "{report:?}");
    let ops = outbox_seaorm::ops::Operations::new(db.conn().clone(), outbox.clone());
    let letters = ops.consumer_dead_letters(None, None, 10).await.unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].message_id, Some(oversized.message_id));
    assert_eq!(letters[0].reason, "malformed");
    let outbox_seaorm::inbox::dead_letter::StoredMessage::Binary(raw) = &letters[0].message else {
        panic!("stored as binary: {:?}", letters[0].message);
    };
    assert!(raw.truncated);
    assert_eq!(raw.body_bytes, oversized.payload.len() as u64);
    assert_eq!(applied(db.conn()).await[0].customer_id, "customer-001");
    db.close().await;
    fixture.close().await;
}

/// Three processes of one consumer share six partitions (one stream each, read under the
/// partition's consumer name), one killed and replaced three times, a fourth joining:
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
    let stream = format!("{}p", fixture.prefix);
    let route = PartitionedRoute::new(stream.clone(), 6);
    let publisher = RedisPublisher::builder(fixture.connection.clone())
        .route(Route::partitioned(route.clone()))
        .build();
    let shutdown = CancellationToken::new();
    partitioned_kills_and_a_join(db.conn(), &outbox, publisher, &shutdown, |id| {
        let (inbox, partitioned) = partitioned_consumer(db.conn(), &outbox, 6, id);
        let runner = RedisConsumerRunner::builder(fixture.client.clone(), inbox, stream.clone())
            .block(Duration::from_millis(300))
            .redelivery_backoff(
                Backoff::new()
                    .with_min_delay(Duration::from_millis(200))
                    .with_max_delay(Duration::from_millis(500)),
            )
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

/// A predecessor paused past its lease, resuming, can take an entry from the partition's
/// stream under the partition's consumer name while the new owner works (here: while its
/// handler waits on a row lock). The new owner settles from the pending list, in id order:
/// that entry before the one after it, not skipped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_runner_settles_what_a_resumed_predecessor_took_in_order() {
    let test = "a_partition_runner_settles_what_a_resumed_predecessor_took_in_order";
    let Some(fixture) = Fixture::new(test).await else {
        return;
    };
    let Some(db) = TestDb::postgres(test).await else {
        return;
    };
    let outbox = Outbox::default();
    consumer_tables(db.conn(), &outbox).await;
    let stream = format!("{}p", fixture.prefix);
    let route = PartitionedRoute::new(stream.clone(), 1);
    let publisher = RedisPublisher::builder(fixture.connection.clone())
        .route(Route::partitioned(route.clone()))
        .build();
    let (inbox, partitioned) = partitioned_consumer(db.conn(), &outbox, 1, "owner");
    let runner = RedisConsumerRunner::builder(fixture.client.clone(), inbox, stream.clone())
        .block(Duration::from_millis(200))
        .build_partitioned(partitioned, route)
        .unwrap();
    let partition_stream = runner.stream(0);
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(runner.run(shutdown.clone()));

    // The owner's handler of order 0 waits on its stock row.
    let first = e2e_orders::order_event(0, 0);
    let blocker = db.conn().begin().await.unwrap();
    blocker
        .execute_unprepared(&format!(
            "SELECT * FROM stock WHERE book_id = '{}' FOR UPDATE",
            first.book_id
        ))
        .await
        .unwrap();
    assert!(publisher.publish(&[order(0, 0)]).await.unwrap()[0].is_ok());
    let mut connection = fixture.connection.clone();
    let pending_of = async |connection: &mut ConnectionManager| -> i64 {
        // Until the owner's runner has created the group, nothing is pending.
        let reply: redis::client::Value = redis::client::cmd("XPENDING")
            .arg(&partition_stream)
            .arg(CONSUMER)
            .query_async(connection)
            .await
            .unwrap_or(redis::client::Value::Nil);
        match reply {
            redis::client::Value::Array(items) => match items.first() {
                Some(redis::client::Value::Int(n)) => *n,
                _ => 0,
            },
            _ => 0,
        }
    };
    let mut waited = 0;
    while pending_of(&mut connection).await < 1 {
        waited += 1;
        assert!(waited < 100, "the owner never read order 0");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The resumed predecessor takes order 1 under the partition's consumer name.
    assert!(publisher.publish(&[order(0, 1)]).await.unwrap()[0].is_ok());
    let taken: redis::client::Value = redis::client::cmd("XREADGROUP")
        .arg("GROUP")
        .arg(CONSUMER)
        .arg(RedisPartitionedRunner::consumer_name(0))
        .arg("COUNT")
        .arg(1)
        .arg("STREAMS")
        .arg(&partition_stream)
        .arg(">")
        .query_async(&mut connection)
        .await
        .unwrap();
    assert!(
        !matches!(taken, redis::client::Value::Nil),
        "the predecessor took order 1"
    );
    assert!(publisher.publish(&[order(0, 2)]).await.unwrap()[0].is_ok());
    blocker.commit().await.unwrap();

    assert!(
        eventually(Duration::from_secs(10), async || applied(db.conn())
            .await
            .len()
            >= 3)
        .await,
        "applied: {:?}",
        applied(db.conn()).await
    );
    assert_in_order(&applied(db.conn()).await, 3);
    shutdown.cancel();
    running.await.unwrap();
    db.close().await;
    fixture.close().await;
}
