//! The Kafka adapter against a real Kafka-wire broker (`tansu`, memory storage, on a
//! loopback port; see `outbox_tests::tansu`): the publisher's records read back raw, error
//! classes, an unreachable broker, the consumer runner (apply once, redelivery, reconnect)
//! and the end-to-end scenario of issue 6.
//!
//! Every test creates topics (and consumer groups) of its own, named with a UUID.

#![allow(clippy::unwrap_used)]

mod e2e_orders;

use std::collections::{BTreeMap, HashMap};
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

use outbox_brokers::kafka::rdkafka::consumer::{Consumer as _, StreamConsumer};
use outbox_brokers::kafka::rdkafka::message::{Headers as _, Message as _};
use outbox_brokers::kafka::rdkafka::{ClientConfig, Offset, TopicPartitionList};
use outbox_brokers::kafka::{KafkaConsumerRunner, KafkaPublisher};
use outbox_brokers::route::Route;
use outbox_core::Raise as _;
use outbox_core::cloudevents::header;
use outbox_core::mapping::{ContractMapper, ContractSink, MapError};
use outbox_core::policy::Backoff;
use outbox_core::publish::{PublishErrorKind, Publisher as _};
use outbox_core::{Envelope, IntegrationEvent};
use outbox_seaorm::inbox::Consumer;
use outbox_seaorm::relay::Relay;
use outbox_seaorm::{Outbox, UnitOfWork, inbox_handler, schema};
use outbox_tests::db::{Backend, TestDb};
use outbox_tests::tansu::Tansu;
use schemars::JsonSchema;
use sea_orm::{ConnectionTrait, DbErr};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

// ---------------------------------------------------------------------------------------
// Contract, handlers, helpers
// ---------------------------------------------------------------------------------------

/// Contract of these tests: a customer (the aggregate) placed their `n`-th order.
#[derive(Debug, Clone, PartialEq, Eq, IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "kafkatest.ordering.order-placed.v1", key = customer_id)]
struct OrderPlacedV1 {
    /// The customer.
    customer_id: String,
    /// The customer's order number, from 1.
    n: u32,
    /// The book.
    book: String,
    /// Copies.
    quantity: u32,
}

fn order(customer: &str, n: u32) -> Envelope {
    Envelope::from_event(&OrderPlacedV1 {
        customer_id: customer.to_owned(),
        n,
        book: format!("book-{}", n % 3),
        quantity: 1 + n % 2,
    })
    .unwrap()
}

/// tansu 0.6 serves a fetch only from record batches whose *base* offset is at or after
/// the fetch offset: a consumer positioned inside a batch (after a seek back to an unsettled
/// message, or resuming at a committed offset within a batch) gets the next batch, and the
/// rest of its batch is skipped. (Kafka returns the batch holding the offset.) Tests that
/// position a consumer inside what would be a batch produce one record per batch.
const TANSU_ONE_RECORD_PER_BATCH: &str = "1";

fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", Uuid::now_v7().simple())
}

/// A route sending this test's messages to a topic of its own: `<prefix>kafkatest.ordering`.
fn topic_of(prefix: &str) -> String {
    format!("{prefix}kafkatest.ordering")
}

// ---------------------------------------------------------------------------------------
// The consumer side: handlers that record what they apply, failure knobs, tables
// ---------------------------------------------------------------------------------------

/// Handler calls by message id, and messages whose handler must fail.
static CALLS: LazyLock<Mutex<HashMap<Uuid, u32>>> = LazyLock::new(Default::default);
static FAILING: LazyLock<Mutex<Vec<Uuid>>> = LazyLock::new(Default::default);

fn calls(id: Uuid) -> u32 {
    CALLS.lock().unwrap().get(&id).copied().unwrap_or(0)
}

/// Reserves the copies and records `(customer, n)` in `applied`, in the inbox transaction.
async fn apply(uow: &UnitOfWork, event: &OrderPlacedV1, envelope: &Envelope) -> Result<(), DbErr> {
    *CALLS
        .lock()
        .unwrap()
        .entry(envelope.message_id)
        .or_default() += 1;
    if FAILING.lock().unwrap().contains(&envelope.message_id) {
        return Err(DbErr::Custom(format!(
            "induced failure of {}",
            envelope.message_id
        )));
    }
    let backend = uow.get_database_backend();
    uow.execute_raw(sea_orm::Statement::from_sql_and_values(
        backend,
        "UPDATE stock SET reserved = reserved + ? WHERE book_id = ?",
        [i64::from(event.quantity).into(), event.book.clone().into()],
    ))
    .await?;
    uow.execute_raw(sea_orm::Statement::from_sql_and_values(
        backend,
        "INSERT INTO applied (customer, n) VALUES (?, ?)",
        [event.customer_id.clone().into(), i64::from(event.n).into()],
    ))
    .await?;
    Ok(())
}

#[inbox_handler(consumer = "kafkatest.runner")]
async fn reserve_runner(
    uow: &UnitOfWork,
    event: OrderPlacedV1,
    envelope: &Envelope,
) -> Result<(), DbErr> {
    apply(uow, &event, envelope).await
}

