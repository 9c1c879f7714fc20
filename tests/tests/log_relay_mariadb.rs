//! The log relay on MariaDB's binary log (issue 34), against a private server with the
//! binlog on (`outbox_tests::binlog_mariadb`).

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use outbox_core::in_process::InProcessBroker;
use outbox_core::{Envelope, Raise};
use outbox_seaorm::Outbox;
use outbox_seaorm::ops::Operations;
use outbox_seaorm::record::OutboxRecord;
use outbox_seaorm::relay::log::{LogRelay, LogRelayBuilder, LogRelayError};
use outbox_seaorm::schema;
use outbox_tests::binlog_mariadb::BinlogMariaDb;
use outbox_tests::bookstore::{OrderingContracts, OrderingEvent};
use outbox_tests::db::{Backend, TestDb};
use sea_orm::{ConnectionTrait, DbBackend, Statement, TransactionTrait as _};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use outbox_tests::log_relay_cases::{Running, WAIT, eventually, note, notes, wait_for};

/// A fresh database with the outbox installed, on the shared binlog server.
async fn binlog_db(test: &str) -> Option<(TestDb, Outbox)> {
    logs();
    let db = TestDb::binlog_mariadb(test).await?;
    let outbox = Outbox::default();
    schema::install(db.conn(), &outbox).await.expect("install");
    Some((db, outbox))
}

/// The relay's logs on the test's output when `RUST_LOG` asks for them.
fn logs() {
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .try_init();
    }
}

/// A fresh database with the outbox installed on `server`.
async fn db_on(server: &BinlogMariaDb) -> (TestDb, Outbox) {
    logs();
    let db = TestDb::server_at(
        outbox_tests::Service::MariaDb,
        Backend::MariaDb,
        server.admin_url(),
    )
    .await;
    let outbox = Outbox::default();
    schema::install(db.conn(), &outbox).await.expect("install");
    (db, outbox)
}

/// A slot name of the test's own (its replica server id derives from it).
fn slot_name() -> String {
    format!("t_{}", Uuid::now_v7().simple())
}

fn log_relay(
    db: &TestDb,
    outbox: &Outbox,
    broker: &InProcessBroker,
    slot: &str,
) -> LogRelayBuilder<InProcessBroker> {
    LogRelay::builder(db.conn().clone(), outbox.clone(), broker.clone())
        .slot(slot)
        .connection_url(db.url())
        .heartbeat_interval(Duration::from_millis(200))
        .feedback_interval(Duration::from_millis(50))
}

/// One value of a query's first row and column, as text.
async fn scalar(db: &TestDb, sql: &str) -> Option<String> {
    let row = db
        .conn()
        .query_one_raw(Statement::from_string(DbBackend::MySql, sql.to_owned()))
        .await
        .unwrap()?;
    row.try_get_by_index::<Option<String>>(0)
        .or_else(|_| {
            row.try_get_by_index::<Option<i64>>(0)
                .map(|n| n.map(|n| n.to_string()))
        })
        .unwrap()
}

/// Waits until the slot's first start finished its backfill (from then on the relay streams
/// from the snapshot's position).
async fn wait_for_backfill(db: &TestDb, slot: &str) {
    let query = format!(
        "SELECT CAST(backfilled_at IS NOT NULL AS SIGNED) FROM outbox_log_slots WHERE slot = '{slot}'"
    );
    eventually(&format!("slot {slot} was never backfilled"), async || {
        scalar(db, &query).await.as_deref() == Some("1")
    })
    .await;
}

/// The stored position of `slot`.
async fn stored_position(db: &TestDb, slot: &str) -> Option<String> {
    scalar(
        db,
        &format!("SELECT acknowledged_lsn FROM outbox_log_slots WHERE slot = '{slot}'"),
    )
    .await
}

/// The value of a server variable.
async fn variable(db: &TestDb, name: &str) -> String {
    let row = db
        .conn()
        .query_one_raw(Statement::from_string(
            DbBackend::MySql,
            format!("SELECT @@{name}"),
        ))
        .await
        .unwrap()
        .unwrap();
    row.try_get_by_index::<String>(0)
        .or_else(|_| row.try_get_by_index::<i64>(0).map(|n| n.to_string()))
        .or_else(|_| row.try_get_by_index::<u64>(0).map(|n| n.to_string()))
        .unwrap()
}

