//! Unique jobs (book: The job queue, Unique jobs) on every backend: a job whose key is held —
//! by a job that still waits, or within its window — is not written; the commit reports it
//! as already enqueued (not an error), also when two commits race.
//!
//! Each scenario runs on a SQLite file, SQLite in memory, PostgreSQL and MariaDB.

// Scenarios are plain async functions called by generated #[tokio::test]s, which clippy's
// `allow-unwrap-in-tests` does not see as tests.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use chrono::TimeDelta;
use outbox_core::clock::ManualClock;
use outbox_core::in_process::InProcessBroker;
use outbox_core::{IntegrationEvent as _, Raise, RaiseLater as _};
use outbox_seaorm::job::{Job, Unique};
use outbox_seaorm::ops::Operations;
use outbox_seaorm::record::OutboxRecord;
use outbox_seaorm::relay::Relay;
use outbox_seaorm::{CommitReport, ConfigError, Outbox, WriteMode, schema};
use outbox_tests::bookstore::{OrderNotedV2, OrderingContracts, OrderingEvent};
use outbox_tests::db::{Backend, TestDb};
use outbox_tests::{backend_tests, ops_cli};

backend_tests!(
    a_job_of_a_waiting_key_is_already_enqueued,
    a_window_keeps_the_key_after_the_job_is_done,
    racing_commits_enqueue_one_job,
);

fn t0() -> chrono::DateTime<chrono::Utc> {
    "2026-03-01T09:00:00Z".parse().unwrap()
}

fn outbox_with(unique: Unique) -> (Outbox, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::starting_at(t0()));
    let outbox = Outbox::builder()
        .clock(clock.clone())
        .job(Job::of::<OrderNotedV2>().unique(unique))
        .build()
        .unwrap();
    (outbox, clock)
}

fn noted(order: &str, n: u32) -> OrderingEvent {
    OrderingEvent::Noted {
        order_id: order.to_owned(),
        n,
    }
}

async fn commit(db: &TestDb, outbox: &Outbox, events: Vec<OrderingEvent>) -> CommitReport {
    let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
    for event in events {
        uow.raise(event);
    }
    uow.commit().await.unwrap()
}

async fn drain(db: &TestDb, outbox: &Outbox, broker: &InProcessBroker) -> usize {
    Relay::builder(db.conn().clone(), outbox.clone(), broker.clone())
        .instance_id("unique-test")
        .build()
        .unwrap()
        .drain()
        .await
        .unwrap()
        .published
}

/// One job per order while it waits: a second commit of the order's job writes nothing and
/// says so (the holder's message id); two of one order in one commit: the first is written;
/// a job due later holds its key too; once the job is published the key is free.
async fn a_job_of_a_waiting_key_is_already_enqueued(db: &TestDb) {
    let (outbox, clock) = outbox_with(Unique::by_aggregate());
    schema::install(db.conn(), &outbox).await.unwrap();
    let first = commit(db, &outbox, vec![noted("o-1", 1)]).await;
    assert_eq!(first.message_ids.len(), 1);
    assert!(first.already_enqueued.is_empty());

    let second = commit(
        db,
        &outbox,
        vec![noted("o-1", 2), noted("o-2", 1), noted("o-2", 2)],
    )
    .await;
    assert_eq!(second.rows, 1, "{second:?}");
    assert_eq!(second.already_enqueued.len(), 2);
    let refused = &second.already_enqueued[0];
    assert_eq!(
        (refused.event_type.as_str(), refused.key.as_str()),
        (OrderNotedV2::EVENT_TYPE, "o-1")
    );
    assert_eq!(refused.holder, first.message_ids[0]);
    assert_eq!(
        second.already_enqueued[1].holder, second.message_ids[0],
        "the first of the commit"
    );
    assert_eq!(OutboxRecord::count(db.conn(), &outbox).await.unwrap(), 2);

    // A job due later holds its key while it waits.
    let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
    uow.raise_after(noted("o-3", 1), Duration::from_secs(3600));
    assert_eq!(uow.commit().await.unwrap().scheduled.len(), 1);
    assert_eq!(
        commit(db, &outbox, vec![noted("o-3", 2)])
            .await
            .already_enqueued
            .len(),
        1
    );

    // Operators see the keys, newest first, each with its holder and whether it holds.
    let ops = Operations::new(db.conn().clone(), outbox.clone());
    let keys = ops.unique_keys(None, 100).await.unwrap();
    let holding: Vec<(&str, bool)> = keys
        .iter()
        .map(|key| (key.key.as_str(), key.holding))
        .collect();
    // Taken at one time on the test's clock: then by key.
    assert_eq!(
        holding,
        [("o-1", true), ("o-2", true), ("o-3", true)],
        "{keys:?}"
    );
    assert_eq!(keys[0].message_id, first.message_ids[0]);
    assert_eq!(keys[0].expires_at, None);
    assert_eq!(
        ops.unique_keys(Some("other.type.v1"), 100).await.unwrap(),
        []
    );
    assert_eq!(ops.unique_keys(None, 1).await.unwrap().len(), 1);

    let broker = InProcessBroker::new();
    assert_eq!(drain(db, &outbox, &broker).await, 2);
    let keys = ops.unique_keys(None, 100).await.unwrap();
    let holds = |k: &str| keys.iter().find(|key| key.key == k).unwrap().holding;
    assert!(
        !holds("o-1") && !holds("o-2"),
        "published jobs hold nothing: {keys:?}"
    );
    assert!(holds("o-3"), "the scheduled job still holds its key");
    let (code, out, _) = ops_cli::run(db, &outbox, &["outbox", "unique", "--limit", "10"]).await;
    assert_eq!(code, 0, "{out}");
    assert!(
        out.starts_with("EVENT TYPE\tKEY\tHOLDER\tUNTIL\tTAKEN AT\tHOLDS\n"),
        "{out}"
    );
    assert!(out.contains("\to-3\t"), "{out}");
    assert!(out.contains("\twhile pending\t"), "{out}");
    assert!(out.ends_with("3 key(s)\n"), "{out}");
    let (code, json, _) =
        ops_cli::run(db, &outbox, &["outbox", "unique", "--format", "json"]).await;
    assert_eq!(code, 0);
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json[0]["key"], "o-1");
    assert_eq!(json[0]["holding"], false);
    assert_eq!(json[2]["holding"], true);
    let again = commit(db, &outbox, vec![noted("o-1", 3), noted("o-2", 3)]).await;
    assert_eq!(
        again.message_ids.len(),
        2,
        "done jobs free their keys: {again:?}"
    );
    assert!(again.already_enqueued.is_empty());
    clock.advance(TimeDelta::hours(1));
    drain(db, &outbox, &broker).await;
    assert_eq!(
        commit(db, &outbox, vec![noted("o-3", 3)])
            .await
            .message_ids
            .len(),
        1
    );
}

