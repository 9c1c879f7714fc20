//! The log relay (`outbox_seaorm::relay::log`) against a real `wal_level = logical`
//! PostgreSQL cluster of the tests' own (`outbox_tests::logical_pg`): commit order, the
//! envelopes it carries, acknowledgement and redelivery across crashes and restarts, the
//! idle heartbeat, and the start-up checks.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use outbox_core::in_process::InProcessBroker;
use outbox_core::{Envelope, Raise};
use outbox_seaorm::record::OutboxRecord;
use outbox_seaorm::relay::log::{LogRelay, LogRelayBuilder, LogRelayError};
use outbox_seaorm::schema;
use outbox_seaorm::{Outbox, WriteMode};
use outbox_tests::bookstore::{OrderNotedV2, OrderingContracts, OrderingEvent};
use outbox_tests::db::TestDb;
use sea_orm::{ConnectionTrait, Statement, TransactionTrait as _};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use outbox_tests::log_relay_cases::{Running, WAIT, eventually, note, notes, wait_for};

async fn logical_db(test: &str) -> Option<(TestDb, Outbox)> {
    let db = TestDb::logical_postgres(test).await?;
    let outbox = Outbox::default();
    schema::install(db.conn(), &outbox).await.expect("install");
    Some((db, outbox))
}

/// A slot name of the test's own (slots are cluster-wide).
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
        .heartbeat_interval(Duration::from_millis(200))
        .feedback_interval(Duration::from_millis(50))
}

/// Waits until the slot exists and is streamed from.
async fn wait_for_active_slot(db: &TestDb, slot: &str) {
    // A slot being created is active before its snapshot exists (it waits for the
    // transactions running then to end): what commits meanwhile is in the snapshot, i.e.
    // backfilled rather than streamed. Its confirmed position is set once it exists.
    let query = format!(
        "SELECT active AND confirmed_flush_lsn IS NOT NULL AS active \
         FROM pg_replication_slots WHERE slot_name = '{slot}'"
    );
    eventually(&format!("slot {slot} never became active"), async || {
        let row = db
            .conn()
            .query_one_raw(Statement::from_string(
                db.conn().get_database_backend(),
                query.clone(),
            ))
            .await
            .unwrap();
        row.is_some_and(|row| row.try_get::<bool>("", "active").unwrap_or(false))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_commit_is_published_in_commit_order() {
    let Some((db, outbox)) = logical_db("a_late_commit_is_published_in_commit_order").await else {
        return;
    };
    // The late row, written (before the slot exists) and set aside with its `seq`.
    note(&db, &outbox, "late", 0, 1).await;
    for statement in [
        "CREATE TABLE late_rows AS SELECT * FROM outbox",
        "DELETE FROM outbox",
    ] {
        db.conn().execute_unprepared(statement).await.unwrap();
    }
    let broker = InProcessBroker::new();
    let slot = slot_name();
    let relay = Running::start(log_relay(&db, &outbox, &broker, &slot).build().unwrap());
    wait_for_active_slot(&db, &slot).await;

    // Inserted first (the lower `seq`), committed last.
    let late = db.conn().begin().await.unwrap();
    late.execute_unprepared("INSERT INTO outbox SELECT * FROM late_rows")
        .await
        .unwrap();
    note(&db, &outbox, "early", 0, 2).await;
    wait_for(&broker, 2).await;
    late.commit().await.unwrap();
    wait_for(&broker, 3).await;

    assert_eq!(
        notes(&broker.published()),
        [("early".into(), 0), ("early".into(), 1), ("late".into(), 0)]
    );
    let seqs: Vec<(String, i64)> = OutboxRecord::list(db.conn(), &outbox, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|record| (record.envelope.aggregate_id.clone(), record.seq))
        .collect();
    assert_eq!(
        seqs[0].0, "late",
        "the late row has the lowest seq: {seqs:?}"
    );
    let report = relay.stop().await;
    assert_eq!(report.published, 3, "{report:?}");
    assert_eq!(report.dead_lettered, 0, "{report:?}");
    db.close().await;
}

/// What the log relay publishes is the envelope the table holds, field for field (the
/// polling relay's reading of the same row).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_published_envelope_is_the_stored_one() {
    let Some((db, outbox)) = logical_db("the_published_envelope_is_the_stored_one").await else {
        return;
    };
    let broker = InProcessBroker::new();
    let slot = slot_name();
    let relay = Running::start(log_relay(&db, &outbox, &broker, &slot).build().unwrap());
    wait_for_active_slot(&db, &slot).await;
    let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
    uow.raise(OrderingEvent::Noted {
        order_id: "o-1".into(),
        n: 7,
    });
    uow.raise(OrderingEvent::Noted {
        order_id: "o-2 \"quoted\" ünicode".into(),
        n: 8,
    });
    uow.commit().await.unwrap();
    wait_for(&broker, 2).await;
    let stored: Vec<Envelope> = OutboxRecord::list(db.conn(), &outbox, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|record| record.envelope)
        .collect();
    assert_eq!(broker.published(), stored);
    // PostgreSQL 15: the publication lists the envelope's columns only.
    let columns: String = db
        .conn()
        .query_one_raw(Statement::from_string(
            db.conn().get_database_backend(),
            format!(
                "SELECT array_to_string(attnames, ',') AS columns FROM pg_publication_tables \
                 WHERE pubname = '{slot}'"
            ),
        ))
        .await
        .unwrap()
        .unwrap()
        .try_get("", "columns")
        .unwrap();
    assert_eq!(
        columns,
        "message_id,event_type,version,aggregate_type,aggregate_id,correlation_id,\
         causation_id,traceparent,tracestate,headers,occurred_at,payload"
    );
    relay.stop().await;
    db.close().await;
}

/// A crash after the broker confirmed but before the acknowledgement reached the server:
/// the next relay publishes the same events again, with the same message ids, and nothing
/// else is lost or invented.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_before_the_acknowledgement_redelivers_the_same_ids() {
    let Some((db, outbox)) =
        logical_db("a_crash_before_the_acknowledgement_redelivers_the_same_ids").await
    else {
        return;
    };
    let broker = InProcessBroker::new();
    let slot = slot_name();
    // The broker records the batch and never answers: the process dies between the
    // broker's confirmation and the acknowledgement.
    broker.crash_after_next_publish(outbox_core::in_process::AfterPublish::Hang);
    let relay = Running::start(
        log_relay(&db, &outbox, &broker, &slot)
            .lease_ttl(Duration::from_secs(1))
            .publish_timeout(Duration::from_secs(60))
            .build()
            .unwrap(),
    );
    wait_for_active_slot(&db, &slot).await;
    let first = note(&db, &outbox, "o", 0, 3).await;
    eventually("the broker took a batch", async || broker.hangs() == 1).await;
    relay.crash().await;
    // The batch the broker took (all three events, or the first ones if the relay took
    // the batch before the rest of the transaction arrived).
    let taken = broker.message_ids();
    assert!(
        !taken.is_empty() && taken.iter().zip(&first).all(|(a, b)| a == b),
        "{taken:?}"
    );
    let second = note(&db, &outbox, "o", 3, 2).await;

    let after = InProcessBroker::new();
    let relay = Running::start(log_relay(&db, &outbox, &after, &slot).build().unwrap());
    wait_for(&after, 5).await;
    let report = relay.stop().await;
    let expected: Vec<Uuid> = first.iter().chain(&second).copied().collect();
    assert_eq!(
        after.message_ids(),
        expected,
        "redelivered with the same ids, then the rest"
    );
    assert_eq!(report.published, 5, "{report:?}");
    db.close().await;
}

/// A graceful stop acknowledges what was confirmed: a restart streams only what was
/// committed after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_resumes_after_the_acknowledged_position() {
    let Some((db, outbox)) = logical_db("a_restart_resumes_after_the_acknowledged_position").await
    else {
        return;
    };
    let broker = InProcessBroker::new();
    let slot = slot_name();
    let relay = Running::start(
        log_relay(&db, &outbox, &broker, &slot)
            .feedback_interval(Duration::from_secs(3600))
            .heartbeat_interval(Duration::from_secs(3600))
            .build()
            .unwrap(),
    );
    wait_for_active_slot(&db, &slot).await;
    note(&db, &outbox, "o", 0, 3).await;
    wait_for(&broker, 3).await;
    let first = relay.stop().await;
    assert!(first.acknowledged_lsn > 0, "{first:?}");
    let later = note(&db, &outbox, "o", 3, 2).await;

    let relay = Running::start(log_relay(&db, &outbox, &broker, &slot).build().unwrap());
    wait_for(&broker, 5).await;
    // Nothing old comes back within a few heartbeats.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let report = relay.stop().await;
    assert_eq!(broker.len(), 5, "{:?}", notes(&broker.published()));
    assert_eq!(&broker.message_ids()[3..], later.as_slice());
    assert_eq!(report.published, 2, "{report:?}");
    db.close().await;
}