/// The tests' server writes the binary log the relay needs, and a dedicated one survives a
/// restart with its data.
#[tokio::test]
async fn the_test_server_writes_a_row_image_binlog_and_restarts() {
    let test = "the_test_server_writes_a_row_image_binlog_and_restarts";
    let Some(db) = TestDb::binlog_mariadb(test).await else {
        return;
    };
    assert_eq!(variable(&db, "log_bin").await, "1");
    assert_eq!(variable(&db, "binlog_format").await, "ROW");
    assert_eq!(variable(&db, "binlog_row_image").await, "FULL");
    assert_eq!(variable(&db, "binlog_row_metadata").await, "FULL");
    db.close().await;

    let Some(mut server) = BinlogMariaDb::dedicated(test, &["--server-id=7"]).await else {
        return;
    };
    let restarted = TestDb::server_at(
        outbox_tests::Service::MariaDb,
        outbox_tests::db::Backend::MariaDb,
        server.admin_url(),
    )
    .await;
    restarted
        .conn()
        .execute_unprepared("CREATE TABLE kept (id INT PRIMARY KEY); INSERT INTO kept VALUES (1)")
        .await
        .unwrap();
    assert_eq!(variable(&restarted, "server_id").await, "7");
    server.restart().await;
    let count = restarted
        .conn()
        .query_one_raw(Statement::from_string(
            DbBackend::MySql,
            "SELECT COUNT(*) FROM kept",
        ))
        .await
        .unwrap()
        .unwrap()
        .try_get_by_index::<i64>(0)
        .unwrap();
    assert_eq!(count, 1, "{}", server.log());
    restarted.close().await;
}

/// Rows pending at the first start are published first (the backfill), each once; then the
/// binlog streams in commit order: a transaction that inserted first and committed second
/// is published second, whatever `seq` says. The published envelopes are the stored ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_rows_are_backfilled_then_the_binlog_streams_in_commit_order() {
    let Some((db, outbox)) =
        binlog_db("pending_rows_are_backfilled_then_the_binlog_streams_in_commit_order").await
    else {
        return;
    };
    let pending = note(&db, &outbox, "pending", 0, 3).await;
    let broker = InProcessBroker::new();
    let slot = slot_name();
    let relay = Running::start(log_relay(&db, &outbox, &broker, &slot).build().unwrap());
    wait_for(&broker, 3).await;
    wait_for_backfill(&db, &slot).await;
    assert_eq!(broker.message_ids(), pending, "backfilled in seq order");

    // Inserted first (the lower `seq`), committed last.
    let late = db.conn().begin().await.unwrap();
    let uow = outbox.begin(&late, &OrderingContracts).await.unwrap();
    uow.raise(OrderingEvent::Noted {
        order_id: "late".into(),
        n: 0,
    });
    uow.commit().await.unwrap();
    note(&db, &outbox, "early", 0, 2).await;
    wait_for(&broker, 5).await;
    late.commit().await.unwrap();
    wait_for(&broker, 6).await;
    assert_eq!(
        notes(&broker.published()[3..]),
        [("early".into(), 0), ("early".into(), 1), ("late".into(), 0)]
    );
    let mut stored: Vec<OutboxRecord> = OutboxRecord::list(db.conn(), &outbox, 10).await.unwrap();
    stored.sort_by_key(|record| record.seq);
    assert_eq!(
        stored[3].envelope.aggregate_id, "late",
        "the late row has the lower seq"
    );
    let mut published = broker.published();
    published.sort_by_key(|envelope| envelope.message_id);
    let mut expected: Vec<Envelope> = stored.into_iter().map(|record| record.envelope).collect();
    expected.sort_by_key(|envelope| envelope.message_id);
    assert_eq!(published, expected, "the stored envelopes, each once");
    // `outbox status` shows the slot: its active relay, backfilled, its stored position.
    let status = Operations::new(db.conn().clone(), outbox.clone())
        .status()
        .await
        .unwrap();
    let shown = status
        .log_relay
        .expect("the log relay's slots in the status");
    assert_eq!(shown.slots.len(), 1, "{shown:?}");
    assert_eq!(shown.slots[0].slot, slot);
    assert!(
        shown.slots[0].streaming && shown.slots[0].backfilled,
        "{shown:?}"
    );
    assert!(shown.slots[0].active_relay.is_some(), "{shown:?}");
    let report = relay.stop().await;
    assert_eq!(report.published, 6, "{report:?}");
    assert_eq!(report.backfilled, 3, "{report:?}");
    assert!(
        stored_position(&db, &slot)
            .await
            .is_some_and(|p| p.contains('-'))
    );
    db.close().await;
}

