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

use std::time::Duration;

use outbox_core::Raise;
use outbox_core::in_process::InProcessBroker;
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
/// the missing table with the fix; returns the steps. (A step of the loop that ran between
/// two statements of the test's DDL fails on its own: the claim may find the lease tables
/// while the status gauges miss the outbox table.)
fn one_warning_per_step(capture: &LogCapture, what: &str) -> Vec<String> {
    let warnings = capture.framework(tracing::Level::WARN);
    assert!(!warnings.is_empty(), "{what}: a WARN");
    let mut steps: Vec<String> = warnings.iter().map(|line| step_of(&line.text)).collect();
    for line in &warnings {
        assert!(
            line.text.contains("does not exist"),
            "{what}: {}",
            line.text
        );
        assert!(
            line.text.contains("schema::install"),
            "{what}: {}",
            line.text
        );
        assert!(line.text.contains("migration"), "{what}: {}", line.text);
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
/// once at INFO, and no other step did.
fn each_step_recovered(capture: &LogCapture, what: &str) {
    let steps = one_warning_per_step(capture, what);
    let mut recovered: Vec<String> = capture
        .framework(tracing::Level::INFO)
        .into_iter()
        .filter(|line| line.text.contains("recovered"))
        .map(|line| step_of(&line.text))
        .collect();
    recovered.sort();
    assert_eq!(recovered, steps, "{what}: {:#?}", capture.lines());
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
    each_step_recovered(&capture, "no tables, then installed");
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
    each_step_recovered(&capture, "dropped, then installed again");
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
    each_step_recovered(&capture, "log relay: no tables, then installed");

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