/// An idle outbox does not pin WAL: 20 MB written to another table leave the relay's slot
/// near the server's position (its heartbeats are acknowledged), while a slot nobody
/// streams from falls 20 MB behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_heartbeat_keeps_an_idle_slot_near_the_head() {
    let Some((db, outbox)) = logical_db("the_heartbeat_keeps_an_idle_slot_near_the_head").await
    else {
        return;
    };
    let broker = InProcessBroker::new();
    let slot = slot_name();
    let idle = slot_name();
    db.conn()
        .execute_unprepared(&format!(
            "SELECT pg_create_logical_replication_slot('{idle}', 'pgoutput')"
        ))
        .await
        .unwrap();
    let relay = Running::start(log_relay(&db, &outbox, &broker, &slot).build().unwrap());
    wait_for_active_slot(&db, &slot).await;
    db.conn()
        .execute_unprepared(
            "CREATE TABLE ballast (id serial PRIMARY KEY, body text); \
             INSERT INTO ballast (body) SELECT repeat('x', 1000) FROM generate_series(1, 20000)",
        )
        .await
        .unwrap();
    let lag = async |name: &str| -> i64 {
        let row = db
            .conn()
            .query_one_raw(Statement::from_string(
                db.conn().get_database_backend(),
                format!(
                    "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::int8 AS lag \
                     FROM pg_replication_slots WHERE slot_name = '{name}'"
                ),
            ))
            .await
            .unwrap()
            .unwrap();
        row.try_get("", "lag").unwrap()
    };
    eventually(
        "the relay's slot stayed more than 1 MB behind",
        async || lag(&slot).await < 1_000_000,
    )
    .await;
    let theirs = lag(&idle).await;
    assert!(
        theirs > 20_000_000,
        "the idle slot is {theirs} bytes behind"
    );
    let report = relay.stop().await;
    assert!(report.heartbeats > 0, "{report:?}");
    assert_eq!(broker.len(), 0);
    db.conn()
        .execute_unprepared(&format!("SELECT pg_drop_replication_slot('{idle}')"))
        .await
        .unwrap();
    db.close().await;
}