/// A graceful stop stores the confirmed position: a restart streams only what was committed
/// after it. A crash before the position was stored republishes from the stored one, with
/// the same message ids, and loses nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_resumes_after_the_stored_position_and_a_crash_redelivers_the_same_ids() {
    let Some((db, outbox)) = binlog_db(
        "a_restart_resumes_after_the_stored_position_and_a_crash_redelivers_the_same_ids",
    )
    .await
    else {
        return;
    };
    let broker = InProcessBroker::new();
    let slot = slot_name();
    let relay = Running::start(log_relay(&db, &outbox, &broker, &slot).build().unwrap());
    wait_for_backfill(&db, &slot).await;
    let first = note(&db, &outbox, "o", 0, 3).await;
    wait_for(&broker, 3).await;
    relay.stop().await;
    let stopped_at = stored_position(&db, &slot).await.unwrap();
    let second = note(&db, &outbox, "o", 3, 2).await;

    // The broker takes the next batch and never answers: the process dies between the
    // broker's confirmation and the stored position.
    broker.crash_after_next_publish(outbox_core::in_process::AfterPublish::Hang);
    let relay = Running::start(
        log_relay(&db, &outbox, &broker, &slot)
            .publish_timeout(Duration::from_secs(60))
            .build()
            .unwrap(),
    );
    eventually("the broker took a batch", async || broker.hangs() == 1).await;
    let taken = broker.message_ids();
    assert!(
        taken.len() > 3 && taken[3..].iter().zip(&second).all(|(a, b)| a == b),
        "only the later rows: {taken:?}"
    );
    relay.crash().await;
    assert_eq!(stored_position(&db, &slot).await.unwrap(), stopped_at);
    // The crashed relay's lease runs out.
    db.conn()
        .execute_unprepared(&format!(
            "UPDATE outbox_log_slots SET lease_expires_at = UTC_TIMESTAMP(6) WHERE slot = '{slot}'"
        ))
        .await
        .unwrap();
    let after = InProcessBroker::new();
    let relay = Running::start(log_relay(&db, &outbox, &after, &slot).build().unwrap());
    wait_for(&after, 2).await;
    let third = note(&db, &outbox, "o", 5, 1).await;
    wait_for(&after, 3).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let report = relay.stop().await;
    let expected: Vec<Uuid> = second.iter().chain(&third).copied().collect();
    assert_eq!(
        after.message_ids(),
        expected,
        "redelivered with the same ids, then the rest"
    );
    assert_eq!(report.published, 3, "{report:?}");
    assert_eq!(first.len(), 3);
    db.close().await;
}

/// A row the relay cannot read (its version disagrees with its event type) is dead-lettered
/// with what could be read of it, and the stream moves on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_row_is_dead_lettered_and_the_stream_moves_on() {
    let Some((db, outbox)) =
        binlog_db("an_unreadable_row_is_dead_lettered_and_the_stream_moves_on").await
    else {
        return;
    };
    let bad = note(&db, &outbox, "bad", 0, 1).await;
    for statement in [
        "CREATE TABLE bad_rows AS SELECT * FROM outbox",
        "DELETE FROM outbox",
        "UPDATE bad_rows SET version = 9",
    ] {
        db.conn().execute_unprepared(statement).await.unwrap();
    }
    let broker = InProcessBroker::new();
    let slot = slot_name();
    let relay = Running::start(log_relay(&db, &outbox, &broker, &slot).build().unwrap());
    wait_for_backfill(&db, &slot).await;
    db.conn()
        .execute_unprepared("INSERT INTO outbox SELECT * FROM bad_rows")
        .await
        .unwrap();
    let good = note(&db, &outbox, "good", 0, 1).await;
    wait_for(&broker, 1).await;
    assert_eq!(broker.message_ids(), good);
    let report = relay.stop().await;
    assert_eq!(report.dead_lettered, 1, "{report:?}");
    let ops = Operations::new(db.conn().clone(), outbox.clone());
    let dead = ops
        .log_dead_letters(Some(&slot), None, None, 10)
        .await
        .unwrap();
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0].message_id, Some(bad[0]));
    assert_eq!(dead[0].aggregate_id, "bad");
    assert!(dead[0].error.contains("version"), "{}", dead[0].error);
    db.close().await;
}

/// The machine's MariaDB runs without a binlog: the relay refuses to start and says what
/// to set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_a_binlog_is_refused() {
    let Some(db) = TestDb::mariadb("a_server_without_a_binlog_is_refused").await else {
        return;
    };
    let outbox = Outbox::default();
    schema::install(db.conn(), &outbox).await.unwrap();
    let broker = InProcessBroker::new();
    let relay = log_relay(&db, &outbox, &broker, &slot_name())
        .build()
        .unwrap();
    let error = Running::start(relay).error().await;
    assert!(
        matches!(
            &error,
            LogRelayError::BinlogSetting {
                variable: "log_bin",
                ..
            }
        ),
        "{error}"
    );
    assert!(error.to_string().contains("--log-bin"), "{error}");
    db.close().await;
}

