//! The relay on PostgreSQL specifically: the demo's scenario 5 (commit order differs from
//! insert order: a watermark loses a row, the status on the row does not) and the
//! `LISTEN` / `NOTIFY` wake-up, including a listener whose connection is killed.

// Scenarios are plain async functions called by #[tokio::test]s, which clippy's
// `allow-unwrap-in-tests` does not see as tests.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use outbox_core::in_process::InProcessBroker;
use outbox_core::{IntegrationEvent, Raise};
use outbox_seaorm::relay::Relay;
use outbox_seaorm::{Outbox, schema};
use outbox_tests::bookstore::{OrderNotedV2, OrderingContracts, OrderingEvent};
use outbox_tests::db::{Backend, TestDb, run_scenario};
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement, TransactionTrait};
use tokio_util::sync::CancellationToken;

async fn note(conn: &DatabaseConnection, outbox: &Outbox, order: &str, n: u32) {
    let uow = outbox.begin(conn, &OrderingContracts).await.unwrap();
    uow.raise(OrderingEvent::Noted {
        order_id: order.to_owned(),
        n,
    });
    uow.commit().await.unwrap();
}

async fn query_i64(db: &TestDb, sql: &str) -> Vec<i64> {
    db.conn()
        .query_all_raw(Statement::from_string(DbBackend::Postgres, sql))
        .await
        .unwrap()
        .iter()
        .map(|row| row.try_get_by_index::<i64>(0).unwrap())
        .collect()
}

/// Rows of the outbox matching `condition`, as `(seq, aggregate_id)`.
async fn read(db: &TestDb, condition: &str) -> Vec<(i64, String)> {
    db.conn()
        .query_all_raw(Statement::from_string(
            DbBackend::Postgres,
            format!("SELECT seq, aggregate_id FROM outbox WHERE {condition} ORDER BY seq"),
        ))
        .await
        .unwrap()
        .iter()
        .map(|row| {
            (
                row.try_get("", "seq").unwrap(),
                row.try_get("", "aggregate_id").unwrap(),
            )
        })
        .collect()
}

/// Scenario 5 (book: The demo): Ada's transaction takes `seq` 1 but commits after Alan's (`seq`
/// 2). A watermark relay (`seq > last`) publishes #2, moves its mark to 2 and never sees
/// #1; the relay, which keeps its progress on the row, publishes both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_5_commit_order_differs_from_insert_order() {
    run_scenario(
        Backend::Postgres,
        "scenario_5_commit_order_differs_from_insert_order",
        async |db: &TestDb| {
            let outbox = Outbox::default();
            schema::install(db.conn(), &outbox).await.unwrap();
            // Ada's COMMIT waits at a gate (a deferred trigger taking an advisory lock the
            // test holds), after her row got its `seq`.
            db.conn()
                .execute_unprepared(
                    "CREATE FUNCTION ada_gate() RETURNS trigger LANGUAGE plpgsql AS $$ \
                     BEGIN PERFORM pg_advisory_xact_lock_shared(4242); RETURN NULL; END $$; \
                     CREATE CONSTRAINT TRIGGER ada_gate AFTER INSERT ON outbox \
                     DEFERRABLE INITIALLY DEFERRED FOR EACH ROW \
                     WHEN (NEW.aggregate_id = 'ada') EXECUTE FUNCTION ada_gate()",
                )
                .await
                .unwrap();
            let gate = db.conn().begin().await.unwrap();
            gate.execute_unprepared("SELECT pg_advisory_xact_lock(4242)")
                .await
                .unwrap();

            eprintln!("5) High-water mark vs processed flag");
            let ada = tokio::spawn({
                let (conn, outbox) = (db.conn().clone(), outbox.clone());
                async move { note(&conn, &outbox, "ada", 1).await }
            });
            let started = Instant::now();
            while query_i64(
                db,
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted",
            )
            .await[0]
                == 0
            {
                assert!(started.elapsed() < Duration::from_secs(10), "Ada never reached COMMIT");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            note(db.conn(), &outbox, "alan", 1).await;
            let committed = read(db, "true").await;
            assert_eq!(committed, [(2, "alan".to_owned())], "Ada's row is not visible yet");
            eprintln!("  Ada got sequence 1 (not committed), Alan got 2 (committed)");

            // The watermark relay of the article, and the real relay, both run now.
            let broker = InProcessBroker::new();
            let mut relay = Relay::builder(db.conn().clone(), outbox.clone(), broker.clone())
                .build()
                .unwrap();
            let mut last_seen = 0;
            for (seq, who) in read(db, &format!("seq > {last_seen}")).await {
                eprintln!("  watermark relay publishes #{seq} {} ({who})", OrderNotedV2::EVENT_TYPE);
                last_seen = seq;
            }
            assert_eq!(last_seen, 2);
            assert_eq!(relay.drain().await.unwrap().published, 1);

            gate.commit().await.unwrap();
            ada.await.unwrap();
            let missed = read(db, &format!("seq > {last_seen}")).await;
            eprintln!(
                "  Ada's transaction commits; watermark relay asks for sequence > {last_seen}: {} rows",
                missed.len()
            );
            assert!(missed.is_empty(), "the watermark lost Ada's event");
            for (seq, who) in read(db, "status = 'pending'").await {
                eprintln!("  flag relay finds #{seq} {} ({who})", OrderNotedV2::EVENT_TYPE);
                assert_eq!((seq, who.as_str()), (1, "ada"));
            }
            assert_eq!(relay.drain().await.unwrap().published, 1);
            let published: Vec<String> = broker
                .published()
                .iter()
                .map(|e| e.aggregate_id.clone())
                .collect();
            assert_eq!(published, ["alan", "ada"], "both published, Ada's too");
        },
    )
    .await;
}