/// Start-up checks with clear errors: the machine's own PostgreSQL runs with
/// `wal_level = replica`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_logical_decoding_is_refused() {
    let Some(db) = TestDb::postgres("a_server_without_logical_decoding_is_refused").await else {
        return;
    };
    let outbox = Outbox::default();
    schema::install(db.conn(), &outbox).await.unwrap();
    let level: String = db
        .conn()
        .query_one_raw(Statement::from_string(
            db.conn().get_database_backend(),
            "SELECT current_setting('wal_level') AS level",
        ))
        .await
        .unwrap()
        .unwrap()
        .try_get("", "level")
        .unwrap();
    let relay = LogRelay::builder(db.conn().clone(), outbox, InProcessBroker::new())
        .slot(slot_name())
        .build()
        .unwrap();
    let result = tokio::time::timeout(WAIT, relay.run(CancellationToken::new()))
        .await
        .expect("a refused start returns at once");
    if level == "logical" {
        panic!("this check needs a server with wal_level below logical (found {level})");
    }
    let error = result.unwrap_err();
    assert!(
        matches!(&error, LogRelayError::WalLevel { found } if *found == level),
        "{error}"
    );
    assert!(error.to_string().contains("wal_level = logical"), "{error}");
    db.close().await;
}

/// A role without the `REPLICATION` privilege is refused with the statement that fixes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_without_replication_is_refused() {
    let Some((db, outbox)) = logical_db("a_role_without_replication_is_refused").await else {
        return;
    };
    let role = format!("r_{}", Uuid::now_v7().simple());
    db.conn()
        .execute_unprepared(&format!(
            "CREATE ROLE {role} LOGIN NOREPLICATION; GRANT ALL ON ALL TABLES IN SCHEMA public TO {role}"
        ))
        .await
        .unwrap();
    let url = db
        .url()
        .replacen("postgres://postgres@", &format!("postgres://{role}@"), 1);
    let conn = sea_orm::Database::connect(&url).await.unwrap();
    let relay = LogRelay::builder(conn.clone(), outbox, InProcessBroker::new())
        .slot(slot_name())
        .build()
        .unwrap();
    let error = tokio::time::timeout(WAIT, relay.run(CancellationToken::new()))
        .await
        .expect("a refused start returns at once")
        .unwrap_err();
    assert!(
        matches!(&error, LogRelayError::NoReplicationPrivilege { role: r } if *r == role),
        "{error}"
    );
    assert!(error.to_string().contains("WITH REPLICATION"), "{error}");
    conn.close().await.unwrap();
    db.close().await;
}

/// Bad settings and other backends are refused by `build`.
#[tokio::test]
async fn bad_settings_are_refused_by_build() {
    let db = TestDb::sqlite_memory().await;
    let error = LogRelay::builder(db.conn().clone(), Outbox::default(), InProcessBroker::new())
        .slot("s")
        .build()
        .unwrap_err();
    assert!(
        matches!(error, LogRelayError::NotPostgres { .. }),
        "{error}"
    );
    db.close().await;
    let Some((db, outbox)) = logical_db("bad_settings_are_refused_by_build").await else {
        return;
    };
    let builder = || LogRelay::builder(db.conn().clone(), outbox.clone(), InProcessBroker::new());
    for (result, setting) in [
        (builder().build(), "slot"),
        (builder().slot("Bad-Name").build(), "slot"),
        (
            builder().slot("ok").publication("p; DROP").build(),
            "publication",
        ),
        (builder().slot("ok").batch_size(0).build(), "batch_size"),
        (builder().slot("ok").max_attempts(0).build(), "max_attempts"),
        (
            builder()
                .slot("ok")
                .heartbeat_interval(Duration::ZERO)
                .build(),
            "heartbeat_interval",
        ),
    ] {
        match result {
            Err(LogRelayError::Config { setting: s, .. }) => assert_eq!(s, setting),
            other => panic!("{setting}: expected a config error, got {other:?}"),
        }
    }
    db.close().await;
}

/// Commits `count` notes in `outbox`'s write mode and waits until `broker` has `total`.
async fn commit_and_wait(
    db: &TestDb,
    outbox: &Outbox,
    broker: &InProcessBroker,
    order: &str,
    count: u32,
    total: usize,
) -> Vec<Uuid> {
    let ids = note(db, outbox, order, 0, count).await;
    wait_for(broker, total).await;
    ids
}

async fn outbox_rows(db: &TestDb) -> i64 {
    db.conn()
        .query_one_raw(Statement::from_string(
            db.conn().get_database_backend(),
            "SELECT count(*)::int8 AS n FROM outbox",
        ))
        .await
        .unwrap()
        .unwrap()
        .try_get("", "n")
        .unwrap()
}

/// Message mode: the commit writes transactional logical messages and no row; the log
/// relay publishes them in commit order, and a rolled-back unit of work emits nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_mode_publishes_without_a_table_row() {
    let Some((db, _)) = logical_db("message_mode_publishes_without_a_table_row").await else {
        return;
    };
    let outbox = Outbox::builder()
        .write_mode(WriteMode::message())
        .build()
        .unwrap();
    let broker = InProcessBroker::new();
    let slot = slot_name();
    let relay = Running::start(log_relay(&db, &outbox, &broker, &slot).build().unwrap());
    wait_for_active_slot(&db, &slot).await;

    let rolled_back = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
    rolled_back.raise(OrderingEvent::Noted {
        order_id: "ghost".into(),
        n: 0,
    });
    rolled_back.rollback().await.unwrap();
    let first = commit_and_wait(&db, &outbox, &broker, "a", 3, 3).await;
    let second = commit_and_wait(&db, &outbox, &broker, "b", 2, 5).await;
    assert_eq!(outbox_rows(&db).await, 0, "message mode writes no row");
    let expected: Vec<Uuid> = first.iter().chain(&second).copied().collect();
    assert_eq!(broker.message_ids(), expected);
    assert!(
        notes(&broker.published())
            .iter()
            .all(|(order, _)| order != "ghost")
    );
    let report = relay.stop().await;
    assert_eq!(report.published, 5, "{report:?}");
    db.close().await;
}