/// The binlogs holding the stored position are purged while the relay is stopped: it
/// stops with an error that says so and how to recover; the reset recovers from the table
/// (the pending rows, backfilled from a new snapshot), and the stream goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purged_binlogs_stop_the_relay_until_the_position_is_reset() {
    let Some(server) = BinlogMariaDb::dedicated(
        "purged_binlogs_stop_the_relay_until_the_position_is_reset",
        &[],
    )
    .await
    else {
        return;
    };
    let (db, outbox) = db_on(&server).await;
    let broker = InProcessBroker::new();
    let slot = slot_name();
    let relay = Running::start(log_relay(&db, &outbox, &broker, &slot).build().unwrap());
    wait_for_backfill(&db, &slot).await;
    note(&db, &outbox, "o", 0, 1).await;
    wait_for(&broker, 1).await;
    // The reset is refused while a relay holds the slot's lease, and for an unknown slot.
    let (code, _, err) =
        outbox_tests::ops_cli::run(&db, &outbox, &["outbox", "log-reset", &slot]).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("holds its lease"), "{err}");
    let (code, _, err) =
        outbox_tests::ops_cli::run(&db, &outbox, &["outbox", "log-reset", "no_such_slot"]).await;
    assert_eq!(code, 2, "{err}");
    relay.stop().await;
    // Another client's writes, then the binlogs up to them are purged.
    let missed = note(&db, &outbox, "o", 1, 2).await;
    db.conn()
        .execute_unprepared("FLUSH BINARY LOGS")
        .await
        .unwrap();
    // A binlog InnoDB has not checkpointed yet is kept by `PURGE`: until the current file
    // is the only one.
    eventually("the binlogs were purged", async || {
        let file = scalar(&db, "SHOW MASTER STATUS").await.unwrap();
        db.conn()
            .execute_unprepared(&format!("PURGE BINARY LOGS TO '{file}'"))
            .await
            .unwrap();
        let files = db
            .conn()
            .query_all_raw(Statement::from_string(DbBackend::MySql, "SHOW BINARY LOGS"))
            .await
            .unwrap();
        files.len() == 1
    })
    .await;
    note(&db, &outbox, "o", 3, 1).await;

    let relay = Running::start(log_relay(&db, &outbox, &broker, &slot).build().unwrap());
    let error = relay.error().await;
    assert!(
        matches!(&error, LogRelayError::PositionPurged { slot: s, .. } if *s == slot),
        "{error}"
    );
    assert!(error.to_string().contains("log-reset"), "{error}");
    assert_eq!(broker.len(), 1, "nothing published meanwhile");

    // The documented step: `outbox log-reset SLOT`.
    let (code, out, err) =
        outbox_tests::ops_cli::run(&db, &outbox, &["outbox", "log-reset", &slot]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("position forgotten"), "{out}");
    assert_eq!(stored_position(&db, &slot).await, None);
    let relay = Running::start(log_relay(&db, &outbox, &broker, &slot).build().unwrap());
    // The table's pending rows: the one published before (again, same id), the missed two,
    // the last one; then the stream.
    wait_for(&broker, 5).await;
    wait_for_backfill(&db, &slot).await;
    let after = note(&db, &outbox, "o", 4, 1).await;
    wait_for(&broker, 6).await;
    let ids = broker.message_ids();
    assert_eq!(ids[0], ids[1], "the first row again, with its id");
    assert_eq!(&ids[2..4], missed.as_slice());
    assert_eq!(ids[5], after[0]);
    let report = relay.stop().await;
    assert_eq!(report.backfilled, 4, "{report:?}");
    db.close().await;
}