/// The `LISTEN` connection of a running relay (pid), once it listens.
async fn listener_pid(db: &TestDb, not: Option<i64>) -> i64 {
    let started = Instant::now();
    loop {
        let pids = query_i64(
            db,
            "SELECT pid::bigint FROM pg_stat_activity \
             WHERE datname = current_database() AND query LIKE 'LISTEN%'",
        )
        .await;
        if let Some(pid) = pids.into_iter().find(|pid| Some(*pid) != not) {
            return pid;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the relay does not LISTEN"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Commits a note and returns how long the broker waited for it.
async fn commit_to_publish(
    db: &TestDb,
    outbox: &Outbox,
    broker: &InProcessBroker,
    n: u32,
) -> Duration {
    let before = broker.len();
    let started = Instant::now();
    note(db.conn(), outbox, "order-1", n).await;
    assert!(
        broker
            .wait_for_published(before + 1, Duration::from_secs(5))
            .await,
        "not published within 5 s (the poll interval is 10 s)"
    );
    started.elapsed()
}

/// With a 10 s poll interval the relay still publishes within 100 ms of the commit, woken
/// by `NOTIFY`; when its `LISTEN` connection is killed it reconnects, polls, and is woken
/// again afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notify_wakes_the_relay_and_the_listener_reconnects() {
    run_scenario(
        Backend::Postgres,
        "notify_wakes_the_relay_and_the_listener_reconnects",
        async |db: &TestDb| {
            let outbox = Outbox::default();
            schema::install(db.conn(), &outbox).await.unwrap();
            let broker = InProcessBroker::new();
            let shutdown = CancellationToken::new();
            let relay = Relay::builder(db.conn().clone(), outbox.clone(), broker.clone())
                .poll_interval(Duration::from_secs(10))
                .build()
                .unwrap();
            let running = tokio::spawn(relay.run(shutdown.clone()));
            let pid = listener_pid(db, None).await;
            // Let the relay finish its first (empty) poll and go to sleep.
            tokio::time::sleep(Duration::from_millis(200)).await;

            for n in 0..3 {
                let latency = commit_to_publish(db, &outbox, &broker, n).await;
                eprintln!("  commit to publish: {latency:?}");
                assert!(latency < Duration::from_millis(100), "{latency:?}");
            }

            // Kill the listener's connection: the relay reconnects and polls at once, so a
            // commit made meanwhile is published long before the 10 s poll.
            query_i64(
                db,
                &format!("SELECT pg_terminate_backend({pid})::int::bigint"),
            )
            .await;
            let latency = commit_to_publish(db, &outbox, &broker, 3).await;
            eprintln!("  while reconnecting: {latency:?}");
            assert!(latency < Duration::from_secs(2), "{latency:?}");
            let new_pid = listener_pid(db, Some(pid)).await;
            assert_ne!(new_pid, pid);
            tokio::time::sleep(Duration::from_millis(200)).await;
            let latency = commit_to_publish(db, &outbox, &broker, 4).await;
            eprintln!("  after the reconnect: {latency:?}");
            assert!(latency < Duration::from_millis(100), "{latency:?}");

            shutdown.cancel();
            let report = running.await.unwrap().unwrap();
            assert_eq!(report.published, 5);
            let numbers: Vec<u32> = broker
                .published()
                .iter()
                .map(|e| e.decode::<OrderNotedV2>().unwrap().n)
                .collect();
            assert_eq!(numbers, [0, 1, 2, 3, 4]);
        },
    )
    .await;
}