/// The modes that only the log relay reads are refused where they cannot work: a commit on
/// another database (nothing written, business rows rolled back), and a polling relay.
#[tokio::test]
async fn log_only_write_modes_are_refused_elsewhere() {
    use outbox_seaorm::relay::{Relay, RelayConfigError};
    use outbox_seaorm::{CommitError, schema};
    for mode in [
        WriteMode::message(),
        WriteMode::table_removed_after_insert(),
    ] {
        let db = TestDb::sqlite_memory().await;
        let outbox = Outbox::builder().write_mode(mode.clone()).build().unwrap();
        schema::install(db.conn(), &outbox).await.unwrap();
        let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
        uow.raise(OrderingEvent::Noted {
            order_id: "a".into(),
            n: 0,
        });
        let error = uow.commit().await.unwrap_err();
        assert!(
            matches!(error, CommitError::WriteModeUnsupported { mode: m, backend: "SQLite" } if m == mode.as_str()),
            "{error}"
        );
        assert_eq!(OutboxRecord::count(db.conn(), &outbox).await.unwrap(), 0);
        let refused = Relay::builder(db.conn().clone(), outbox, InProcessBroker::new()).build();
        assert!(
            matches!(refused, Err(RelayConfigError::WriteMode { .. })),
            "{refused:?}"
        );
        db.close().await;
    }
    assert!(
        Outbox::builder()
            .write_mode(WriteMode::message_with_prefix("two words"))
            .build()
            .is_err()
    );
}

/// A new slot publishes the rows that were pending in the table before it existed (its
/// exported snapshot), then streams: switching from the polling relay loses nothing, and
/// rows the polling relay had published are not sent again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_slot_backfills_the_pending_rows_first() {
    use outbox_seaorm::relay::Relay;
    let Some((db, outbox)) = logical_db("a_new_slot_backfills_the_pending_rows_first").await else {
        return;
    };
    // The polling relay published the first two, then stopped; three more wait in the table.
    let polled = InProcessBroker::new();
    let published = note(&db, &outbox, "a", 0, 2).await;
    let report = Relay::builder(db.conn().clone(), outbox.clone(), polled.clone())
        .build()
        .unwrap()
        .drain()
        .await
        .unwrap();
    assert_eq!(report.published, 2);
    let waiting = note(&db, &outbox, "a", 2, 3).await;

    let broker = InProcessBroker::new();
    let slot = slot_name();
    let relay = Running::start(log_relay(&db, &outbox, &broker, &slot).build().unwrap());
    wait_for(&broker, 3).await;
    let streamed = note(&db, &outbox, "a", 5, 2).await;
    wait_for(&broker, 5).await;
    let report = relay.stop().await;
    let expected: Vec<Uuid> = waiting.iter().chain(&streamed).copied().collect();
    assert_eq!(
        broker.message_ids(),
        expected,
        "backfill, then the stream, in order"
    );
    assert!(
        published
            .iter()
            .all(|id| !broker.message_ids().contains(id))
    );
    assert_eq!(report.backfilled, 3, "{report:?}");
    assert_eq!(report.published, 5, "{report:?}");
    db.close().await;
}

/// A crash in the middle of the backfill: the next start drops the half-backfilled slot,
/// creates a new one and backfills again — everything arrives, some twice with the same
/// ids, nothing is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_backfill_starts_again() {
    let Some((db, outbox)) = logical_db("an_interrupted_backfill_starts_again").await else {
        return;
    };
    let waiting = note(&db, &outbox, "a", 0, 4).await;
    let hanging = InProcessBroker::new();
    hanging.pause();
    let slot = slot_name();
    let relay = Running::start(log_relay(&db, &outbox, &hanging, &slot).build().unwrap());
    assert!(
        hanging.wait_for_waiting(1, WAIT).await,
        "the backfill reached the broker"
    );
    relay.crash().await;
    // Committed while no relay runs: after the first slot's snapshot.
    let later = note(&db, &outbox, "a", 4, 1).await;

    let broker = InProcessBroker::new();
    let relay = Running::start(log_relay(&db, &outbox, &broker, &slot).build().unwrap());
    wait_for(&broker, 5).await;
    let report = relay.stop().await;
    let expected: Vec<Uuid> = waiting.iter().chain(&later).copied().collect();
    assert_eq!(broker.message_ids(), expected);
    assert_eq!(report.backfilled, 5, "{report:?}");
    db.close().await;
}

/// Switching back from the log relay to the polling relay: stop the log relay, start the
/// polling relay. The log relay leaves rows `pending`, so the polling relay publishes every
/// row still in the table — those the log relay sent arrive a second time with the same
/// ids (the consumers' inboxes skip them) — and nothing is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switching_back_to_the_polling_relay_loses_nothing() {
    use outbox_seaorm::relay::Relay;
    let Some((db, outbox)) = logical_db("switching_back_to_the_polling_relay_loses_nothing").await
    else {
        return;
    };
    let broker = InProcessBroker::new();
    let slot = slot_name();
    let relay = Running::start(log_relay(&db, &outbox, &broker, &slot).build().unwrap());
    let first = note(&db, &outbox, "a", 0, 3).await;
    wait_for(&broker, 3).await;
    relay.stop().await;
    let second = note(&db, &outbox, "a", 3, 2).await;
    let polled = InProcessBroker::new();
    let report = Relay::builder(db.conn().clone(), outbox.clone(), polled.clone())
        .build()
        .unwrap()
        .drain()
        .await
        .unwrap();
    assert_eq!(report.published, 5);
    let expected: Vec<Uuid> = first.iter().chain(&second).copied().collect();
    assert_eq!(polled.message_ids(), expected);
    assert_eq!(OutboxRecord::count(db.conn(), &outbox).await.unwrap(), 0);
    db.close().await;
}