/// The dump connection killed (`KILL`), the binlog rotated (`FLUSH BINARY LOGS`) while a
/// transaction is open, the server restarted: the relay reconnects from its position each
/// time, and every row arrives once, in commit order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_dump_a_rotation_and_a_server_restart_lose_nothing() {
    let Some(mut server) = BinlogMariaDb::dedicated(
        "a_killed_dump_a_rotation_and_a_server_restart_lose_nothing",
        &[],
    )
    .await
    else {
        return;
    };
    let (db, outbox) = db_on(&server).await;
    let broker = InProcessBroker::new();
    let slot = slot_name();
    let relay = Running::start(log_relay(&db, &outbox, &broker, &slot).build().unwrap());
    wait_for_backfill(&db, &slot).await;
    let mut expected = note(&db, &outbox, "o", 0, 1).await;
    wait_for(&broker, 1).await;

    // KILL: the dump thread goes; the relay reconnects.
    let dump = "SELECT id FROM information_schema.processlist WHERE command = 'Binlog Dump'";
    eventually("a binlog dump runs", async || {
        scalar(&db, dump).await.is_some()
    })
    .await;
    let id = scalar(&db, dump).await.unwrap();
    db.conn()
        .execute_unprepared(&format!("KILL {id}"))
        .await
        .unwrap();
    expected.extend(note(&db, &outbox, "o", 1, 2).await);
    wait_for(&broker, 3).await;

    // A rotation between a transaction's first insert and its commit.
    let open = db.conn().begin().await.unwrap();
    let uow = outbox.begin(&open, &OrderingContracts).await.unwrap();
    uow.raise(OrderingEvent::Noted {
        order_id: "o".into(),
        n: 3,
    });
    let rotated = uow.commit().await.unwrap().message_ids;
    db.conn()
        .execute_unprepared("FLUSH BINARY LOGS")
        .await
        .unwrap();
    open.commit().await.unwrap();
    expected.extend(rotated);
    wait_for(&broker, 4).await;

    // The server restarts under the relay.
    server.restart().await;
    let reconnected = async {
        loop {
            let uow = match outbox.begin(db.conn(), &OrderingContracts).await {
                Ok(uow) => uow,
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            uow.raise(OrderingEvent::Noted {
                order_id: "o".into(),
                n: 4,
            });
            match uow.commit().await {
                Ok(report) => break report.message_ids,
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    };
    expected.extend(tokio::time::timeout(WAIT, reconnected).await.unwrap());
    wait_for(&broker, 5).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let report = relay.stop().await;
    assert_eq!(broker.message_ids(), expected, "each once, in commit order");
    assert!(report.restarts >= 2, "{report:?}");
    db.close().await;
}

/// The variables that make [`binlog_relay_process`] run a relay.
const CHILD_URL: &str = "OUTBOX_BINLOG_RELAY_CHILD_URL";
const CHILD_SLOT: &str = "OUTBOX_BINLOG_RELAY_CHILD_SLOT";

/// Not a test of its own: the relay **process** that
/// `a_standby_takes_over_after_sigkill_of_the_relay_process` starts and kills (this test
/// binary run again with `--ignored --exact binlog_relay_process`). Without its variables
/// it returns at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a child process of a_standby_takes_over_after_sigkill_of_the_relay_process"]
async fn binlog_relay_process() {
    let (Ok(url), Ok(slot)) = (std::env::var(CHILD_URL), std::env::var(CHILD_SLOT)) else {
        return;
    };
    let db = sea_orm::Database::connect(&url).await.unwrap();
    let relay = LogRelay::builder(db, Outbox::default(), InProcessBroker::new())
        .slot(slot)
        .connection_url(url)
        .instance_id("child-process")
        .lease_ttl(Duration::from_secs(2))
        .heartbeat_interval(Duration::from_millis(200))
        .build()
        .unwrap();
    // Runs until killed.
    relay.run(CancellationToken::new()).await.unwrap();
}

/// The active log relay is a process of its own; SIGKILL ends it without a word (no final
/// position stored, no lease release). The standby in this process takes the slot over
/// within the lease TTL and publishes what comes next (and what the dead one had not
/// stored, with the same ids); nothing is invented.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_takes_over_after_sigkill_of_the_relay_process() {
    let test = "a_standby_takes_over_after_sigkill_of_the_relay_process";
    let Some((db, outbox)) = binlog_db(test).await else {
        return;
    };
    let slot = slot_name();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "binlog_relay_process",
            "--nocapture",
        ])
        .env(CHILD_URL, db.url())
        .env(CHILD_SLOT, &slot)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let owner = format!(
        "SELECT owner FROM outbox_log_slots WHERE slot = '{slot}' \
         AND lease_expires_at > UTC_TIMESTAMP(6)"
    );
    eventually("the relay process never took the slot", async || {
        scalar(&db, &owner).await.as_deref() == Some("child-process")
    })
    .await;
    wait_for_backfill(&db, &slot).await;
    let ttl = Duration::from_secs(2);
    let broker = InProcessBroker::new();
    let standby = Running::start(
        log_relay(&db, &outbox, &broker, &slot)
            .lease_ttl(ttl)
            .instance_id("standby")
            .build()
            .unwrap(),
    );
    let before = note(&db, &outbox, "a", 0, 3).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(broker.is_empty(), "the standby stands by");
    child.kill().unwrap(); // SIGKILL
    let killed = std::time::Instant::now();
    child.wait().unwrap();
    let after = note(&db, &outbox, "a", 3, 2).await;
    assert!(
        broker
            .wait_until(WAIT, |b| b.message_ids().ends_with(&after))
            .await,
        "the standby published {:?}",
        broker.message_ids()
    );
    let took = killed.elapsed();
    assert_eq!(scalar(&db, &owner).await.as_deref(), Some("standby"));
    let ids = broker.message_ids();
    assert!(
        ids.iter()
            .all(|id| before.contains(id) || after.contains(id)),
        "nothing invented: {ids:?}"
    );
    eprintln!(
        "standby published {} events {took:?} after SIGKILL of the relay process (TTL {ttl:?})",
        ids.len()
    );
    assert!(
        took < ttl + Duration::from_secs(2),
        "took over after {took:?}"
    );
    standby.stop().await;
    db.close().await;
}

/// A payload that is not JSON, written by hand past the unit of work, is refused by the
/// outbox table itself (the schema's `json` columns check `json_valid` on MariaDB), so it
/// cannot reach the log; the relay goes on publishing. (Headers that are JSON but not an
/// object are read as no headers, as the polling relay reads them; a row of an unknown
/// envelope version is dead-lettered: `an_unreadable_row_is_dead_lettered_and_the_stream_moves_on`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payload_that_is_not_json_cannot_reach_the_log() {
    let Some((db, outbox)) = binlog_db("a_payload_that_is_not_json_cannot_reach_the_log").await
    else {
        return;
    };
    let broker = InProcessBroker::new();
    let slot = slot_name();
    let relay = Running::start(log_relay(&db, &outbox, &broker, &slot).build().unwrap());
    wait_for_backfill(&db, &slot).await;
    let before = note(&db, &outbox, "before", 0, 1).await;
    wait_for(&broker, 1).await;
    let refused = db
        .conn()
        .execute_unprepared("UPDATE outbox SET payload = '{not json'")
        .await;
    assert!(
        refused.is_err(),
        "a payload that is not JSON never reaches the table"
    );
    let after = note(&db, &outbox, "after", 0, 1).await;
    wait_for(&broker, 2).await;
    assert_eq!(broker.message_ids(), [before, after].concat());
    let report = relay.stop().await;
    assert_eq!(report.dead_lettered, 0, "{report:?}");
    db.close().await;
}