/// By arguments within an hour: the same arguments again are refused while the hour runs,
/// even after the job was published; other arguments are not; after the hour they are
/// taken again. A window of zero and unique jobs under message mode are refused at build.
async fn a_window_keeps_the_key_after_the_job_is_done(db: &TestDb) {
    let (outbox, clock) = outbox_with(Unique::by_args().within(Duration::from_secs(3600)));
    schema::install(db.conn(), &outbox).await.unwrap();
    let broker = InProcessBroker::new();
    assert_eq!(commit(db, &outbox, vec![noted("o-1", 1)]).await.rows, 1);
    assert_eq!(drain(db, &outbox, &broker).await, 1);
    let same = commit(db, &outbox, vec![noted("o-1", 1)]).await;
    assert_eq!((same.rows, same.already_enqueued.len()), (0, 1));
    assert_eq!(same.already_enqueued[0].key.len(), 64, "a SHA-256 in hex");
    assert_eq!(
        commit(db, &outbox, vec![noted("o-1", 2)]).await.rows,
        1,
        "other arguments"
    );
    clock.advance(TimeDelta::minutes(59));
    assert_eq!(commit(db, &outbox, vec![noted("o-1", 1)]).await.rows, 0);
    clock.advance(TimeDelta::minutes(1));
    assert_eq!(
        commit(db, &outbox, vec![noted("o-1", 1)]).await.rows,
        1,
        "the hour passed"
    );

    assert_eq!(
        Outbox::builder()
            .job(Job::of::<OrderNotedV2>().unique(Unique::by_args().within(Duration::ZERO)))
            .build()
            .unwrap_err(),
        ConfigError::UniqueWindow {
            event_type: OrderNotedV2::EVENT_TYPE.into()
        }
    );
    assert_eq!(
        Outbox::builder()
            .write_mode(WriteMode::message())
            .job(Job::of::<OrderNotedV2>().unique(Unique::by_aggregate()))
            .build()
            .unwrap_err(),
        ConfigError::UniqueInMessageMode {
            event_type: OrderNotedV2::EVENT_TYPE.into()
        }
    );
}

/// Eight commits of the same order's job at once: one row is written, the seven others are
/// already enqueued (none fails). SQLite serializes its writers: there they run one after
/// the other, with the same outcome.
async fn racing_commits_enqueue_one_job(db: &TestDb) {
    let (outbox, _clock) = outbox_with(Unique::by_aggregate());
    schema::install(db.conn(), &outbox).await.unwrap();
    let mut reports = Vec::new();
    if matches!(db.backend(), Backend::Postgres | Backend::MariaDb) {
        let mut units = Vec::new();
        for n in 0..8 {
            let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
            uow.raise(noted("o-9", n));
            units.push(uow);
        }
        let commits = units
            .into_iter()
            .map(|uow| async move { uow.commit().await.unwrap() });
        reports = futures_util::future::join_all(commits).await;
    } else {
        for n in 0..8 {
            reports.push(commit(db, &outbox, vec![noted("o-9", n)]).await);
        }
    }
    let written: Vec<_> = reports.iter().flat_map(|r| r.message_ids.clone()).collect();
    assert_eq!(written.len(), 1, "{reports:?}");
    let refused: Vec<_> = reports
        .iter()
        .flat_map(|r| r.already_enqueued.clone())
        .collect();
    assert_eq!(refused.len(), 7);
    assert!(
        refused.iter().all(|r| r.holder == written[0]),
        "{refused:?}"
    );
    assert_eq!(OutboxRecord::count(db.conn(), &outbox).await.unwrap(), 1);
}