/// Two log relays on one slot: one streams, the other stands by on the slot's lease; when
/// the active one dies without a word, the standby takes over within the lease TTL and
/// publishes what was not acknowledged and what comes next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_takes_over_within_the_lease_ttl() {
    let Some((db, outbox)) = logical_db("a_standby_takes_over_within_the_lease_ttl").await else {
        return;
    };
    let slot = slot_name();
    let ttl = Duration::from_secs(2);
    let active_broker = InProcessBroker::new();
    let standby_broker = InProcessBroker::new();
    let active = Running::start(
        log_relay(&db, &outbox, &active_broker, &slot)
            .lease_ttl(ttl)
            .instance_id("active")
            .build()
            .unwrap(),
    );
    wait_for_active_slot(&db, &slot).await;
    let standby = Running::start(
        log_relay(&db, &outbox, &standby_broker, &slot)
            .lease_ttl(ttl)
            .instance_id("standby")
            .build()
            .unwrap(),
    );
    let first = note(&db, &outbox, "a", 0, 2).await;
    wait_for(&active_broker, 2).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        standby_broker.is_empty(),
        "the standby publishes nothing while the active runs"
    );
    let killed = std::time::Instant::now();
    active.crash().await;
    let second = note(&db, &outbox, "a", 2, 2).await;
    assert!(
        standby_broker
            .wait_until(WAIT, |b| b.message_ids().ends_with(&second))
            .await,
        "the standby published {:?}",
        standby_broker.message_ids()
    );
    let took = killed.elapsed();
    assert!(
        took < ttl + Duration::from_secs(2),
        "took over after {took:?}"
    );
    assert!(
        standby_broker
            .message_ids()
            .iter()
            .all(|id| first.contains(id) || second.contains(id))
    );
    eprintln!("standby took over {took:?} after the active relay died (TTL {ttl:?})");
    standby.stop().await;
    db.close().await;
}

/// A slot another consumer streams from (here `pg_recvlogical`) answers SQLSTATE 55006:
/// the relay waits ("another relay is active") instead of failing, and streams once the
/// slot is free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_in_use_is_waited_for() {
    let Some((db, outbox)) = logical_db("a_slot_in_use_is_waited_for").await else {
        return;
    };
    let slot = slot_name();
    let broker = InProcessBroker::new();
    let quick = || {
        log_relay(&db, &outbox, &broker, &slot)
            .lease_ttl(Duration::from_secs(1))
            .backoff(
                outbox_core::policy::Backoff::new()
                    .with_min_delay(Duration::from_millis(100))
                    .with_max_delay(Duration::from_millis(200))
                    .with_jitter(false),
            )
            .build()
            .unwrap()
    };
    // The relay creates its slot, then stops; another consumer takes the slot.
    let creating = Running::start(quick());
    wait_for_active_slot(&db, &slot).await;
    creating.stop().await;
    let active =
        format!("SELECT 1 AS one FROM pg_replication_slots WHERE slot_name = '{slot}' AND active");
    eventually("the relay's walsender exits", async || {
        db.conn()
            .query_one_raw(Statement::from_string(
                db.conn().get_database_backend(),
                active.clone(),
            ))
            .await
            .unwrap()
            .is_none()
    })
    .await;
    let address = db
        .url()
        .trim_start_matches("postgres://postgres@")
        .to_owned();
    let (host_port, database) = address.split_once('/').unwrap();
    let (host, port) = host_port.split_once(':').unwrap();
    let bindir = outbox_tests::logical_pg::bindir().unwrap();
    let mut other = std::process::Command::new(bindir.join("pg_recvlogical"))
        .args(["-h", host, "-p", port, "-U", "postgres", "-d", database])
        .args(["--slot", &slot, "--start", "-f", "/dev/null"])
        .args([
            "-o",
            "proto_version=1",
            "-o",
            &format!("publication_names={slot}"),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_for_active_slot(&db, &slot).await;
    let relay = Running::start(quick());
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(!relay.is_finished(), "55006 is not fatal");
    other.kill().unwrap();
    other.wait().unwrap();
    let ids = note(&db, &outbox, "a", 0, 2).await;
    wait_for(&broker, 2).await;
    assert_eq!(broker.message_ids(), ids);
    let report = relay.stop().await;
    assert!(report.restarts > 0, "it waited: {report:?}");
    db.close().await;
}

/// A slot of the relay's name that this outbox's relay did not create is never dropped nor
/// adopted: the relay stops and says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_slot_is_refused() {
    let Some((db, outbox)) = logical_db("a_foreign_slot_is_refused").await else {
        return;
    };
    let slot = slot_name();
    db.conn()
        .execute_unprepared(&format!(
            "SELECT pg_create_logical_replication_slot('{slot}', 'pgoutput')"
        ))
        .await
        .unwrap();
    let relay = log_relay(&db, &outbox, &InProcessBroker::new(), &slot)
        .build()
        .unwrap();
    let error = tokio::time::timeout(WAIT, relay.run(CancellationToken::new()))
        .await
        .expect("refused at once")
        .unwrap_err();
    assert!(
        matches!(error, LogRelayError::ForeignSlot { .. }),
        "{error}"
    );
    let still_there = db
        .conn()
        .query_one_raw(Statement::from_string(
            db.conn().get_database_backend(),
            format!("SELECT 1 AS one FROM pg_replication_slots WHERE slot_name = '{slot}'"),
        ))
        .await
        .unwrap();
    assert!(still_there.is_some(), "the foreign slot was not dropped");
    db.close().await;
}