/// The outbox table renamed under a running relay: writes fail meanwhile (the unit of work
/// cannot write a table that is gone), the relay keeps streaming without an error, and once
/// the table is back what is committed is published; nothing committed is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_outbox_renamed_under_the_relay_loses_nothing() {
    let Some((db, outbox)) = binlog_db("the_outbox_renamed_under_the_relay_loses_nothing").await
    else {
        return;
    };
    let broker = InProcessBroker::new();
    let slot = slot_name();
    let relay = Running::start(log_relay(&db, &outbox, &broker, &slot).build().unwrap());
    wait_for_backfill(&db, &slot).await;
    let first = note(&db, &outbox, "o", 0, 2).await;
    wait_for(&broker, 2).await;
    db.conn()
        .execute_unprepared("RENAME TABLE outbox TO outbox_away")
        .await
        .unwrap();
    // Rows written to the renamed table are another table's: not the outbox's events.
    for statement in [
        "CREATE TABLE copied_rows AS SELECT * FROM outbox_away LIMIT 1",
        "UPDATE copied_rows SET seq = seq + 1000000, message_id = UUID(), \
         aggregate_id = 'elsewhere'",
        "INSERT INTO outbox_away SELECT * FROM copied_rows",
    ] {
        db.conn().execute_unprepared(statement).await.unwrap();
    }
    let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
    uow.raise(OrderingEvent::Noted {
        order_id: "lost?".into(),
        n: 0,
    });
    assert!(
        uow.commit().await.is_err(),
        "no outbox table: nothing commits"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    db.conn()
        .execute_unprepared("RENAME TABLE outbox_away TO outbox")
        .await
        .unwrap();
    let later = note(&db, &outbox, "o", 2, 2).await;
    wait_for(&broker, 4).await;
    assert_eq!(broker.message_ids(), [first, later].concat());
    let report = relay.stop().await;
    assert_eq!(report.dead_lettered, 0, "{report:?}");
    db.close().await;
}

/// A stored position from another server (a domain this one never wrote) is refused at
/// start with the typed error that says how to recover. (MariaDB itself accepts it and
/// streams nothing: the relay stalled silently before the check.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_position_from_another_server_is_refused() {
    let Some((db, outbox)) = binlog_db("a_position_from_another_server_is_refused").await else {
        return;
    };
    let broker = InProcessBroker::new();
    let slot = slot_name();
    let relay = Running::start(log_relay(&db, &outbox, &broker, &slot).build().unwrap());
    wait_for_backfill(&db, &slot).await;
    relay.stop().await;
    db.conn()
        .execute_unprepared(&format!(
            "UPDATE outbox_log_slots SET acknowledged_lsn = '7-99-12345' WHERE slot = '{slot}'"
        ))
        .await
        .unwrap();
    note(&db, &outbox, "o", 0, 1).await;
    let relay = Running::start(log_relay(&db, &outbox, &broker, &slot).build().unwrap());
    let error = relay.error().await;
    assert!(
        matches!(&error, LogRelayError::ForeignPosition { position, .. } if position == "7-99-12345"),
        "{error}"
    );
    assert!(broker.is_empty(), "nothing streamed from elsewhere");
    db.close().await;
}

/// The sequence number of replication domain 0 in a GTID position (`0-1-42,…`).
fn domain_0_sequence(position: &str) -> Option<u64> {
    position
        .split(',')
        .find_map(|gtid| gtid.strip_prefix("0-"))
        .and_then(|rest| rest.rsplit('-').next())
        .map(|sequence| sequence.parse().unwrap())
}

/// The sequence number of the server's last transaction in replication domain 0.
async fn binlog_sequence(db: &TestDb) -> u64 {
    domain_0_sequence(&variable(db, "gtid_binlog_pos").await).unwrap_or(0)
}

