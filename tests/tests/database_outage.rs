//! No loop spins on a database error that repeats (issue 32): pointed at a database without
//! the outbox tables, or whose tables are dropped while it runs, each long-running loop
//! sends a bounded number of statements (at most [`BOUND`] in [`WINDOW`]), logs one WARN
//! that names the missing table and the fix, and once the tables are back recovers within
//! the backoff's cap with one INFO line.
//!
//! Statements are counted as SQLx logs them (one event per statement sent, failed ones
//! included) on the loop's own connection; the test's own statements go through a
//! connection that does not log. A test binary of its own: it installs the process's
//! tracing subscriber ([`outbox_tests::log_capture`]).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod e2e_orders;

use std::time::Duration;

use outbox_brokers::route::Route;
use outbox_core::in_process::InProcessBroker;
use outbox_core::policy::Backoff;
use outbox_core::{Publisher as _, Raise};
use outbox_seaorm::inbox::Consumer;
use outbox_seaorm::inbox::partitioned::PartitionedConsumer;
use outbox_seaorm::outage::MAX_PAUSE;
use outbox_seaorm::relay::Relay;
use outbox_seaorm::relay::log::LogRelay;
use outbox_seaorm::{Outbox, schema};
use outbox_tests::bookstore::{OrderingContracts, OrderingEvent};
use outbox_tests::db::{Backend, TestDb};
use outbox_tests::log_capture::{LogCapture, counted_connection};
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement};
use tokio_util::sync::CancellationToken;

/// How long the statements are counted.
const WINDOW: Duration = Duration::from_secs(5);
/// The most statements a loop may send in [`WINDOW`] against a database that keeps failing.
const BOUND: usize = 10;

/// Drops every table of the test database (the outbox's and any other).
async fn drop_every_table(db: &DatabaseConnection) {
    let backend = db.get_database_backend();
    let listing = match backend {
        DbBackend::Postgres => {
            "SELECT tablename AS name FROM pg_tables WHERE schemaname = 'public'"
        }
        DbBackend::MySql => {
            "SELECT table_name AS name FROM information_schema.tables \
             WHERE table_schema = DATABASE()"
        }
        _ => "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
    };
    let rows = db
        .query_all_raw(Statement::from_string(backend, listing))
        .await
        .unwrap();
    for row in rows {
        let name: String = row.try_get("", "name").unwrap();
        let drop = match backend {
            DbBackend::Postgres => format!("DROP TABLE IF EXISTS \"{name}\" CASCADE"),
            DbBackend::MySql => format!("DROP TABLE IF EXISTS `{name}`"),
            _ => format!("DROP TABLE IF EXISTS \"{name}\""),
        };
        db.execute_unprepared(&drop).await.unwrap();
    }
}

/// Commits one event for order `order`.
async fn note(db: &TestDb, outbox: &Outbox, order: &str) {
    let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
    uow.raise(OrderingEvent::Noted {
        order_id: order.to_owned(),
        n: 1,
    });
    uow.commit().await.unwrap();
}