/// A slot the server invalidated (its WAL passed `max_slot_wal_keep_size` while no relay
/// ran) stops the relay with an error that says how to recover; the recovery it describes
/// — drop the slot, start again — publishes the rows committed meanwhile from the table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalidated_slot_stops_the_relay_and_is_recovered() {
    use outbox_tests::logical_pg::LogicalPostgres;
    let test = "an_invalidated_slot_stops_the_relay_and_is_recovered";
    let Some(cluster) = LogicalPostgres::dedicated(
        test,
        &[
            ("max_slot_wal_keep_size", "1MB"),
            ("max_wal_size", "64MB"),
            ("min_wal_size", "32MB"),
        ],
    )
    .await
    else {
        return;
    };
    let db = TestDb::server_at(
        outbox_tests::Service::Postgres,
        outbox_tests::db::Backend::Postgres,
        cluster.admin_url(),
    )
    .await;
    let outbox = Outbox::default();
    schema::install(db.conn(), &outbox).await.unwrap();
    let broker = InProcessBroker::new();
    let slot = slot_name();
    let relay = Running::start(log_relay(&db, &outbox, &broker, &slot).build().unwrap());
    let first = note(&db, &outbox, "a", 0, 1).await;
    wait_for(&broker, 1).await;
    relay.stop().await;
    // Committed while no relay runs, then enough WAL to lose the slot.
    let meanwhile = note(&db, &outbox, "a", 1, 2).await;
    db.conn()
        .execute_unprepared(
            "CREATE TABLE ballast (body text); \
             INSERT INTO ballast SELECT repeat(md5(i::text), 32) FROM generate_series(1, 60000) i",
        )
        .await
        .unwrap();
    let status = async || -> String {
        db.conn()
            .query_one_raw(Statement::from_string(
                db.conn().get_database_backend(),
                format!("SELECT wal_status FROM pg_replication_slots WHERE slot_name = '{slot}'"),
            ))
            .await
            .unwrap()
            .unwrap()
            .try_get("", "wal_status")
            .unwrap()
    };
    for _ in 0..20 {
        db.conn()
            .execute_unprepared("SELECT pg_switch_wal(); CHECKPOINT")
            .await
            .unwrap();
        if status().await == "lost" {
            break;
        }
        db.conn()
            .execute_unprepared("INSERT INTO ballast SELECT body FROM ballast LIMIT 20000")
            .await
            .unwrap();
    }
    assert_eq!(status().await, "lost", "the slot was invalidated");

    let relay = log_relay(&db, &outbox, &broker, &slot).build().unwrap();
    let error = tokio::time::timeout(WAIT, relay.run(CancellationToken::new()))
        .await
        .expect("an invalidated slot stops the relay at once")
        .unwrap_err();
    assert!(
        matches!(error, LogRelayError::SlotInvalidated { .. }),
        "{error}"
    );
    let advice = error.to_string();
    assert!(advice.contains("pg_drop_replication_slot"), "{advice}");

    // The recovery the error describes.
    db.conn()
        .execute_unprepared(&format!("SELECT pg_drop_replication_slot('{slot}')"))
        .await
        .unwrap();
    let relay = Running::start(log_relay(&db, &outbox, &broker, &slot).build().unwrap());
    let after = note(&db, &outbox, "a", 3, 1).await;
    assert!(
        broker
            .wait_until(WAIT, |b| b.message_ids().ends_with(&after))
            .await,
        "{:?}",
        broker.message_ids()
    );
    relay.stop().await;
    let ids = broker.message_ids();
    for id in first.iter().chain(&meanwhile).chain(&after) {
        assert!(ids.contains(id), "{id} lost");
    }
    db.close().await;
    drop(cluster);
}

/// The variables that make [`log_relay_process`] run a relay.
const CHILD_URL: &str = "OUTBOX_LOG_RELAY_CHILD_URL";
const CHILD_SLOT: &str = "OUTBOX_LOG_RELAY_CHILD_SLOT";

/// Not a test of its own: the relay **process** that
/// `a_standby_takes_over_after_sigkill_of_the_relay_process` starts and kills (this test
/// binary run again with `--ignored --exact log_relay_process`). Without its variables it
/// returns at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a child process of a_standby_takes_over_after_sigkill_of_the_relay_process"]
async fn log_relay_process() {
    let (Ok(url), Ok(slot)) = (std::env::var(CHILD_URL), std::env::var(CHILD_SLOT)) else {
        return;
    };
    let db = sea_orm::Database::connect(&url).await.unwrap();
    let relay = LogRelay::builder(db, Outbox::default(), InProcessBroker::new())
        .slot(slot)
        .instance_id("child-process")
        .lease_ttl(Duration::from_secs(2))
        .heartbeat_interval(Duration::from_millis(200))
        .build()
        .unwrap();
    // Runs until killed.
    relay.run(CancellationToken::new()).await.unwrap();
}