/// An idle relay stores its last batch's position at once (a crash then redelivers
/// nothing), and afterwards writes only with its lease: its own position and lease writes
/// are binlog transactions too, which it must not chase (it wrote its position about ten
/// times a second on an idle server).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_relay_stores_its_last_batch_then_writes_only_with_its_lease() {
    let Some(server) = BinlogMariaDb::dedicated(
        "an_idle_relay_stores_its_last_batch_then_writes_only_with_its_lease",
        &[],
    )
    .await
    else {
        return;
    };
    let (db, outbox) = db_on(&server).await;
    let broker = InProcessBroker::new();
    let slot = slot_name();
    // The lease is renewed every 3 s.
    let quiet = |broker: &InProcessBroker| {
        log_relay(&db, &outbox, broker, &slot)
            .lease_ttl(Duration::from_secs(9))
            .build()
            .unwrap()
    };
    let relay = Running::start(quiet(&broker));
    wait_for_backfill(&db, &slot).await;
    let first = note(&db, &outbox, "a", 0, 3).await;
    let committed = binlog_sequence(&db).await;
    wait_for(&broker, 3).await;
    eventually("the last batch's position stored", async || {
        stored_position(&db, &slot)
            .await
            .and_then(|stored| domain_0_sequence(&stored))
            .is_some_and(|sequence| sequence >= committed)
    })
    .await;
    let before = binlog_sequence(&db).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let written = binlog_sequence(&db).await - before;
    eprintln!("an idle relay wrote {written} transactions in 3 s");
    assert!(
        written <= 4,
        "an idle relay wrote {written} transactions in 3 s (one lease renewal is two)"
    );
    relay.crash().await;
    let later = note(&db, &outbox, "a", 3, 1).await;
    // `outbox status`: the slot's lag is what the server binlogged after the stored
    // position, the later commit among it.
    let stored_sequence = domain_0_sequence(&stored_position(&db, &slot).await.unwrap()).unwrap();
    let expected_lag = binlog_sequence(&db).await - stored_sequence;
    let status = Operations::new(db.conn().clone(), outbox.clone())
        .status()
        .await
        .unwrap();
    let slots = status.log_relay.expect("the log relay's slots").slots;
    assert_eq!(slots[0].lag_transactions, Some(expected_lag), "{slots:?}");
    assert!(expected_lag >= 1, "{slots:?}");
    assert_eq!(slots[0].lag_bytes, None);
    let after = InProcessBroker::new();
    let relay = Running::start(quiet(&after));
    wait_for(&after, 1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    relay.stop().await;
    assert_eq!(broker.message_ids(), first);
    assert_eq!(after.message_ids(), later, "nothing redelivered");
    db.close().await;
    drop(server);
}

/// Message mode is PostgreSQL's: on MariaDB its commit writes nothing and says so, and the
/// log relay refuses such an outbox.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_mode_is_refused_on_mariadb() {
    use outbox_seaorm::{CommitError, WriteMode};
    let Some((db, _)) = binlog_db("message_mode_is_refused_on_mariadb").await else {
        return;
    };
    let outbox = Outbox::builder()
        .write_mode(WriteMode::message())
        .build()
        .unwrap();
    let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
    uow.raise(OrderingEvent::Noted {
        order_id: "a".into(),
        n: 0,
    });
    let error = uow.commit().await.unwrap_err();
    assert!(
        matches!(
            error,
            CommitError::WriteModeUnsupported {
                mode: "message",
                backend: "MySQL / MariaDB"
            }
        ),
        "{error}"
    );
    assert!(error.to_string().contains("WriteMode::table()"), "{error}");
    assert_eq!(OutboxRecord::count(db.conn(), &outbox).await.unwrap(), 0);
    let refused = log_relay(&db, &outbox, &InProcessBroker::new(), &slot_name()).build();
    let Err(error) = refused else {
        panic!("a message-mode outbox was accepted on MariaDB");
    };
    assert!(
        matches!(&error, LogRelayError::NotPostgres { backend } if backend.contains("message-mode")),
        "{error}"
    );
    db.close().await;
}

/// A real user without the binlog privileges: the relay refuses to start and names what is
/// missing; with `REPLICATION SLAVE` alone, `BINLOG MONITOR`; with both, it streams.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_without_binlog_privileges_is_refused() {
    let Some((db, outbox)) = binlog_db("a_user_without_binlog_privileges_is_refused").await else {
        return;
    };
    let database = db.url().rsplit('/').next().unwrap().to_owned();
    let user = format!("relay_{}", &Uuid::now_v7().simple().to_string()[20..]);
    for host in ["%", "localhost"] {
        for statement in [
            format!("CREATE USER '{user}'@'{host}'"),
            format!("GRANT ALL PRIVILEGES ON `{database}`.* TO '{user}'@'{host}'"),
        ] {
            db.conn().execute_unprepared(&statement).await.unwrap();
        }
    }
    let url = db.url().replacen("root@", &format!("{user}@"), 1);
    let as_user = sea_orm::Database::connect(&url).await.unwrap();
    let broker = InProcessBroker::new();
    let slot = slot_name();
    let relay = || {
        LogRelay::builder(as_user.clone(), outbox.clone(), broker.clone())
            .slot(&slot)
            .connection_url(&url)
            .heartbeat_interval(Duration::from_millis(200))
            .feedback_interval(Duration::from_millis(50))
            .build()
            .unwrap()
    };
    let error = Running::start(relay()).error().await;
    assert!(
        matches!(&error, LogRelayError::NoBinlogPrivilege { missing, user: u }
            if missing == "REPLICATION SLAVE and BINLOG MONITOR" && u.contains(&user)),
        "{error}"
    );
    for host in ["%", "localhost"] {
        db.conn()
            .execute_unprepared(&format!(
                "GRANT REPLICATION SLAVE ON *.* TO '{user}'@'{host}'"
            ))
            .await
            .unwrap();
    }
    let error = Running::start(relay()).error().await;
    assert!(
        matches!(&error, LogRelayError::NoBinlogPrivilege { missing, .. } if missing == "BINLOG MONITOR"),
        "{error}"
    );
    assert!(error.to_string().contains("GRANT"), "{error}");
    for host in ["%", "localhost"] {
        db.conn()
            .execute_unprepared(&format!("GRANT BINLOG MONITOR ON *.* TO '{user}'@'{host}'"))
            .await
            .unwrap();
    }
    let running = Running::start(relay());
    wait_for_backfill(&db, &slot).await;
    let ids = note(&db, &outbox, "a", 0, 2).await;
    wait_for(&broker, 2).await;
    assert_eq!(broker.message_ids(), ids);
    running.stop().await;
    as_user.close().await.unwrap();
    for host in ["%", "localhost"] {
        db.conn()
            .execute_unprepared(&format!("DROP USER '{user}'@'{host}'"))
            .await
            .unwrap();
    }
    db.close().await;
}