#[inbox_handler(consumer = "kafkatest.redelivery")]
async fn reserve_redelivery(
    uow: &UnitOfWork,
    event: OrderPlacedV1,
    envelope: &Envelope,
) -> Result<(), DbErr> {
    apply(uow, &event, envelope).await
}

#[inbox_handler(consumer = "kafkatest.reconnect")]
async fn reserve_reconnect(
    uow: &UnitOfWork,
    event: OrderPlacedV1,
    envelope: &Envelope,
) -> Result<(), DbErr> {
    apply(uow, &event, envelope).await
}

#[inbox_handler(consumer = "kafkatest.end-to-end")]
async fn reserve_end_to_end(
    uow: &UnitOfWork,
    event: OrderPlacedV1,
    envelope: &Envelope,
) -> Result<(), DbErr> {
    apply(uow, &event, envelope).await
}

const BOOKS: [&str; 3] = ["book-0", "book-1", "book-2"];

/// Outbox and inbox tables, `stock` (every book, 0 reserved) and `applied`.
async fn consumer_tables(db: &TestDb, outbox: &Outbox) {
    schema::install(db.conn(), outbox).await.unwrap();
    let autoincrement = match db.backend() {
        Backend::MariaDb => "BIGINT AUTO_INCREMENT PRIMARY KEY",
        Backend::Postgres => "BIGSERIAL PRIMARY KEY",
        _ => "INTEGER PRIMARY KEY AUTOINCREMENT",
    };
    db.conn()
        .execute_unprepared(&format!(
            "CREATE TABLE applied (id {autoincrement}, customer VARCHAR(64) NOT NULL, n INTEGER NOT NULL)"
        ))
        .await
        .unwrap();
    db.conn()
        .execute_unprepared(
            "CREATE TABLE stock (book_id VARCHAR(64) NOT NULL PRIMARY KEY, reserved INTEGER NOT NULL)",
        )
        .await
        .unwrap();
    for book in BOOKS {
        db.conn()
            .execute_unprepared(&format!("INSERT INTO stock VALUES ('{book}', 0)"))
            .await
            .unwrap();
    }
}

/// `(customer, n)` as applied, in application order.
async fn applied(db: &TestDb) -> Vec<(String, u32)> {
    db.conn()
        .query_all_raw(sea_orm::Statement::from_string(
            db.conn().get_database_backend(),
            "SELECT customer, n FROM applied ORDER BY id",
        ))
        .await
        .unwrap()
        .iter()
        .map(|row| {
            let n: i64 = row.try_get("", "n").unwrap();
            (
                row.try_get("", "customer").unwrap(),
                u32::try_from(n).unwrap(),
            )
        })
        .collect()
}

async fn count(db: &TestDb, sql: &str) -> i64 {
    let row = db
        .conn()
        .query_one_raw(sea_orm::Statement::from_string(
            db.conn().get_database_backend(),
            sql,
        ))
        .await
        .unwrap()
        .unwrap();
    row.try_get_by_index::<i64>(0).unwrap()
}

/// Reserved copies per book.
async fn reserved(db: &TestDb) -> BTreeMap<String, i64> {
    db.conn()
        .query_all_raw(sea_orm::Statement::from_string(
            db.conn().get_database_backend(),
            "SELECT book_id, reserved FROM stock",
        ))
        .await
        .unwrap()
        .iter()
        .map(|row| {
            (
                row.try_get("", "book_id").unwrap(),
                row.try_get::<i64>("", "reserved").unwrap(),
            )
        })
        .collect()
}

/// What `envelopes` should have reserved.
fn expected_reserved(envelopes: &[Envelope]) -> BTreeMap<String, i64> {
    let mut expected: BTreeMap<String, i64> = BOOKS.iter().map(|b| ((*b).to_owned(), 0)).collect();
    for envelope in envelopes {
        let event: OrderPlacedV1 = envelope.decode().unwrap();
        *expected.get_mut(&event.book).unwrap() += i64::from(event.quantity);
    }
    expected
}

/// Asserts that every customer's orders were applied in increasing `n`.
fn assert_order_per_customer(applied: &[(String, u32)]) {
    let mut last: HashMap<&str, u32> = HashMap::new();
    for (customer, n) in applied {
        if let Some(previous) = last.insert(customer, *n) {
            assert!(
                *n > previous,
                "{customer}: order {n} applied after {previous}: {applied:?}"
            );
        }
    }
}

