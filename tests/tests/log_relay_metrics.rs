//! The log relay's metrics (book: Operations): the write mode, the slot's lag and
//! `wal_status`, commit → publish latency, published events. A test binary of its own, since
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_relay_emits_its_metrics() {
    let memory = Memory::install();
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