/// The active log relay is a process of its own; SIGKILL ends it without a word (no final
/// acknowledgement, no lease release). The standby in this process takes the slot over
/// within the lease TTL and publishes what comes next (and what the dead one had not
/// acknowledged, with the same ids).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_takes_over_after_sigkill_of_the_relay_process() {
    let test = "a_standby_takes_over_after_sigkill_of_the_relay_process";
    let Some((db, outbox)) = logical_db(test).await else {
        return;
    };
    let slot = slot_name();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "log_relay_process", "--nocapture"])
        .env(CHILD_URL, db.url())
        .env(CHILD_SLOT, &slot)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let owner = async || -> Option<String> {
        db.conn()
            .query_one_raw(Statement::from_string(
                db.conn().get_database_backend(),
                format!(
                    "SELECT owner FROM outbox_log_slots WHERE slot = '{slot}' \
                     AND lease_expires_at > clock_timestamp()"
                ),
            ))
            .await
            .ok()
            .flatten()
            .and_then(|row| row.try_get::<Option<String>>("", "owner").ok().flatten())
    };
    eventually("the relay process never took the slot", async || {
        owner().await.as_deref() == Some("child-process")
    })
    .await;
    wait_for_active_slot(&db, &slot).await;
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
    assert_eq!(owner().await.as_deref(), Some("standby"));
    let ids = broker.message_ids();
    assert!(
        ids.iter()
            .all(|id| before.contains(id) || after.contains(id)),
        "nothing invented"
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

/// In table mode the log relay leaves rows `pending`; its retention deletes those written
/// more than the retention before the last acknowledged commit, and keeps the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_retention_purges_streamed_rows() {
    use outbox_core::clock::ManualClock;
    let Some((db, _)) = logical_db("the_retention_purges_streamed_rows").await else {
        return;
    };
    // Rows stamped two days ago (and committed now), then rows stamped now.
    let clock = std::sync::Arc::new(ManualClock::starting_at(
        chrono::Utc::now() - chrono::TimeDelta::days(2),
    ));
    let old = Outbox::builder().clock(clock.clone()).build().unwrap();
    let broker = InProcessBroker::new();
    let slot = slot_name();
    let relay = Running::start(
        log_relay(&db, &old, &broker, &slot)
            .purge_interval(Duration::from_millis(100))
            .build()
            .unwrap(),
    );
    wait_for_active_slot(&db, &slot).await;
    note(&db, &old, "a", 0, 3).await;
    clock.set(chrono::Utc::now());
    let recent = note(&db, &old, "a", 3, 2).await;
    wait_for(&broker, 5).await;
    eventually("the old rows purged, the recent ones kept", async || {
        outbox_rows(&db).await == 2
    })
    .await;
    let left: Vec<Uuid> = OutboxRecord::list(db.conn(), &old, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|record| record.envelope.message_id)
        .collect();
    assert_eq!(left, recent, "the recent rows stay (pending)");
    relay.stop().await;
    let refused = LogRelay::builder(db.conn().clone(), old.clone(), InProcessBroker::new())
        .slot("x")
        .retention(Some(Duration::from_secs(5)))
        .build();
    assert!(matches!(
        refused,
        Err(LogRelayError::Config {
            setting: "retention",
            ..
        })
    ));
    db.close().await;
}

/// Any publisher: in job-queue mode the log relay runs each event as a local job through a
/// `JobDispatcher`; a job that fails for good is a log dead letter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_relay_runs_jobs_through_a_job_dispatcher() {
    use std::sync::{Arc, Mutex};

    use outbox_core::job::{JobDispatcher, JobError};
    use outbox_seaorm::ops::Operations;
    let Some((db, outbox)) = logical_db("the_log_relay_runs_jobs_through_a_job_dispatcher").await
    else {
        return;
    };
    let ran: Arc<Mutex<Vec<u32>>> = Arc::default();
    let seen = Arc::clone(&ran);
    let dispatcher = JobDispatcher::builder()
        .handler(move |note: OrderNotedV2, _: &Envelope| {
            let seen = Arc::clone(&seen);
            async move {
                if note.n == 2 {
                    return Err(JobError::permanent("note 2 cannot run"));
                }
                seen.lock().unwrap().push(note.n);
                Ok(())
            }
        })
        .build()
        .unwrap();
    let slot = slot_name();
    let shutdown = CancellationToken::new();
    let relay = LogRelay::builder(db.conn().clone(), outbox.clone(), dispatcher)
        .slot(&slot)
        .heartbeat_interval(Duration::from_millis(200))
        .build()
        .unwrap();
    let task = tokio::spawn(relay.run(shutdown.clone()));
    wait_for_active_slot(&db, &slot).await;
    for n in 0..4 {
        note(&db, &outbox, &format!("order-{n}"), n, 1).await;
    }
    eventually("three jobs ran", async || ran.lock().unwrap().len() == 3).await;
    let ops = Operations::new(db.conn().clone(), outbox.clone());
    eventually("the failed job is a dead letter", async || {
        ops.log_dead_letters(Some(&slot), None, None, 10)
            .await
            .unwrap()
            .len()
            == 1
    })
    .await;
    let mut jobs = ran.lock().unwrap().clone();
    jobs.sort_unstable();
    assert_eq!(jobs, [0, 1, 3]);
    shutdown.cancel();
    let report = task.await.unwrap().unwrap();
    assert_eq!(
        (report.published, report.dead_lettered),
        (3, 1),
        "{report:?}"
    );
    db.close().await;
}

/// Every replication slot of the server taken: refused at start with what to do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_a_free_slot_is_refused() {
    use outbox_tests::logical_pg::LogicalPostgres;
    let test = "a_server_without_a_free_slot_is_refused";
    let Some(cluster) = LogicalPostgres::dedicated(test, &[("max_replication_slots", "1")]).await
    else {
        return;
    };
    let db = TestDb::server_at(
        outbox_tests::Service::Postgres,
        outbox_tests::db::Backend::Postgres,
        cluster.admin_url(),
    )
    .await;
    let outbox = Outbox::default();
    schema::install(db.conn(), &outbox).await.unwrap();
    db.conn()
        .execute_unprepared("SELECT pg_create_logical_replication_slot('someone_else', 'pgoutput')")
        .await
        .unwrap();
    let relay = LogRelay::builder(db.conn().clone(), outbox, InProcessBroker::new())
        .slot(slot_name())
        .build()
        .unwrap();
    let error = tokio::time::timeout(WAIT, relay.run(CancellationToken::new()))
        .await
        .expect("a refused start returns at once")
        .unwrap_err();
    assert!(
        matches!(error, LogRelayError::NoFreeSlot { used: 1, max: 1 }),
        "{error}"
    );
    assert!(
        error.to_string().contains("max_replication_slots"),
        "{error}"
    );
    db.close().await;
    drop(cluster);
}