/// An event type longer than its column: a strict server refuses the row (nothing is
/// written); a non-strict one truncates it, and the relay dead-letters the truncated,
/// unversioned type with the error, and the stream moves on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_type_over_the_column_limit_is_refused_or_dead_lettered() {
    let Some((db, outbox)) =
        binlog_db("an_event_type_over_the_column_limit_is_refused_or_dead_lettered").await
    else {
        return;
    };
    let long = note(&db, &outbox, "long", 0, 1).await;
    let lengthen = "UPDATE long_rows SET event_type = CONCAT(REPEAT('x.', 150), event_type)";
    for statement in [
        "CREATE TABLE long_rows AS SELECT * FROM outbox".to_owned(),
        "DELETE FROM outbox".to_owned(),
        format!("SET STATEMENT sql_mode = '' FOR {lengthen}"),
    ] {
        db.conn().execute_unprepared(&statement).await.unwrap();
    }
    let strict = db.conn().execute_unprepared(lengthen).await;
    assert!(
        strict
            .as_ref()
            .is_err_and(|e| e.to_string().contains("too long")),
        "a strict server refuses it: {strict:?}"
    );
    let broker = InProcessBroker::new();
    let slot = slot_name();
    let relay = Running::start(log_relay(&db, &outbox, &broker, &slot).build().unwrap());
    wait_for_backfill(&db, &slot).await;
    db.conn()
        .execute_unprepared("INSERT INTO outbox SELECT * FROM long_rows")
        .await
        .unwrap();
    let good = note(&db, &outbox, "good", 0, 1).await;
    wait_for(&broker, 1).await;
    assert_eq!(broker.message_ids(), good);
    let ops = Operations::new(db.conn().clone(), outbox.clone());
    eventually("the truncated row dead-lettered", async || {
        !ops.log_dead_letters(Some(&slot), None, None, 10)
            .await
            .unwrap()
            .is_empty()
    })
    .await;
    let dead = ops
        .log_dead_letters(Some(&slot), None, None, 10)
        .await
        .unwrap();
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0].message_id, Some(long[0]));
    assert_eq!(dead[0].event_type.chars().count(), 255, "{dead:?}");
    assert!(dead[0].error.contains("event_type"), "{}", dead[0].error);
    let report = relay.stop().await;
    assert_eq!(report.dead_lettered, 1, "{report:?}");
    db.close().await;
}

// The cases both log sources run (`outbox_tests::log_relay_cases`).
outbox_tests::log_relay_case!(
    remove_after_insert_keeps_the_table_empty,
    open = binlog_db,
    slot = slot_name,
    relay = log_relay,
    live = wait_for_backfill
);
outbox_tests::log_relay_case!(
    a_poison_event_parks_only_its_aggregate_until_requeued_or_skipped,
    open = binlog_db,
    slot = slot_name,
    relay = log_relay,
    live = wait_for_backfill
);
outbox_tests::log_relay_case!(
    the_command_line_shows_and_requeues_log_dead_letters,
    open = binlog_db,
    slot = slot_name,
    relay = log_relay,
    live = wait_for_backfill
);
outbox_tests::log_relay_case!(
    scheduled_events_go_out_at_their_time_not_at_commit,
    open = binlog_db,
    slot = slot_name,
    relay = log_relay,
    live = wait_for_backfill
);
outbox_tests::log_relay_case!(
    a_snoozed_job_waits_in_the_scheduled_table,
    open = binlog_db,
    slot = slot_name,
    relay = log_relay,
    live = wait_for_backfill
);