/// Waits until `applied` has `rows` rows, or panics after `timeout`.
async fn wait_applied(db: &TestDb, rows: usize, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        let now = applied(db).await.len();
        if now >= rows {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{now} of {rows} messages applied after {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A consumer with fast retries.
fn consumer(db: &TestDb, outbox: &Outbox, name: &str, max_attempts: u32) -> Consumer {
    Consumer::builder(db.conn().clone(), outbox.clone(), name)
        .max_attempts(max_attempts)
        .backoff(
            Backoff::new()
                .with_min_delay(Duration::from_millis(5))
                .with_max_delay(Duration::from_millis(50)),
        )
        .build()
        .unwrap()
}

/// The committed offsets of `group` on `topic`, summed over its partitions.
async fn committed_total(bootstrap: &str, group: &str, topic: &str, partitions: i32) -> i64 {
    let client: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut list = TopicPartitionList::new();
    for partition in 0..partitions {
        list.add_partition(topic, partition);
    }
    let committed = tokio::task::spawn_blocking(move || {
        client.committed_offsets(list, Duration::from_secs(10))
    })
    .await
    .unwrap()
    .unwrap();
    committed
        .elements()
        .iter()
        .map(|e| match e.offset() {
            Offset::Offset(o) => o,
            _ => 0,
        })
        .sum()
}

/// A record as read back from the topic.
#[derive(Debug)]
struct Raw {
    partition: i32,
    offset: i64,
    key: Option<String>,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Raw {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Reads `count` records of `topic` from the beginning (a fresh group), or fewer at
/// `timeout`.
async fn read_raw(bootstrap: &str, topic: &str, count: usize, timeout: Duration) -> Vec<Raw> {
    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", unique("raw-reader"))
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    consumer.subscribe(&[topic]).unwrap();
    let deadline = Instant::now() + timeout;
    let mut records = Vec::new();
    while records.len() < count {
        let Ok(received) = tokio::time::timeout_at(deadline.into(), consumer.recv()).await else {
            break;
        };
        let Ok(message) = received else { continue };
        records.push(Raw {
            partition: message.partition(),
            offset: message.offset(),
            key: message
                .key()
                .map(|k| String::from_utf8_lossy(k).into_owned()),
            headers: message
                .headers()
                .map(|hs| {
                    hs.iter()
                        .map(|h| {
                            (
                                h.key.to_owned(),
                                String::from_utf8_lossy(h.value.unwrap_or_default()).into_owned(),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default(),
            body: message.payload().unwrap_or_default().to_vec(),
        });
    }
    records
}

// ---------------------------------------------------------------------------------------
// Publisher
// ---------------------------------------------------------------------------------------

/// A pipelined batch over two aggregates: every record carries the CloudEvents headers
/// (`ce-id` = message id), key = aggregate id, lands in the context's topic, and an
/// aggregate's records share a partition in `seq` order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_batch_and_read_back_raw() {
    let Some(tansu) = Tansu::shared("publish_batch_and_read_back_raw").await else {
        return;
    };
    let prefix = format!("{}.", unique("t"));
    let topic = topic_of(&prefix);
    tansu.create_topic(&topic, 3).await;
    let publisher = KafkaPublisher::builder(tansu.bootstrap())
        .route(Route::context(prefix.as_str()))
        .build()
        .unwrap();
    let batch: Vec<Envelope> = (1..=5)
        .flat_map(|n| [order("ada", n), order("alan", n)])
        .collect();
    let started = Instant::now();
    let outcomes = publisher.publish(&batch).await.unwrap();
    eprintln!(
        "  10 messages published (pipelined) in {:?}",
        started.elapsed()
    );
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");

    let records = read_raw(&tansu.bootstrap(), &topic, 10, Duration::from_secs(20)).await;
    assert_eq!(records.len(), 10);
    let by_id: HashMap<String, &Raw> = records
        .iter()
        .map(|r| (r.header(header::ID).unwrap().to_owned(), r))
        .collect();
    for envelope in &batch {
        let record = by_id[&envelope.message_id.to_string()];
        assert_eq!(record.key.as_deref(), Some(envelope.aggregate_id.as_str()));
        assert_eq!(
            record.header(header::TYPE),
            Some("kafkatest.ordering.order-placed.v1")
        );
        assert_eq!(
            record.header(header::SUBJECT),
            Some(envelope.aggregate_id.as_str())
        );
        assert_eq!(
            record.header(header::CONTENT_TYPE),
            Some("application/json")
        );
        assert_eq!(record.header(header::SPEC_VERSION), Some("1.0"));
        let body: serde_json::Value = serde_json::from_slice(&record.body).unwrap();
        assert_eq!(body, envelope.payload);
    }
    // Per aggregate: one partition, offsets in `seq` (n) order.
    for customer in ["ada", "alan"] {
        let mut mine: Vec<&Raw> = records
            .iter()
            .filter(|r| r.key.as_deref() == Some(customer))
            .collect();
        mine.sort_by_key(|r| r.offset);
        let partitions: Vec<i32> = mine.iter().map(|r| r.partition).collect();
        assert!(
            partitions.windows(2).all(|w| w[0] == w[1]),
            "{partitions:?}"
        );
        let ns: Vec<u64> = mine
            .iter()
            .map(|r| {
                serde_json::from_slice::<serde_json::Value>(&r.body).unwrap()["n"]
                    .as_u64()
                    .unwrap()
            })
            .collect();
        assert_eq!(ns, [1, 2, 3, 4, 5], "{customer}'s records in order");
    }
    tansu.delete_topic(&topic).await;
}

/// Errors found before sending are permanent and stop their aggregate: a message over
/// `message.max.bytes` is `too large` (the aggregate's next message `not attempted`, other
/// aggregates go on); a topic name Kafka does not allow is `rejected`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_large_and_invalid_topic_are_permanent() {
    let Some(tansu) = Tansu::shared("too_large_and_invalid_topic_are_permanent").await else {
        return;
    };
    let prefix = format!("{}.", unique("t"));
    let topic = topic_of(&prefix);
    tansu.create_topic(&topic, 1).await;
    let publisher = KafkaPublisher::builder(tansu.bootstrap())
        .route(Route::context(prefix.as_str()))
        .set("message.max.bytes", "4000")
        .build()
        .unwrap();
    let big = Envelope::from_event(&OrderPlacedV1 {
        customer_id: "ada".to_owned(),
        n: 1,
        book: "x".repeat(8_000),
        quantity: 1,
    })
    .unwrap();
    let batch = [big, order("alan", 1), order("ada", 2), order("alan", 2)];
    let outcomes = publisher.publish(&batch).await.unwrap();
    let kinds: Vec<Option<PublishErrorKind>> = outcomes
        .iter()
        .map(|o| o.as_ref().err().map(|e| e.kind()))
        .collect();
    eprintln!("  too large: {:?}", outcomes[0]);
    assert_eq!(
        kinds,
        [
            Some(PublishErrorKind::TooLarge),
            None,
            Some(PublishErrorKind::NotAttempted),
            None
        ]
    );
    assert!(outcomes[0].as_ref().unwrap_err().is_permanent());

    let invalid = KafkaPublisher::builder(tansu.bootstrap())
        .route(Route::fixed("orders placed!"))
        .build()
        .unwrap();
    let outcomes = invalid.publish(&[order("ada", 1)]).await.unwrap();
    eprintln!("  invalid topic: {:?}", outcomes[0]);
    let error = outcomes[0].as_ref().unwrap_err();
    assert_eq!(error.kind(), PublishErrorKind::Rejected);
    tansu.delete_topic(&topic).await;
}

/// With the broker unreachable (proxy cut), a batch fails as transient `timeout`s after the
/// delivery timeout, without a panic; once the broker is back the same publisher goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_broker_is_transient() {
    let Some(tansu) = Tansu::behind_proxy("unreachable_broker_is_transient").await else {
        return;
    };
    let proxy = tansu.proxy().unwrap();
    let prefix = format!("{}.", unique("t"));
    let topic = topic_of(&prefix);
    tansu.create_topic(&topic, 1).await;
    let publisher = KafkaPublisher::builder(tansu.bootstrap())
        .route(Route::context(prefix.as_str()))
        .delivery_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let outcomes = publisher.publish(&[order("ada", 1)]).await.unwrap();
    assert!(outcomes[0].is_ok(), "{outcomes:?}");

    // Once the connection is closed: a batch sent while the proxy is still closing it can
    // get through (seen with RabbitMQ in CI).
    proxy.cut_and_wait().await;
    let started = Instant::now();
    let outcomes = publisher
        .publish(&[order("ada", 2), order("ada", 3), order("alan", 1)])
        .await
        .unwrap();
    eprintln!("  broker cut: {outcomes:?} after {:?}", started.elapsed());
    assert!(started.elapsed() < Duration::from_secs(6));
    assert!(
        outcomes
            .iter()
            .all(|o| o.as_ref().unwrap_err().is_transient())
    );
    assert_eq!(
        outcomes[0].as_ref().unwrap_err().kind(),
        PublishErrorKind::Timeout
    );

    proxy.restore();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let outcomes = publisher
            .publish(&[order("ada", 2), order("ada", 3)])
            .await
            .unwrap();
        if outcomes.iter().all(Result::is_ok) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still failing after restore: {outcomes:?}"
        );
    }
    eprintln!("  published again after the restore");
}

/// The runner applies every message once (a message published twice, with the same id, is
/// a duplicate the inbox skips), in order per aggregate, and commits the offsets of what it
/// settled: a new runner of the group starts after them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runner_applies_once_in_order_and_commits() {
    let Some(tansu) = Tansu::shared("runner_applies_once_in_order_and_commits").await else {
        return;
    };
    let prefix = format!("{}.", unique("t"));
    let topic = topic_of(&prefix);
    tansu.create_topic(&topic, 3).await;
    let db = TestDb::sqlite_file().await;
    let outbox = Outbox::default();
    consumer_tables(&db, &outbox).await;
    let publisher = KafkaPublisher::builder(tansu.bootstrap())
        .route(Route::context(prefix.as_str()))
        .build()
        .unwrap();
    let mut envelopes: Vec<Envelope> = (1..=10)
        .flat_map(|n| [order("ada", n), order("alan", n), order("grace", n)])
        .collect();
    let outcomes = publisher.publish(&envelopes).await.unwrap();
    assert!(outcomes.iter().all(Result::is_ok));
    // The same message again (a relay retry after a lost acknowledgement).
    let again = envelopes[4].clone();
    assert!(
        publisher
            .publish(std::slice::from_ref(&again))
            .await
            .unwrap()[0]
            .is_ok()
    );
    let raw = read_raw(&tansu.bootstrap(), &topic, 31, Duration::from_secs(20)).await;
    let same_id = raw
        .iter()
        .filter(|r| r.header(header::ID) == Some(again.message_id.to_string().as_str()))
        .count();
    assert_eq!(
        same_id, 2,
        "Kafka keeps both records: the id is the inbox's to dedup"
    );

    let group = unique("kafkatest-group");
    let shutdown = CancellationToken::new();
    let runner = KafkaConsumerRunner::builder(
        tansu.bootstrap(),
        [topic.clone()],
        consumer(&db, &outbox, "kafkatest.runner", 5),
    )
    .group_id(group.as_str())
    .build()
    .unwrap();
    let running = tokio::spawn(runner.run(shutdown.clone()));
    wait_applied(&db, 30, Duration::from_secs(30)).await;
    // The duplicate is the last record of its partition: wait for its offset to be
    // committed too.
    let deadline = Instant::now() + Duration::from_secs(20);
    while committed_total(&tansu.bootstrap(), &group, &topic, 3).await < 31 {
        assert!(Instant::now() < deadline, "offsets not committed");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    shutdown.cancel();
    running.await.unwrap().unwrap();
    assert_eq!(
        calls(again.message_id),
        1,
        "the duplicate did not reach the handler"
    );
    let done = applied(&db).await;
    assert_eq!(done.len(), 30);
    assert_order_per_customer(&done);
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM inbox").await,
        30,
        "one inbox row per message id"
    );
    assert_eq!(reserved(&db).await, expected_reserved(&envelopes));

    // A new runner of the group resumes after the committed offsets: only the new message.
    let late = order("ada", 11);
    assert!(
        publisher
            .publish(std::slice::from_ref(&late))
            .await
            .unwrap()[0]
            .is_ok()
    );
    envelopes.push(late);
    let shutdown = CancellationToken::new();
    let runner = KafkaConsumerRunner::builder(
        tansu.bootstrap(),
        [topic.clone()],
        consumer(&db, &outbox, "kafkatest.runner", 5),
    )
    .group_id(group.as_str())
    .build()
    .unwrap();
    let running = tokio::spawn(runner.run(shutdown.clone()));
    wait_applied(&db, 31, Duration::from_secs(30)).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while committed_total(&tansu.bootstrap(), &group, &topic, 3).await < 32 {
        assert!(Instant::now() < deadline, "offsets not committed");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    shutdown.cancel();
    running.await.unwrap().unwrap();
    assert_eq!(
        committed_total(&tansu.bootstrap(), &group, &topic, 3).await,
        32
    );
    for envelope in &envelopes[..30] {
        assert_eq!(
            calls(envelope.message_id),
            1,
            "nothing delivered twice to the handler"
        );
    }
    assert_eq!(reserved(&db).await, expected_reserved(&envelopes));
    db.close().await;
    tansu.delete_topic(&topic).await;
}

/// A message the inbox cannot settle (the handler fails and so does the dead-letter insert:
/// a trigger refuses it) is not committed: the runner seeks back to it and consumes it again
/// until it settles, and nothing after it in its partition is applied first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsettled_message_is_redelivered_in_order() {
    let Some(tansu) = Tansu::shared("unsettled_message_is_redelivered_in_order").await else {
        return;
    };
    let prefix = format!("{}.", unique("t"));
    let topic = topic_of(&prefix);
    tansu.create_topic(&topic, 1).await;
    let db = TestDb::sqlite_file().await;
    let outbox = Outbox::default();
    consumer_tables(&db, &outbox).await;
    let dead_letters = outbox_seaorm::inbox::dead_letter::table(&outbox).to_string();
    // The table stays readable (the consumer reads which aggregates its dead letters hold).
    db.conn()
        .execute_unprepared(&format!(
            "CREATE TRIGGER refuse_dead_letters BEFORE INSERT ON {dead_letters} \
             BEGIN SELECT RAISE(ABORT, 'dead letters refused'); END"
        ))
        .await
        .unwrap();
    let envelopes: Vec<Envelope> = (1..=5).map(|n| order("ada", n)).collect();
    let poisoned = envelopes[1].message_id;
    FAILING.lock().unwrap().push(poisoned);
    let publisher = KafkaPublisher::builder(tansu.bootstrap())
        .route(Route::context(prefix.as_str()))
        .set("batch.num.messages", TANSU_ONE_RECORD_PER_BATCH)
        .build()
        .unwrap();
    assert!(
        publisher
            .publish(&envelopes)
            .await
            .unwrap()
            .iter()
            .all(Result::is_ok)
    );

    let shutdown = CancellationToken::new();
    let runner = KafkaConsumerRunner::builder(
        tansu.bootstrap(),
        [topic.clone()],
        consumer(&db, &outbox, "kafkatest.redelivery", 1),
    )
    .group_id(unique("kafkatest-group"))
    .redelivery_delay(Duration::from_millis(200))
    .build()
    .unwrap();
    let running = tokio::spawn(runner.run(shutdown.clone()));
    let deadline = Instant::now() + Duration::from_secs(30);
    while calls(poisoned) < 3 {
        assert!(
            Instant::now() < deadline,
            "not redelivered: {} calls, applied {:?}",
            calls(poisoned),
            applied(&db).await
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        applied(&db).await,
        [("ada".to_owned(), 1)],
        "nothing after the unsettled one"
    );
    eprintln!(
        "  unsettled message delivered {} times so far",
        calls(poisoned)
    );

    FAILING.lock().unwrap().retain(|id| *id != poisoned);
    db.conn()
        .execute_unprepared("DROP TRIGGER refuse_dead_letters")
        .await
        .unwrap();
    wait_applied(&db, 5, Duration::from_secs(30)).await;
    shutdown.cancel();
    running.await.unwrap().unwrap();
    let done = applied(&db).await;
    let ns: Vec<u32> = done.iter().map(|(_, n)| *n).collect();
    assert_eq!(ns, [1, 2, 3, 4, 5]);
    assert_eq!(
        count(&db, &format!("SELECT COUNT(*) FROM {dead_letters}")).await,
        0
    );
    db.close().await;
    tansu.delete_topic(&topic).await;
}

/// The runner survives a broker outage (proxy cut: every connection dropped, new ones
/// refused): librdkafka reconnects after the restore and the runner applies what was
/// published afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runner_resumes_after_the_broker_comes_back() {
    let Some(tansu) = Tansu::behind_proxy("runner_resumes_after_the_broker_comes_back").await
    else {
        return;
    };
    let proxy = tansu.proxy().unwrap();
    let prefix = format!("{}.", unique("t"));
    let topic = topic_of(&prefix);
    tansu.create_topic(&topic, 2).await;
    let db = TestDb::sqlite_file().await;
    let outbox = Outbox::default();
    consumer_tables(&db, &outbox).await;
    let publisher = KafkaPublisher::builder(tansu.bootstrap())
        .route(Route::context(prefix.as_str()))
        .delivery_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let first: Vec<Envelope> = (1..=5)
        .flat_map(|n| [order("ada", n), order("alan", n)])
        .collect();
    assert!(
        publisher
            .publish(&first)
            .await
            .unwrap()
            .iter()
            .all(Result::is_ok)
    );

    let shutdown = CancellationToken::new();
    let runner = KafkaConsumerRunner::builder(
        tansu.bootstrap(),
        [topic.clone()],
        consumer(&db, &outbox, "kafkatest.reconnect", 5),
    )
    .group_id(unique("kafkatest-group"))
    .build()
    .unwrap();
    let running = tokio::spawn(runner.run(shutdown.clone()));
    wait_applied(&db, 10, Duration::from_secs(30)).await;

    let before = proxy.connections();
    proxy.cut();
    tokio::time::sleep(Duration::from_secs(3)).await;
    proxy.restore();
    let second: Vec<Envelope> = (6..=10)
        .flat_map(|n| [order("ada", n), order("alan", n)])
        .collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let outcomes = publisher.publish(&second).await.unwrap();
        if outcomes.iter().all(Result::is_ok) {
            break;
        }
        // Failed messages (and their aggregates' later ones) are published again; the
        // inbox skips any that got through.
        assert!(
            Instant::now() < deadline,
            "still failing after restore: {outcomes:?}"
        );
    }
    wait_applied(&db, 20, Duration::from_secs(30)).await;
    eprintln!(
        "  connections through the proxy: {before} before the cut, {} after",
        proxy.connections()
    );
    assert!(proxy.connections() > before, "the clients reconnected");
    shutdown.cancel();
    running.await.unwrap().unwrap();
    let done = applied(&db).await;
    assert_eq!(done.len(), 20);
    assert_order_per_customer(&done);
    db.close().await;
}

// ---------------------------------------------------------------------------------------
// End to end (issue 6, item 4)
// ---------------------------------------------------------------------------------------

/// The producer's mapping: the contract is raised as is.
struct Contracts;

impl ContractMapper<OrderPlacedV1> for Contracts {
    fn map(&self, event: &OrderPlacedV1, out: &mut ContractSink<'_>) -> Result<(), MapError> {
        out.emit(event)
    }
}

const CUSTOMERS: u32 = 100;
const ORDERS_PER_CUSTOMER: u32 = 10;

/// The `n`-th order of customer `c`.
fn placed(c: u32, n: u32) -> OrderPlacedV1 {
    OrderPlacedV1 {
        customer_id: format!("c{c:03}"),
        n,
        book: format!("book-{}", n % 3),
        quantity: 1 + n % 2,
    }
}

/// 1 000 orders over 100 customers (the aggregates), placed on PostgreSQL → relay (`run`) →
/// Kafka → consumer runner → inbox on MariaDB. Midway the broker is cut for both the relay's
/// producer and the runner (proxy), and the relay task is aborted and replaced. At the end
/// every order is applied exactly once, the stock counters are exact, and every customer's
/// orders were applied in order (Kafka keeps the order per partition; the key is the
/// customer).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn end_to_end_postgres_relay_kafka_mariadb() {
    const TEST: &str = "end_to_end_postgres_relay_kafka_mariadb";
    let Some(tansu) = Tansu::behind_proxy(TEST).await else {
        return;
    };
    let Some(producer_db) = TestDb::postgres(TEST).await else {
        return;
    };
    let Some(consumer_db) = TestDb::mariadb(TEST).await else {
        return;
    };
    let started = Instant::now();
    let proxy = tansu.proxy().unwrap();
    let prefix = format!("{}.", unique("t"));
    let topic = topic_of(&prefix);
    tansu.create_topic(&topic, 4).await;
    let outbox = Outbox::default();
    schema::install(producer_db.conn(), &outbox).await.unwrap();
    consumer_tables(&consumer_db, &outbox).await;

    // Consumer side.
    let shutdown = CancellationToken::new();
    let runner = KafkaConsumerRunner::builder(
        tansu.bootstrap(),
        [topic.clone()],
        consumer(&consumer_db, &outbox, "kafkatest.end-to-end", 5),
    )
    .group_id(unique("kafkatest-e2e"))
    .build()
    .unwrap();
    let running = tokio::spawn(runner.run(shutdown.clone()));

    // Relay side.
    let publisher = KafkaPublisher::builder(tansu.bootstrap())
        .route(Route::context(prefix.as_str()))
        .delivery_timeout(Duration::from_secs(2))
        .set("batch.num.messages", TANSU_ONE_RECORD_PER_BATCH)
        .build()
        .unwrap();
    let relay = |id: &str| {
        Relay::builder(
            producer_db.conn().clone(),
            outbox.clone(),
            publisher.clone(),
        )
        .instance_id(id)
        // Published rows are kept: the test counts them while the broker comes and goes.
        .retention(Some(Duration::from_secs(3600)))
        .poll_interval(Duration::from_millis(20))
        .heartbeat_interval(Duration::from_millis(500))
        .lease_ttl(Duration::from_secs(6))
        .publish_timeout(Duration::from_secs(3))
        .max_attempts(1_000)
        .backoff(
            Backoff::new()
                .with_min_delay(Duration::from_millis(100))
                .with_max_delay(Duration::from_secs(1)),
        )
        .build()
        .unwrap()
    };
    let relay_stop = CancellationToken::new();
    let first_relay = tokio::spawn(relay("relay-1").run(relay_stop.clone()));

    // Producer: ten rounds, each customer's n-th order in round n, ten customers per
    // transaction, paced (~40 ms apart) so that the outage below falls in the middle of it.
    let producing = tokio::spawn({
        let (conn, outbox) = (producer_db.conn().clone(), outbox.clone());
        async move {
            for n in 1..=ORDERS_PER_CUSTOMER {
                for first in (0..CUSTOMERS).step_by(10) {
                    let uow = outbox.begin(&conn, &Contracts).await.unwrap();
                    for c in first..first + 10 {
                        uow.raise(placed(c, n));
                    }
                    uow.commit().await.unwrap();
                    tokio::time::sleep(Duration::from_millis(40)).await;
                }
            }
        }
    });

    // Midway (300 rows published): the broker goes away for everyone, and the relay task
    // dies; the producer goes on.
    let total = usize::try_from(CUSTOMERS * ORDERS_PER_CUSTOMER).unwrap();
    let deadline = Instant::now() + Duration::from_secs(40);
    while count(
        &producer_db,
        "SELECT COUNT(*) FROM outbox WHERE status = 'published'",
    )
    .await
        < 300
    {
        assert!(Instant::now() < deadline, "the relay does not publish");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let before_cut = proxy.connections();
    proxy.cut();
    first_relay.abort();
    let at_cut = applied(&consumer_db).await.len();
    let published_at_cut = count(
        &producer_db,
        "SELECT COUNT(*) FROM outbox WHERE status = 'published'",
    )
    .await;
    let committed_at_cut = count(&producer_db, "SELECT COUNT(*) FROM outbox").await;
    eprintln!(
        "  broker cut, relay-1 aborted ({:?}): {committed_at_cut} orders committed, \
         {published_at_cut} published, {at_cut} applied; {before_cut} connections so far",
        started.elapsed()
    );
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    proxy.restore();
    let second_relay = tokio::spawn(relay("relay-2").run(relay_stop.clone()));
    eprintln!(
        "  broker restored, relay-2 started ({:?})",
        started.elapsed()
    );
    producing.await.unwrap();
    eprintln!("  producer done ({:?})", started.elapsed());

    wait_applied(&consumer_db, total, Duration::from_secs(45)).await;
    eprintln!("  all {total} applied ({:?})", started.elapsed());
    let deadline = Instant::now() + Duration::from_secs(20);
    while count(
        &producer_db,
        "SELECT COUNT(*) FROM outbox WHERE status = 'published'",
    )
    .await
        < i64::try_from(total).unwrap()
    {
        assert!(
            Instant::now() < deadline,
            "the relay did not mark every row published"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Let duplicates (republished after the cut) reach the runner, then stop.
    tokio::time::sleep(Duration::from_secs(1)).await;
    relay_stop.cancel();
    second_relay.await.unwrap().unwrap();
    shutdown.cancel();
    running.await.unwrap().unwrap();

    let done = applied(&consumer_db).await;
    assert_eq!(done.len(), total, "every order applied exactly once");
    let distinct: std::collections::HashSet<&(String, u32)> = done.iter().collect();
    assert_eq!(distinct.len(), total);
    assert_eq!(
        count(
            &consumer_db,
            "SELECT COUNT(*) FROM inbox WHERE consumer = 'kafkatest.end-to-end'"
        )
        .await,
        i64::try_from(total).unwrap()
    );
    assert_order_per_customer(&done);
    let mut expected: BTreeMap<String, i64> = BOOKS.iter().map(|b| ((*b).to_owned(), 0)).collect();
    for c in 0..CUSTOMERS {
        for n in 1..=ORDERS_PER_CUSTOMER {
            let event = placed(c, n);
            *expected.get_mut(&event.book).unwrap() += i64::from(event.quantity);
        }
    }
    assert_eq!(
        reserved(&consumer_db).await,
        expected,
        "stock counters exact"
    );
    let records = records_in(&tansu.bootstrap(), &topic, 4).await;
    eprintln!(
        "  {records} records in the topic for {total} orders ({} duplicates, skipped by the \
         inbox); {} connections through the proxy; {:?} in all",
        records - i64::try_from(total).unwrap(),
        proxy.connections(),
        started.elapsed()
    );
    assert!(records >= i64::try_from(total).unwrap());
    producer_db.close().await;
    consumer_db.close().await;
}

/// Records in `topic` (the sum of its partitions' high watermarks).
async fn records_in(bootstrap: &str, topic: &str, partitions: i32) -> i64 {
    let client: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", unique("watermarks"))
        .create()
        .unwrap();
    let topic = topic.to_owned();
    tokio::task::spawn_blocking(move || {
        (0..partitions)
            .map(|p| {
                let (low, high) = client
                    .fetch_watermarks(&topic, p, Duration::from_secs(10))
                    .unwrap();
                high - low
            })
            .sum()
    })
    .await
    .unwrap()
}

/// A requeued dead letter is redelivered by the running runner (no restart, no call of
/// `redeliver_requeued` by the application).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runner_redelivers_requeued_dead_letters() {
    let Some(tansu) = Tansu::shared("the_runner_redelivers_requeued_dead_letters").await else {
        return;
    };
    let prefix = format!("{}.", unique("t"));
    // The shared scenario's contract is `brokertest.shop.customer-ordered.v1`.
    let topic = format!("{prefix}brokertest.shop");
    tansu.create_topic(&topic, 1).await;
    let db = TestDb::sqlite_file().await;
    let outbox = Outbox::default();
    let publisher = KafkaPublisher::builder(tansu.bootstrap())
        .route(Route::context(prefix.as_str()))
        .build()
        .unwrap();
    e2e_orders::a_requeued_dead_letter_is_redelivered(
        db.conn(),
        &outbox,
        &publisher,
        |consumer, shutdown| {
            let runner = KafkaConsumerRunner::builder(tansu.bootstrap(), [topic.clone()], consumer)
                .group_id(unique("kafkatest-requeue").as_str())
                .build()
                .unwrap();
            tokio::spawn(runner.run(shutdown))
        },
    )
    .await
    .unwrap();
    db.close().await;
}

/// Kafka's own partitioned consumption: three processes in one consumer group on a topic of
/// six partitions, one leaving and replaced three times (its runner dropped: it leaves the
/// group, the broker reassigns its partitions, its uncommitted records are consumed again
/// by their new owner), a fourth joining: every order applied once, each customer's in
/// order — the group's assignment keeps each partition with one member, the inbox absorbs
/// what a takeover consumes twice (`e2e_orders::partitioned_kills_and_a_join`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_group_applies_once_and_in_order_across_leaves_and_a_join() {
    let test = "a_consumer_group_applies_once_and_in_order_across_leaves_and_a_join";
    let Some(tansu) = Tansu::shared(test).await else {
        return;
    };
    let Some(db) = TestDb::postgres(test).await else {
        return;
    };
    let outbox = Outbox::default();
    e2e_orders::consumer_tables(db.conn(), &outbox).await;
    let topic = unique("t-group");
    tansu.create_topic(&topic, 6).await;
    // One record per batch: tansu answers a fetch from inside a batch with the batches after
    // it (`outbox_brokers::kafka`), and members resume at committed offsets.
    let publisher = KafkaPublisher::builder(tansu.bootstrap())
        .route(Route::fixed(topic.as_str()))
        .set("batch.num.messages", "1")
        .build()
        .unwrap();
    let group = unique("t-group");
    let shutdown = CancellationToken::new();
    e2e_orders::partitioned_kills_and_a_join(db.conn(), &outbox, publisher, &shutdown, |id| {
        let runner = KafkaConsumerRunner::builder(
            tansu.bootstrap(),
            [topic.clone()],
            e2e_orders::inbox_consumer(db.conn(), &outbox, 3),
        )
        .group_id(group.as_str())
        .set("client.id", id)
        .commit_interval(Duration::from_millis(200))
        .redelivery_delay(Duration::from_millis(200))
        .set("session.timeout.ms", "6000")
        .set("heartbeat.interval.ms", "500")
        .build()
        .unwrap();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let _ = runner.run(shutdown).await;
        })
    })
    .await;
    db.close().await;
    tansu.delete_topic(&topic).await;
}