/// Waits until `broker` holds `count` messages, at most the backoff's cap and a margin.
async fn published(capture: &LogCapture, broker: &InProcessBroker, count: usize) {
    let deadline = tokio::time::Instant::now() + MAX_PAUSE + Duration::from_secs(3);
    while broker.len() < count {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} of {count} published within the backoff's cap: {:#?}",
            broker.len(),
            capture.lines()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The `step="…"` field of a line.
fn step_of(text: &str) -> String {
    text.split("step=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or("?")
        .to_owned()
}

/// Asserts the framework logged one WARN per failing step (and at least one), each naming
/// the missing table with the fix (or the revoked permission); returns the steps. (A step of the loop that ran between
/// two statements of the test's DDL fails on its own: the claim may find the lease tables
/// while the status gauges miss the outbox table.)
fn one_warning_per_step(capture: &LogCapture, what: &str) -> Vec<String> {
    let warnings = capture.framework(tracing::Level::WARN);
    assert!(!warnings.is_empty(), "{what}: a WARN");
    let mut steps: Vec<String> = warnings.iter().map(|line| step_of(&line.text)).collect();
    for line in &warnings {
        let text = &line.text;
        assert!(text.contains("database step failing"), "{what}: {text}");
        if text.contains("does not exist") {
            assert!(text.contains("schema::install"), "{what}: {text}");
            assert!(text.contains("migration"), "{what}: {text}");
        } else {
            assert!(text.contains("permission denied"), "{what}: {text}");
        }
    }
    steps.sort();
    let count = steps.len();
    steps.dedup();
    assert_eq!(
        count,
        steps.len(),
        "{what}: one WARN per step: {warnings:#?}"
    );
    steps
}

/// Asserts that each step that warned (see [`one_warning_per_step`]) logged its recovery
/// once at INFO, and no other step did — within the backoff's cap: a step recovers at its
/// next attempt, which may come after the loop's other steps already work again.
async fn each_step_recovered(capture: &LogCapture, what: &str) {
    let steps = one_warning_per_step(capture, what);
    let deadline = tokio::time::Instant::now() + MAX_PAUSE + Duration::from_secs(3);
    loop {
        let mut recovered: Vec<String> = capture
            .framework(tracing::Level::INFO)
            .into_iter()
            .filter(|line| line.text.contains("recovered"))
            .map(|line| step_of(&line.text))
            .collect();
        recovered.sort();
        if recovered == steps || tokio::time::Instant::now() >= deadline {
            assert_eq!(recovered, steps, "{what}: {:#?}", capture.lines());
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The polling relay on `backend`: started before the tables exist, then its tables dropped
/// while it runs.
async fn polling_relay(backend: Backend, test: &str) {
    let capture = LogCapture::begin().await;
    let Some(db) = TestDb::open(backend, test).await else {
        return;
    };
    let counted = counted_connection(db.url()).await;
    let outbox = Outbox::default();
    let broker = InProcessBroker::new();
    let heartbeat = Duration::from_secs(1);
    let relay = Relay::builder(counted.clone(), outbox.clone(), broker.clone())
        .poll_interval(Duration::from_millis(50))
        .heartbeat_interval(heartbeat)
        .build()
        .unwrap();
    let health = relay.database_outage();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(relay.run(shutdown.clone()));

    // No tables yet.
    let sent = capture.statements_during(WINDOW).await;
    eprintln!("{test}: {sent} statements in {WINDOW:?} without tables");
    assert!(
        sent <= BOUND,
        "{sent} statements in {WINDOW:?} without tables"
    );
    let failing = health.failing().expect("the relay says its database fails");
    assert!(failing.missing_table.is_some(), "{failing:?}");
    schema::install(db.conn(), &outbox).await.unwrap();
    note(&db, &outbox, "a").await;
    published(&capture, &broker, 1).await;
    // Every step that failed has run again since.
    tokio::time::sleep(MAX_PAUSE + heartbeat).await;
    each_step_recovered(&capture, "no tables, then installed").await;
    assert_eq!(health.failing(), None);

    // The tables dropped while it runs.
    capture.clear();
    drop_every_table(db.conn()).await;
    let sent = capture.statements_during(WINDOW).await;
    eprintln!("{test}: {sent} statements in {WINDOW:?} after the tables were dropped");
    assert!(sent <= BOUND, "{sent} statements after the drop");
    assert!(health.failing().is_some());
    schema::install(db.conn(), &outbox).await.unwrap();
    note(&db, &outbox, "b").await;
    published(&capture, &broker, 2).await;
    tokio::time::sleep(MAX_PAUSE + heartbeat).await;
    each_step_recovered(&capture, "dropped, then installed again").await;
    assert_eq!(health.failing(), None);

    shutdown.cancel();
    running.await.unwrap().unwrap();
    counted.close().await.unwrap();
    db.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polling_relay_backs_off_on_postgres() {
    polling_relay(Backend::Postgres, "polling_relay_backs_off_on_postgres").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polling_relay_backs_off_on_mariadb() {
    polling_relay(Backend::MariaDb, "polling_relay_backs_off_on_mariadb").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polling_relay_backs_off_on_sqlite() {
    polling_relay(Backend::SqliteFile, "polling_relay_backs_off_on_sqlite").await;
}

/// The log relay (PostgreSQL, logical decoding): started before its tables exist (the usual
/// order of a first deployment) it waits for them instead of stopping, then streams; its
/// tables dropped while it streams, it waits again, bounded and quiet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_relay_waits_for_its_tables() {
    let test = "log_relay_waits_for_its_tables";
    let capture = LogCapture::begin().await;
    let Some(db) = TestDb::logical_postgres(test).await else {
        return;
    };
    let counted = counted_connection(db.url()).await;
    let outbox = Outbox::default();
    let broker = InProcessBroker::new();
    let slot = format!("t_{}", uuid::Uuid::now_v7().simple());
    let relay = LogRelay::builder(counted.clone(), outbox.clone(), broker.clone())
        .slot(slot)
        .heartbeat_interval(Duration::from_millis(200))
        .build()
        .unwrap();
    let health = relay.database_outage();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(relay.run(shutdown.clone()));

    let sent = capture.statements_during(WINDOW).await;
    eprintln!("{test}: {sent} statements in {WINDOW:?} without tables");
    assert!(
        sent <= BOUND,
        "{sent} statements in {WINDOW:?} without tables"
    );
    assert!(!running.is_finished(), "the log relay waits for its tables");
    let failing = health.failing().expect("the relay says its database fails");
    assert!(failing.missing_table.is_some(), "{failing:?}");
    schema::install(db.conn(), &outbox).await.unwrap();
    // Streaming (a slot created after the commit would backfill it: wait for the stream
    // first so that the event comes through the log).
    let deadline = tokio::time::Instant::now() + MAX_PAUSE + Duration::from_secs(10);
    while health.failing().is_some() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{:#?}",
            capture.lines()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    note(&db, &outbox, "a").await;
    published(&capture, &broker, 1).await;
    each_step_recovered(&capture, "log relay: no tables, then installed").await;

    // The tables dropped while it streams (the publication loses the outbox table).
    capture.clear();
    drop_every_table(db.conn()).await;
    let sent = capture.statements_during(WINDOW).await;
    eprintln!("{test}: {sent} statements in {WINDOW:?} after the tables were dropped");
    assert!(sent <= BOUND, "{sent} statements after the drop");
    assert!(!running.is_finished(), "the log relay waits for its tables");
    let steps = one_warning_per_step(&capture, "log relay: tables dropped");
    assert!(steps.contains(&"stream".to_owned()), "{steps:?}");
    // Installed again, the outbox table is a new table that the publication no longer
    // holds (PostgreSQL removed the dropped one from it). Rows committed before it is added
    // back would never be decoded, so the relay does not add it itself: it stops and says
    // how (an operator decides what to do with rows written meanwhile).
    schema::install(db.conn(), &outbox).await.unwrap();
    let stopped = tokio::time::timeout(MAX_PAUSE + Duration::from_secs(10), running)
        .await
        .expect("the log relay stops on the publication")
        .unwrap();
    let error = stopped.unwrap_err().to_string();
    assert!(error.contains("ALTER PUBLICATION"), "{error}");
    shutdown.cancel();
    counted.close().await.unwrap();
    db.close().await;
}

// ---------------------------------------------------------------------------------------
// Consumers: the inbox consumer inside each broker's runner, its redelivery rounds, the
// partitioned consumer's supervisor
// ---------------------------------------------------------------------------------------

/// The consumer's own tables (`stock`, `applied`), without the outbox's.
async fn business_tables(db: &DatabaseConnection) {
    db.execute_unprepared(
        "CREATE TABLE applied (id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, \
         customer_id VARCHAR(64) NOT NULL, order_no INTEGER NOT NULL, \
         message_id VARCHAR(36) NOT NULL)",
    )
    .await
    .unwrap();
    db.execute_unprepared(
        "CREATE TABLE stock (book_id VARCHAR(64) NOT NULL PRIMARY KEY, reserved BIGINT NOT NULL)",
    )
    .await
    .unwrap();
    for book in e2e_orders::BOOKS {
        db.execute_unprepared(&format!(
            "INSERT INTO stock (book_id, reserved) VALUES ('{book}', 0)"
        ))
        .await
        .unwrap();
    }
}

/// The outbox's tables in one transaction (PostgreSQL's DDL is transactional): the loops
/// see all of them or none.
async fn install_at_once(db: &DatabaseConnection, outbox: &Outbox) {
    use sea_orm::TransactionTrait as _;
    let txn = db.begin().await.unwrap();
    schema::install(&txn, outbox).await.unwrap();
    txn.commit().await.unwrap();
}

/// A consumer database on PostgreSQL with its business tables and no outbox tables; the
/// inbox consumer on a counted connection to it.
async fn consumer_database(test: &str) -> Option<(TestDb, DatabaseConnection, Consumer)> {
    let db = TestDb::postgres(test).await?;
    business_tables(db.conn()).await;
    let counted = counted_connection(db.url()).await;
    let consumer = Consumer::builder(counted.clone(), Outbox::default(), e2e_orders::CONSUMER)
        .backoff(
            Backoff::new()
                .with_min_delay(Duration::from_millis(20))
                .with_max_delay(Duration::from_millis(200)),
        )
        .build()
        .unwrap();
    Some((db, counted, consumer))
}

/// The scenario every runner goes through: a message waits on the broker while the
/// consumer's database has no outbox tables; the runner sends a bounded number of
/// statements and warns once per step; once the tables are installed the message is
/// applied within the backoff's cap and each step logs its recovery.
async fn consumer_waits_for_its_tables(
    test: &str,
    capture: &LogCapture,
    db: &TestDb,
    consumer: &Consumer,
) {
    let health = consumer.database_outage();
    let sent = capture.statements_during(WINDOW).await;
    eprintln!("{test}: {sent} statements in {WINDOW:?} without tables");
    assert!(
        sent <= BOUND,
        "{sent} statements in {WINDOW:?} without tables"
    );
    let failing = health
        .failing()
        .expect("the consumer says its database fails");
    assert!(failing.missing_table.is_some(), "{failing:?}");
    assert!(
        e2e_orders::applied(db.conn()).await.is_empty(),
        "nothing applied without an inbox"
    );
    install_at_once(db.conn(), &Outbox::default()).await;
    let deadline = tokio::time::Instant::now() + MAX_PAUSE + Duration::from_secs(5);
    while e2e_orders::applied(db.conn()).await.is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "applied within the backoff's cap: {:#?}",
            capture.lines()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The redelivery rounds run every 5 s: let each failing step run again.
    tokio::time::sleep(Duration::from_secs(5) + MAX_PAUSE).await;
    each_step_recovered(capture, test).await;
    assert_eq!(health.failing(), None);
    assert_eq!(
        e2e_orders::applied(db.conn()).await.len(),
        1,
        "applied once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_consumer_runner_waits_for_its_tables() {
    use outbox_brokers::nats::{self, NatsConsumerRunner, NatsPublisher, NatsStream};
    let test = "nats_consumer_runner_waits_for_its_tables";
    let capture = LogCapture::begin().await;
    let Some(url) = outbox_tests::service(outbox_tests::Service::Nats, test) else {
        return;
    };
    let Some((db, counted, consumer)) = consumer_database(test).await else {
        return;
    };
    let client = nats::connect(&url).await.unwrap();
    let id = uuid::Uuid::now_v7().simple().to_string();
    let prefix = format!("t{id}.");
    let stream = NatsStream::new(format!("T{id}"), [format!("{prefix}>")]);
    stream.ensure(&client).await.unwrap();
    let publisher = NatsPublisher::builder(client.clone())
        .route(Route::event_type(prefix.clone()))
        .build();
    let runner = NatsConsumerRunner::builder(client.clone(), consumer.clone(), stream.name())
        .ack_wait(Duration::from_secs(2))
        .fetch_wait(Duration::from_millis(300))
        .redelivery_backoff(
            Backoff::new()
                .with_min_delay(Duration::from_millis(100))
                .with_max_delay(Duration::from_millis(200)),
        )
        .build()
        .unwrap();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(runner.run(shutdown.clone()));
    let outcome = publisher.publish(&[e2e_orders::order(0, 0)]).await.unwrap();
    assert!(outcome[0].is_ok(), "{outcome:?}");

    consumer_waits_for_its_tables(test, &capture, &db, &consumer).await;

    shutdown.cancel();
    running.await.unwrap();
    let _ = outbox_brokers::nats::async_nats::jetstream::new(client)
        .delete_stream(stream.name())
        .await;
    counted.close().await.unwrap();
    db.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_consumer_runner_waits_for_its_tables() {
    use outbox_brokers::redis::{self, RedisConsumerRunner, RedisPublisher};
    let test = "redis_consumer_runner_waits_for_its_tables";
    let capture = LogCapture::begin().await;
    let Some(url) = outbox_tests::service(outbox_tests::Service::Redis, test) else {
        return;
    };
    let Some((db, counted, consumer)) = consumer_database(test).await else {
        return;
    };
    let client = redis::open(&url).unwrap();
    let connection = redis::connection(&client).unwrap();
    let prefix = format!("t{}:", uuid::Uuid::now_v7().simple());
    let stream = format!("{prefix}brokertest.shop");
    let publisher = RedisPublisher::builder(connection)
        .route(Route::context(prefix.clone()))
        .build();
    let runner = RedisConsumerRunner::builder(client, consumer.clone(), stream)
        .consumer_name("test-runner")
        .block(Duration::from_millis(300))
        .redelivery_backoff(
            Backoff::new()
                .with_min_delay(Duration::from_millis(100))
                .with_max_delay(Duration::from_millis(200)),
        )
        .build()
        .unwrap();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(runner.run(shutdown.clone()));
    let outcome = publisher.publish(&[e2e_orders::order(0, 0)]).await.unwrap();
    assert!(outcome[0].is_ok(), "{outcome:?}");

    consumer_waits_for_its_tables(test, &capture, &db, &consumer).await;

    shutdown.cancel();
    running.await.unwrap();
    counted.close().await.unwrap();
    db.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabbitmq_consumer_runner_waits_for_its_tables() {
    use outbox_brokers::rabbitmq::{RabbitConsumerRunner, RabbitPublisher};
    let test = "rabbitmq_consumer_runner_waits_for_its_tables";
    let capture = LogCapture::begin().await;
    let Some(url) = outbox_tests::service(outbox_tests::Service::RabbitMq, test) else {
        return;
    };
    let Some((db, counted, consumer)) = consumer_database(test).await else {
        return;
    };
    let id = uuid::Uuid::now_v7().simple().to_string();
    let (exchange, queue) = (format!("outage-x-{id}"), format!("outage-q-{id}"));
    let runner = RabbitConsumerRunner::builder(&url, &exchange, &queue, consumer.clone())
        .bind("brokertest.#")
        .redelivery_delay(Duration::from_millis(100))
        .build()
        .unwrap();
    runner.declare_topology().await.unwrap();
    let publisher = RabbitPublisher::builder(url.as_str(), exchange.as_str())
        .build()
        .unwrap();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(runner.run(shutdown.clone()));
    let outcome = publisher.publish(&[e2e_orders::order(0, 0)]).await.unwrap();
    assert!(outcome[0].is_ok(), "{outcome:?}");

    consumer_waits_for_its_tables(test, &capture, &db, &consumer).await;

    shutdown.cancel();
    running.await.unwrap().unwrap();
    publisher.close().await;
    counted.close().await.unwrap();
    db.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_consumer_runner_waits_for_its_tables() {
    use outbox_brokers::kafka::{KafkaConsumerRunner, KafkaPublisher};
    let test = "kafka_consumer_runner_waits_for_its_tables";
    let capture = LogCapture::begin().await;
    let Some(tansu) = outbox_tests::tansu::Tansu::shared(test).await else {
        return;
    };
    let Some((db, counted, consumer)) = consumer_database(test).await else {
        return;
    };
    let prefix = format!("t{}.", uuid::Uuid::now_v7().simple());
    let topic = format!("{prefix}brokertest.shop");
    tansu.create_topic(&topic, 1).await;
    let publisher = KafkaPublisher::builder(tansu.bootstrap())
        .route(Route::context(prefix.as_str()))
        .build()
        .unwrap();
    let outcome = publisher.publish(&[e2e_orders::order(0, 0)]).await.unwrap();
    assert!(outcome[0].is_ok(), "{outcome:?}");
    let runner = KafkaConsumerRunner::builder(tansu.bootstrap(), [topic.clone()], consumer.clone())
        .group_id(format!("outage-{}", uuid::Uuid::now_v7().simple()))
        .redelivery_delay(Duration::from_millis(100))
        .build()
        .unwrap();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(runner.run(shutdown.clone()));

    consumer_waits_for_its_tables(test, &capture, &db, &consumer).await;

    shutdown.cancel();
    running.await.unwrap().unwrap();
    tansu.delete_topic(&topic).await;
    counted.close().await.unwrap();
    db.close().await;
}

/// The partitioned consumer's supervisor (leases, heartbeats) on a database without the
/// outbox tables: bounded, one WARN, and it takes its partitions once they exist.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitioned_consumer_supervisor_waits_for_its_tables() {
    let test = "partitioned_consumer_supervisor_waits_for_its_tables";
    let capture = LogCapture::begin().await;
    let Some((db, counted, consumer)) = consumer_database(test).await else {
        return;
    };
    let partitioned = PartitionedConsumer::builder(consumer, 2)
        .heartbeat_interval(Duration::from_millis(200))
        .build()
        .unwrap();
    let started = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = std::sync::Arc::clone(&started);
    let shutdown = CancellationToken::new();
    let stop = shutdown.clone();
    let running = tokio::spawn(partitioned.run(shutdown.clone(), move |_partition| {
        counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let stop = stop.clone();
        async move { stop.cancelled().await }
    }));

    let sent = capture.statements_during(WINDOW).await;
    eprintln!("{test}: {sent} statements in {WINDOW:?} without tables");
    assert!(
        sent <= BOUND,
        "{sent} statements in {WINDOW:?} without tables"
    );
    assert_eq!(started.load(std::sync::atomic::Ordering::SeqCst), 0);
    install_at_once(db.conn(), &Outbox::default()).await;
    let deadline = tokio::time::Instant::now() + MAX_PAUSE + Duration::from_secs(3);
    while started.load(std::sync::atomic::Ordering::SeqCst) < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "partitions taken within the backoff's cap: {:#?}",
            capture.lines()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    each_step_recovered(&capture, test).await;

    shutdown.cancel();
    running.await.unwrap();
    counted.close().await.unwrap();
    db.close().await;
}

// ---------------------------------------------------------------------------------------
// The retention cleanup
// ---------------------------------------------------------------------------------------

/// The polling relay's retention cleanup, its `DELETE` permission revoked while it runs
/// (PostgreSQL, a role of the test's own): publishing goes on, the cleanup tries at most
/// once per backoff step instead of once per purge interval, warns once, and purges once
/// the permission is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_cleanup_backs_off_when_its_permission_is_revoked() {
    let test = "retention_cleanup_backs_off_when_its_permission_is_revoked";
    let capture = LogCapture::begin().await;
    let Some(db) = TestDb::postgres(test).await else {
        return;
    };
    let outbox = Outbox::default();
    schema::install(db.conn(), &outbox).await.unwrap();
    let role = format!("outbox_r_{}", uuid::Uuid::now_v7().simple());
    for statement in [
        format!("CREATE ROLE {role} LOGIN"),
        format!("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {role}"),
        format!("GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {role}"),
    ] {
        db.conn().execute_unprepared(&statement).await.unwrap();
    }
    let url = db.url().replacen("postgres@", &format!("{role}@"), 1);
    assert_ne!(url, db.url(), "the role's URL");
    let counted = counted_connection(&url).await;
    let broker = InProcessBroker::new();
    let relay = Relay::builder(counted.clone(), outbox.clone(), broker.clone())
        .poll_interval(Duration::from_millis(50))
        // Published rows are kept (marked, not deleted) and purged a moment later.
        .retention(Some(Duration::from_millis(1)))
        .purge_interval(Duration::from_millis(100))
        .build()
        .unwrap();
    let health = relay.database_outage();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(relay.run(shutdown.clone()));
    note(&db, &outbox, "a").await;
    published(&capture, &broker, 1).await;

    db.conn()
        .execute_unprepared(&format!("REVOKE DELETE ON outbox FROM {role}"))
        .await
        .unwrap();
    capture.clear();
    note(&db, &outbox, "b").await;
    let purges = |capture: &LogCapture| {
        capture
            .statements()
            .iter()
            .filter(|line| line.text.contains("DELETE FROM \\\"outbox\\\""))
            .count()
    };
    tokio::time::sleep(WINDOW).await;
    let sent = purges(&capture);
    eprintln!("{test}: {sent} cleanup DELETEs in {WINDOW:?} without the permission");
    assert!(sent <= BOUND, "{sent} cleanup attempts in {WINDOW:?}");
    assert_eq!(
        broker.len(),
        2,
        "publishing goes on: {:#?}",
        capture.framework(tracing::Level::WARN)
    );
    let failing = health.failing().expect("the cleanup fails");
    assert_eq!(failing.step, "retention cleanup");
    let warnings = capture.framework(tracing::Level::WARN);
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert!(
        warnings[0].text.contains("permission denied"),
        "{warnings:#?}"
    );

    db.conn()
        .execute_unprepared(&format!("GRANT DELETE ON outbox TO {role}"))
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + MAX_PAUSE + Duration::from_secs(3);
    while health.failing().is_some() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{:#?}",
            capture.lines()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    each_step_recovered(&capture, test).await;

    shutdown.cancel();
    running.await.unwrap().unwrap();
    counted.close().await.unwrap();
    db.close().await;
    let admin = TestDb::postgres(test).await.unwrap();
    admin
        .conn()
        .execute_unprepared(&format!("DROP ROLE IF EXISTS {role}"))
        .await
        .unwrap();
    admin.close().await;
}