/// The last batch before a pause is acknowledged to the server at once (not with the next
/// commit, which on an idle database is the next heartbeat): a crash a moment later
/// redelivers nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_relay_acknowledges_its_last_batch_at_once() {
    let Some((db, outbox)) = logical_db("an_idle_relay_acknowledges_its_last_batch_at_once").await
    else {
        return;
    };
    let broker = InProcessBroker::new();
    let slot = slot_name();
    // No heartbeat comes to carry the acknowledgement.
    let quiet = |broker: &InProcessBroker| {
        log_relay(&db, &outbox, broker, &slot)
            .heartbeat_interval(Duration::from_secs(3600))
            .lease_ttl(Duration::from_secs(1))
            .build()
            .unwrap()
    };
    let relay = Running::start(quiet(&broker));
    wait_for_active_slot(&db, &slot).await;
    let first = note(&db, &outbox, "a", 0, 3).await;
    wait_for(&broker, 3).await;
    // The feedback interval of `log_relay` (50 ms) has passed several times.
    tokio::time::sleep(Duration::from_millis(500)).await;
    relay.crash().await;
    let later = note(&db, &outbox, "a", 3, 1).await;
    let after = InProcessBroker::new();
    let relay = Running::start(quiet(&after));
    wait_for(&after, 1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    relay.stop().await;
    assert_eq!(broker.message_ids(), first);
    assert_eq!(after.message_ids(), later, "nothing redelivered");
    db.close().await;
}

/// A schema-qualified outbox with the Debezium column naming: the publication, the slot
/// lease table and the decoding follow the configured names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_qualified_debezium_named_outbox_streams() {
    use outbox_seaorm::table::ColumnNaming;
    let Some(db) =
        TestDb::logical_postgres("a_schema_qualified_debezium_named_outbox_streams").await
    else {
        return;
    };
    db.conn()
        .execute_unprepared("CREATE SCHEMA billing")
        .await
        .unwrap();
    let outbox = Outbox::builder()
        .outbox_table("billing.outbox")
        .inbox_table("billing.inbox")
        .column_naming(ColumnNaming::Debezium)
        .build()
        .unwrap();
    schema::install(db.conn(), &outbox).await.unwrap();
    // A table of the same name in `public` is not the outbox.
    schema::install(db.conn(), &Outbox::default())
        .await
        .unwrap();
    let broker = InProcessBroker::new();
    let slot = slot_name();
    let relay = Running::start(log_relay(&db, &outbox, &broker, &slot).build().unwrap());
    wait_for_active_slot(&db, &slot).await;
    note(&db, &Outbox::default(), "public", 0, 1).await;
    let ids = note(&db, &outbox, "billing", 0, 2).await;
    wait_for(&broker, 2).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(broker.message_ids(), ids, "only billing.outbox's rows");
    let stored: Vec<Envelope> = OutboxRecord::list(db.conn(), &outbox, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|record| record.envelope)
        .collect();
    assert_eq!(broker.published(), stored);
    relay.stop().await;
    db.close().await;
}

/// Under `DeadLetterPolicy::Skip` a dead event holds nothing back: its aggregate's later
/// events go out, also those streamed after a heartbeat re-read the dead letters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_skip_a_dead_event_holds_nothing_back() {
    use outbox_core::policy::DeadLetterPolicy;
    use outbox_core::publish::PublishError;
    let Some((db, outbox)) = logical_db("under_skip_a_dead_event_holds_nothing_back").await else {
        return;
    };
    let broker = InProcessBroker::new();
    broker.fail_messages(|envelope| {
        let n = envelope.decode::<OrderNotedV2>().ok()?.n;
        (n == 1).then(|| PublishError::rejected("note 1 is refused"))
    });
    let slot = slot_name();
    let relay = Running::start(
        log_relay(&db, &outbox, &broker, &slot)
            .dead_letter_policy(DeadLetterPolicy::Skip)
            .heartbeat_interval(Duration::from_millis(100))
            .build()
            .unwrap(),
    );
    wait_for_active_slot(&db, &slot).await;
    note(&db, &outbox, "a", 0, 3).await;
    wait_for(&broker, 2).await;
    // Heartbeats re-read the dead letters meanwhile.
    tokio::time::sleep(Duration::from_millis(400)).await;
    note(&db, &outbox, "a", 3, 1).await;
    wait_for(&broker, 3).await;
    assert_eq!(
        notes(&broker.published()),
        [("a".into(), 0), ("a".into(), 2), ("a".into(), 3)]
    );
    let report = relay.stop().await;
    assert_eq!((report.dead_lettered, report.parked), (1, 0), "{report:?}");
    db.close().await;
}

// The cases both log sources run (`outbox_tests::log_relay_cases`).
outbox_tests::log_relay_case!(
    remove_after_insert_keeps_the_table_empty,
    open = logical_db,
    slot = slot_name,
    relay = log_relay,
    live = wait_for_active_slot
);
outbox_tests::log_relay_case!(
    a_poison_event_parks_only_its_aggregate_until_requeued_or_skipped,
    open = logical_db,
    slot = slot_name,
    relay = log_relay,
    live = wait_for_active_slot
);
outbox_tests::log_relay_case!(
    the_command_line_shows_and_requeues_log_dead_letters,
    open = logical_db,
    slot = slot_name,
    relay = log_relay,
    live = wait_for_active_slot
);
outbox_tests::log_relay_case!(
    scheduled_events_go_out_at_their_time_not_at_commit,
    open = logical_db,
    slot = slot_name,
    relay = log_relay,
    live = wait_for_active_slot
);
outbox_tests::log_relay_case!(
    a_snoozed_job_waits_in_the_scheduled_table,
    open = logical_db,
    slot = slot_name,
    relay = log_relay,
    live = wait_for_active_slot
);
