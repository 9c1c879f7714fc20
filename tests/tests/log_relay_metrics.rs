//! The log relay's metrics (book: Operations): the write mode, the slot's lag and
//! `wal_status`, commit → publish latency, published events; on MariaDB the slot's lag in
//! transactions. A test binary of its own, since
//! it installs the global recorder.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use outbox_core::Raise;
use outbox_core::in_process::InProcessBroker;
use outbox_seaorm::relay::log::LogRelay;
use outbox_seaorm::{Outbox, schema};
use outbox_tests::bookstore::{OrderingContracts, OrderingEvent};
use outbox_tests::db::TestDb;
use outbox_tests::metrics::Memory;
use tokio_util::sync::CancellationToken;

/// The recorder, installed once for the binary's tests.
fn memory() -> &'static Memory {
    static MEMORY: std::sync::OnceLock<&'static Memory> = std::sync::OnceLock::new();
    MEMORY.get_or_init(Memory::install)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_relay_emits_its_metrics() {
    let memory = memory();
    let Some(db) = TestDb::logical_postgres("the_log_relay_emits_its_metrics").await else {
        return;
    };
    let outbox = Outbox::default();
    schema::install(db.conn(), &outbox).await.unwrap();
    let broker = InProcessBroker::new();
    let slot = format!("t_{}", uuid::Uuid::now_v7().simple());
    let shutdown = CancellationToken::new();
    let relay = LogRelay::builder(db.conn().clone(), outbox.clone(), broker.clone())
        .slot(&slot)
        .heartbeat_interval(Duration::from_millis(100))
        .build()
        .unwrap();
    let task = tokio::spawn(relay.run(shutdown.clone()));
    // Written once the slot streams (the backfill would publish it otherwise, without a
    // commit time).
    let lag_key = format!("outbox_log_slot_lag_bytes{{outbox=outbox,slot={slot}}}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while memory.gauge(&lag_key).is_nan() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{:?}",
            memory.gauge_keys()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
    uow.raise(OrderingEvent::Noted {
        order_id: "o".into(),
        n: 0,
    });
    uow.commit().await.unwrap();
    assert!(broker.wait_for_published(1, Duration::from_secs(20)).await);
    tokio::time::sleep(Duration::from_millis(300)).await;
    shutdown.cancel();
    task.await.unwrap().unwrap();

    assert_eq!(
        memory.gauge("outbox_write_mode{outbox=outbox,mode=table}"),
        1.0
    );
    assert!(memory.gauge(&lag_key) >= 0.0, "{lag_key}");
    let status = |s: &str| {
        memory.gauge(&format!(
            "outbox_log_slot_wal_status{{outbox=outbox,slot={slot},status={s}}}"
        ))
    };
    assert_eq!(status("reserved"), 1.0);
    assert_eq!(status("lost"), 0.0);
    assert!(memory.samples("outbox_log_commit_to_publish_seconds{outbox=outbox}") >= 1);
    assert_eq!(memory.counter("outbox_published_total{outbox=outbox}"), 1);
    db.close().await;
}

/// MariaDB: `outbox_log_slot_lag_transactions` counts what the server binlogged after the
/// acknowledged position — a few of the relay's own writes at most once it caught up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binlog_relay_reports_its_lag_in_transactions() {
    let memory = memory();
    let Some(db) = TestDb::binlog_mariadb("the_binlog_relay_reports_its_lag_in_transactions").await
    else {
        return;
    };
    // A table of its own: the labels (`outbox=binlog_outbox`) keep its counters apart.
    let outbox = Outbox::builder()
        .outbox_table("binlog_outbox")
        .build()
        .unwrap();
    schema::install(db.conn(), &outbox).await.unwrap();
    let broker = InProcessBroker::new();
    let slot = format!("t_{}", uuid::Uuid::now_v7().simple());
    let shutdown = CancellationToken::new();
    let relay = LogRelay::builder(db.conn().clone(), outbox.clone(), broker.clone())
        .slot(&slot)
        .connection_url(db.url())
        .heartbeat_interval(Duration::from_millis(100))
        .build()
        .unwrap();
    let task = tokio::spawn(relay.run(shutdown.clone()));
    let lag_key = format!("outbox_log_slot_lag_transactions{{outbox=binlog_outbox,slot={slot}}}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
    uow.raise(OrderingEvent::Noted {
        order_id: "o".into(),
        n: 0,
    });
    uow.commit().await.unwrap();
    assert!(broker.wait_for_published(1, Duration::from_secs(20)).await);
    // Other tests write to the shared server too: the lag is read every 100 ms, and is
    // small whenever the relay has caught up.
    loop {
        let lag = memory.gauge(&lag_key);
        if (0.0..=20.0).contains(&lag) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{lag_key} = {lag}: {:?}",
            memory.gauge_keys()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    shutdown.cancel();
    task.await.unwrap().unwrap();
    db.close().await;
}
