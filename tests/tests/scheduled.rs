//! Events due later (book: Events due later) on every backend: `raise_at` / `raise_after`
//! write the row to the scheduled table in the business transaction, the relay moves it into
//! the outbox table when it is due, and it joins its aggregate's order then.
//!
//! Each scenario runs on a SQLite file, SQLite in memory, PostgreSQL and MariaDB.

// Scenarios are plain async functions called by generated #[tokio::test]s, which clippy's
// `allow-unwrap-in-tests` does not see as tests.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use chrono::TimeDelta;
use outbox_core::ContractRegistry;
use outbox_core::clock::ManualClock;
use outbox_core::in_process::InProcessBroker;
use outbox_core::policy::Backoff;
use outbox_core::publish::PublishError;
use outbox_core::schedule::Schedule;
use outbox_core::{Envelope, IntegrationEvent, Raise, RaiseLater};
use outbox_seaorm::limits::MAX_DUE;
use outbox_seaorm::ops::{Operations, OperatorActionKind, OpsError, ScheduledTarget};
use outbox_seaorm::relay::{Relay, RelayBuilder};
use outbox_seaorm::schema;
use outbox_seaorm::{CommitError, Outbox, ScheduleProblem, WriteMode, cli};
use outbox_tests::backend_tests;
use outbox_tests::bookstore::{
    Order, OrderNotedV2, OrderingContracts, OrderingEvent, PlaceOrder, count_orders,
    create_business_tables,
};
use outbox_tests::db::TestDb;
use sea_orm::{ConnectionTrait, DbBackend, Statement};

backend_tests!(
    a_delayed_event_waits_for_its_time_and_holds_nothing_back,
    a_due_event_joins_its_aggregate_behind_a_row_in_backoff,
    a_time_in_the_past_is_due_at_once,
    bad_schedules_are_refused_and_roll_back_the_business_change,
    a_failed_move_leaves_the_row_scheduled,
    many_due_rows_move_once_each_in_due_order,
    operators_cancel_reschedule_and_run_now_by_message_id_and_key,
    the_command_line_lists_cancels_and_reschedules,
);

fn t0() -> chrono::DateTime<chrono::Utc> {
    "2026-03-01T09:00:00Z".parse().unwrap()
}

fn manual_outbox() -> (Outbox, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::starting_at(t0()));
    let outbox = Outbox::builder().clock(clock.clone()).build().unwrap();
    (outbox, clock)
}

async fn setup(db: &TestDb, outbox: &Outbox) {
    schema::install(db.conn(), outbox).await.expect("install");
    create_business_tables(db.conn())
        .await
        .expect("business tables");
}

fn relay(db: &TestDb, outbox: &Outbox, broker: &InProcessBroker) -> RelayBuilder<InProcessBroker> {
    Relay::builder(db.conn().clone(), outbox.clone(), broker.clone())
        .instance_id("scheduled-test")
        .poll_interval(Duration::from_millis(20))
        .heartbeat_interval(Duration::from_millis(200))
        .backoff(Backoff::new().with_jitter(false))
}

fn noted(order: &str, n: u32) -> OrderingEvent {
    OrderingEvent::Noted {
        order_id: order.to_owned(),
        n,
    }
}

/// The note numbers the broker received for `order`, in arrival order.
fn received(broker: &InProcessBroker, order: &str) -> Vec<u32> {
    broker
        .published_for(OrderNotedV2::AGGREGATE_TYPE, order)
        .iter()
        .map(|envelope: &Envelope| envelope.decode::<OrderNotedV2>().unwrap().n)
        .collect()
}

async fn count(db: &TestDb, table: &str, condition: &str) -> i64 {
    let backend = db.conn().get_database_backend();
    let quoted = match backend {
        DbBackend::MySql => format!("`{table}`"),
        _ => format!("\"{table}\""),
    };
    let row = db
        .conn()
        .query_one_raw(Statement::from_string(
            backend,
            format!("SELECT count(*) AS n FROM {quoted} WHERE {condition}"),
        ))
        .await
        .unwrap()
        .unwrap();
    row.try_get::<i64>("", "n").unwrap()
}

async fn scheduled_rows(db: &TestDb) -> i64 {
    count(db, "outbox_scheduled", "1 = 1").await
}

/// A payment timeout due in 30 minutes, between two notes of the same order: the notes go
/// out at once and in order (the scheduled event holds nothing back); the timeout is in the
/// scheduled table, not the outbox table, until its time; a drain a minute early publishes
/// nothing; at its time it goes out, once.
async fn a_delayed_event_waits_for_its_time_and_holds_nothing_back(db: &TestDb) {
    let (outbox, clock) = manual_outbox();
    setup(db, &outbox).await;
    let broker = InProcessBroker::new();
    let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
    uow.raise(noted("o-1", 1));
    uow.raise_after(noted("o-1", 2), Duration::from_secs(30 * 60));
    uow.raise(noted("o-1", 3));
    let report = uow.commit().await.unwrap();
    assert_eq!(report.rows, 3);
    assert_eq!(report.message_ids.len(), 2);
    assert_eq!(report.scheduled.len(), 1);
    assert_eq!(scheduled_rows(db).await, 1);
    assert_eq!(count(db, "outbox", "1 = 1").await, 2);

    let mut relay = relay(db, &outbox, &broker).build().unwrap();
    relay.drain().await.unwrap();
    assert_eq!(received(&broker, "o-1"), vec![1, 3]);

    clock.advance(TimeDelta::minutes(29));
    assert_eq!(relay.promote_scheduled().await.unwrap(), 0);
    relay.drain().await.unwrap();
    assert_eq!(received(&broker, "o-1"), vec![1, 3]);
    assert_eq!(scheduled_rows(db).await, 1);

    clock.advance(TimeDelta::minutes(1));
    relay.drain().await.unwrap();
    assert_eq!(received(&broker, "o-1"), vec![1, 3, 2]);
    assert_eq!(broker.published()[2].message_id, report.scheduled[0]);
    assert_eq!(scheduled_rows(db).await, 0);
    relay.drain().await.unwrap();
    assert_eq!(broker.len(), 3, "published once");
}

/// The ordering rule: once due, a scheduled event takes its place behind the rows of its
/// aggregate already in the outbox table. Note 1 fails and waits in backoff (10 min); the
/// reminder (note 2), due after 1 min, is moved then but held behind note 1, and goes out
/// after it.
async fn a_due_event_joins_its_aggregate_behind_a_row_in_backoff(db: &TestDb) {
    let (outbox, clock) = manual_outbox();
    setup(db, &outbox).await;
    let broker = InProcessBroker::new();
    broker.fail_messages(|envelope| {
        (envelope.decode::<OrderNotedV2>().ok()?.n == 1)
            .then(|| PublishError::unavailable("broker refuses note 1"))
    });
    let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
    uow.raise(noted("o-2", 1));
    uow.raise_at(noted("o-2", 2), t0() + TimeDelta::minutes(1));
    uow.commit().await.unwrap();
    let mut relay = relay(db, &outbox, &broker)
        .backoff(
            Backoff::new()
                .with_jitter(false)
                .with_min_delay(Duration::from_secs(600)),
        )
        .build()
        .unwrap();
    relay.drain().await.unwrap();
    assert!(received(&broker, "o-2").is_empty());

    clock.advance(TimeDelta::minutes(2));
    assert_eq!(relay.promote_scheduled().await.unwrap(), 1);
    relay.drain().await.unwrap();
    assert!(
        received(&broker, "o-2").is_empty(),
        "the reminder waits behind note 1"
    );
    assert_eq!(
        count(db, "outbox", "status = 'pending'").await,
        2,
        "both pending in the outbox table"
    );

    broker.clear_failures();
    clock.advance(TimeDelta::minutes(10));
    relay.drain().await.unwrap();
    assert_eq!(received(&broker, "o-2"), vec![1, 2]);
}

/// `raise_at` a time already past, and now: due at once, written to the outbox table
/// directly (the report lists it among `message_ids`), published by the next drain.
async fn a_time_in_the_past_is_due_at_once(db: &TestDb) {
    let (outbox, _clock) = manual_outbox();
    setup(db, &outbox).await;
    let broker = InProcessBroker::new();
    let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
    uow.raise_at(noted("o-3", 1), t0() - TimeDelta::days(1));
    uow.raise_scheduled(noted("o-3", 2), Schedule::at(t0()).key("o-3/now"));
    uow.raise_after(noted("o-3", 3), Duration::ZERO);
    let report = uow.commit().await.unwrap();
    assert_eq!(report.message_ids.len(), 3);
    assert!(report.scheduled.is_empty());
    assert_eq!(scheduled_rows(db).await, 0);
    relay(db, &outbox, &broker)
        .build()
        .unwrap()
        .drain()
        .await
        .unwrap();
    assert_eq!(received(&broker, "o-3"), vec![1, 2, 3]);
}

/// Each bad schedule is a typed error at commit that rolls back everything: the business
/// row, the rows due now and the scheduled ones.
async fn bad_schedules_are_refused_and_roll_back_the_business_change(db: &TestDb) {
    let (outbox, _clock) = manual_outbox();
    setup(db, &outbox).await;
    let later = |schedule: Schedule| async {
        let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
        Order::place(&uow, PlaceOrder::sample("bad-order"))
            .save(&uow)
            .await
            .unwrap();
        uow.raise(noted("o-4", 1));
        uow.raise_scheduled(noted("o-4", 2), schedule);
        uow.commit().await.unwrap_err()
    };
    let problem = |error: CommitError| match error {
        CommitError::Schedule { problem, .. } => problem,
        other => panic!("not a schedule error: {other:?}"),
    };
    let in_a_minute = Schedule::after(Duration::from_secs(60));
    assert_eq!(
        problem(later(in_a_minute.clone().key("")).await),
        ScheduleProblem::EmptyKey
    );
    assert_eq!(
        problem(later(in_a_minute.clone().key("k".repeat(256))).await),
        ScheduleProblem::KeyTooLong {
            length: 256,
            max: 255
        }
    );
    let beyond = MAX_DUE + TimeDelta::microseconds(1);
    assert_eq!(
        problem(later(Schedule::at(beyond)).await),
        ScheduleProblem::DueOutOfRange { max: MAX_DUE }
    );
    assert_eq!(
        problem(later(Schedule::after(Duration::MAX)).await),
        ScheduleProblem::DueOutOfRange { max: MAX_DUE }
    );
    // The longest key and the latest time are accepted.
    let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
    uow.raise_scheduled(noted("o-4", 3), Schedule::at(MAX_DUE).key("k".repeat(255)));
    assert_eq!(uow.commit().await.unwrap().scheduled.len(), 1);
    assert_eq!(count_orders(db.conn()).await.unwrap(), 0);
    assert_eq!(count(db, "outbox", "1 = 1").await, 0);
    assert_eq!(scheduled_rows(db).await, 1);

    // Message mode has no table to wait in (refused on every backend, before the write
    // mode's own backend check).
    let message = Outbox::builder()
        .write_mode(WriteMode::message())
        .build()
        .unwrap();
    let uow = message.begin(db.conn(), &OrderingContracts).await.unwrap();
    uow.raise_after(noted("o-4", 4), Duration::from_secs(60));
    assert_eq!(
        problem(uow.commit().await.unwrap_err()),
        ScheduleProblem::MessageMode
    );
}

/// The move is one transaction: when its insert fails (a row of the same message id is in
/// the outbox table already), nothing is deleted from the scheduled table and nothing is
/// half-moved; once the obstacle is gone the row moves and goes out.
async fn a_failed_move_leaves_the_row_scheduled(db: &TestDb) {
    let (outbox, clock) = manual_outbox();
    setup(db, &outbox).await;
    let broker = InProcessBroker::new();
    let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
    uow.raise_after(noted("o-5", 1), Duration::from_secs(60));
    let id = uow.commit().await.unwrap().scheduled[0];
    // Copy the row into the outbox table under the same message id: the move's insert
    // will violate the unique index.
    let backend = db.conn().get_database_backend();
    let columns = "message_id, event_type, version, aggregate_type, aggregate_id, partition, \
                   headers, occurred_at, payload, status, attempts, next_attempt_at, \
                   created_at, retryable";
    let columns = match backend {
        DbBackend::MySql => columns.replace("partition", "`partition`"),
        _ => columns.replace("partition", "\"partition\""),
    };
    db.conn()
        .execute_unprepared(&format!(
            "INSERT INTO outbox ({columns}) SELECT {} FROM outbox_scheduled",
            columns.replace("status", "'dead'")
        ))
        .await
        .unwrap();
    clock.advance(TimeDelta::minutes(2));
    let mut relay = relay(db, &outbox, &broker).build().unwrap();
    relay.promote_scheduled().await.unwrap_err();
    assert_eq!(scheduled_rows(db).await, 1);
    assert_eq!(count(db, "outbox", "1 = 1").await, 1);

    db.conn()
        .execute_unprepared("DELETE FROM outbox")
        .await
        .unwrap();
    relay.drain().await.unwrap();
    assert_eq!(broker.message_ids(), vec![id]);
    assert_eq!(scheduled_rows(db).await, 0);
}

/// 1 000 rows due at five different times, moved by two relays at once (they take turns on
/// the rows' locks; SQLite: one writer): every row moves exactly once, and within an
/// aggregate the rows go out in due order, raise order among equal times.
async fn many_due_rows_move_once_each_in_due_order(db: &TestDb) {
    let (outbox, clock) = manual_outbox();
    setup(db, &outbox).await;
    let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
    for n in 0..1_000_u32 {
        // Due in 5, 4, 3, 2, 1 minutes: raise order is not due order.
        let minutes = 5 - i64::from(n % 5);
        uow.raise_at(
            noted(&format!("o-{}", n % 10), n),
            t0() + TimeDelta::minutes(minutes),
        );
    }
    assert_eq!(uow.commit().await.unwrap().scheduled.len(), 1_000);
    clock.advance(TimeDelta::minutes(10));
    let broker = InProcessBroker::new();
    let mut first = relay(db, &outbox, &broker).batch_size(50).build().unwrap();
    let mut second = relay(db, &outbox, &broker)
        .instance_id("scheduled-test-2")
        .batch_size(50)
        .build()
        .unwrap();
    let (a, b) = tokio::join!(first.promote_scheduled(), second.promote_scheduled());
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a + b, 1_000, "moved {a} + {b}");
    assert_eq!(scheduled_rows(db).await, 0);
    assert_eq!(count(db, "outbox", "status = 'pending'").await, 1_000);
    first.drain().await.unwrap();
    assert_eq!(broker.len(), 1_000);
    for order in 0..10_u32 {
        let got = received(&broker, &format!("o-{order}"));
        let due = |n: &u32| 5 - (n % 5);
        let mut expected = got.clone();
        expected.sort_by_key(|n| (due(n), *n));
        assert_eq!(got, expected, "o-{order} in due order, then raise order");
    }
}

/// The operations API on waiting rows: listed in due order with their keys; cancelled by
/// message id (never published) and by key (every row of the key); rescheduled (the new
/// time holds: not earlier, not later); made due now; each change one operator-log entry
/// per row with the due times. A row that fell due already is `NotScheduled` (skip it
/// instead), an unknown id `NotFound`, a key with nothing waiting `NothingScheduled`, a
/// time beyond what the outbox stores `DueOutOfRange`, a cancel without reason
/// `MissingReason` — and none of them changes anything.
async fn operators_cancel_reschedule_and_run_now_by_message_id_and_key(db: &TestDb) {
    let (outbox, clock) = manual_outbox();
    setup(db, &outbox).await;
    let broker = InProcessBroker::new();
    let ops = Operations::new(db.conn().clone(), outbox.clone());
    let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
    let minutes = |m: i64| t0() + TimeDelta::minutes(m);
    uow.raise_at(noted("o-6", 1), minutes(10)); // cancelled by id
    uow.raise_scheduled(noted("o-6", 2), Schedule::at(minutes(20)).key("o-6/remind"));
    uow.raise_scheduled(noted("o-6", 3), Schedule::at(minutes(30)).key("o-6/remind"));
    uow.raise_at(noted("o-6", 4), minutes(40)); // rescheduled
    uow.raise_at(noted("o-6", 5), minutes(50)); // run now
    uow.raise(noted("o-6", 0)); // due at once
    let report = uow.commit().await.unwrap();
    let ids = report.scheduled.clone();
    let listed = ops.scheduled(None, 100).await.unwrap();
    assert_eq!(
        listed
            .iter()
            .map(|row| row.record.envelope.message_id)
            .collect::<Vec<_>>(),
        ids
    );
    assert_eq!(listed[1].key.as_deref(), Some("o-6/remind"));
    assert_eq!(listed[0].due_at(), minutes(10));
    assert_eq!(listed[0].record.status, schema::OutboxStatus::Scheduled);
    assert_eq!(
        ops.scheduled(Some("o-6/remind"), 100).await.unwrap().len(),
        2
    );
    let summary = ops.scheduled_summary().await.unwrap();
    assert_eq!(
        (summary.waiting, summary.more, summary.next_due),
        (5, false, Some(minutes(10)))
    );
    assert_eq!(
        summary.to_string(),
        format!("5 waiting, next due {}", minutes(10).to_rfc3339())
    );

    // Refusals change nothing.
    let by_id = |id| ScheduledTarget::MessageId(id);
    assert!(matches!(
        ops.cancel_scheduled(&by_id(ids[0]), "ada", " ").await,
        Err(OpsError::MissingReason)
    ));
    assert!(matches!(
        ops.cancel_scheduled(&by_id(report.message_ids[0]), "ada", "late")
            .await,
        Err(OpsError::NotScheduled {
            status: schema::OutboxStatus::Pending,
            ..
        })
    ));
    let unknown = uuid::Uuid::now_v7();
    assert!(matches!(
        ops.cancel_scheduled(&by_id(unknown), "ada", "x").await,
        Err(OpsError::NotFound { message_id }) if message_id == unknown
    ));
    assert!(matches!(
        ops.run_scheduled_now(&ScheduledTarget::Key("o-6/none".into()), "ada", None).await,
        Err(OpsError::NothingScheduled { key }) if key == "o-6/none"
    ));
    assert!(matches!(
        ops.reschedule(&by_id(ids[3]), MAX_DUE + TimeDelta::seconds(1), "ada", None)
            .await,
        Err(OpsError::DueOutOfRange { .. })
    ));
    assert_eq!(ops.scheduled_summary().await.unwrap().waiting, 5);

    // The changes.
    let cancelled = ops
        .cancel_scheduled(&by_id(ids[0]), "ada", "customer paid")
        .await
        .unwrap();
    assert_eq!(cancelled.len(), 1);
    assert_eq!(cancelled[0].action, OperatorActionKind::Cancel);
    assert_eq!(cancelled[0].previous_status, "scheduled");
    let by_key = ops
        .cancel_scheduled(
            &ScheduledTarget::Key("o-6/remind".into()),
            "ada",
            "order closed",
        )
        .await
        .unwrap();
    assert_eq!(by_key.len(), 2);
    let moved = ops
        .reschedule(&by_id(ids[3]), minutes(45), "bob", Some("later"))
        .await
        .unwrap();
    assert_eq!(moved[0].action, OperatorActionKind::Reschedule);
    assert_eq!(
        moved[0].detail.as_deref(),
        Some(
            format!(
                "due {} → {}",
                minutes(40).to_rfc3339(),
                minutes(45).to_rfc3339()
            )
            .as_str()
        )
    );
    clock.advance(TimeDelta::minutes(1));
    ops.run_scheduled_now(&by_id(ids[4]), "bob", None)
        .await
        .unwrap();

    let mut relay = relay(db, &outbox, &broker).build().unwrap();
    relay.drain().await.unwrap();
    assert_eq!(received(&broker, "o-6"), vec![0, 5]);
    clock.advance(TimeDelta::minutes(43)); // t0 + 44 min: not yet 45
    relay.drain().await.unwrap();
    assert_eq!(received(&broker, "o-6"), vec![0, 5]);
    clock.advance(TimeDelta::minutes(1));
    relay.drain().await.unwrap();
    assert_eq!(received(&broker, "o-6"), vec![0, 5, 4]);
    clock.advance(TimeDelta::hours(2));
    relay.drain().await.unwrap();
    assert_eq!(
        received(&broker, "o-6"),
        vec![0, 5, 4],
        "cancelled rows never go"
    );

    let log = ops.operator_log(None).await.unwrap();
    let kinds: Vec<_> = log.iter().map(|entry| entry.action).collect();
    assert_eq!(
        kinds,
        [
            OperatorActionKind::Cancel,
            OperatorActionKind::Cancel,
            OperatorActionKind::Cancel,
            OperatorActionKind::Reschedule,
            OperatorActionKind::RunNow,
        ]
    );
    assert_eq!(log[0].message_id, ids[0]);
    assert_eq!(log[0].reason.as_deref(), Some("customer paid"));
    assert_eq!(
        log[0].detail.as_deref(),
        Some(format!("was due {}", minutes(10).to_rfc3339()).as_str())
    );
    assert_eq!(log[4].actor, "bob");
}

async fn run_cli(db: &TestDb, outbox: &Outbox, args: &[&str]) -> (u8, String, String) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = cli::run_with(
        std::iter::once("ops").chain(args.iter().copied()),
        db.conn().clone(),
        outbox.clone(),
        || ContractRegistry::from_registrations([]),
        &mut out,
        &mut err,
    )
    .await;
    (
        code,
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    )
}

/// `outbox scheduled list | cancel | reschedule | run-now`: the table and the JSON of the
/// waiting rows, each change printed and recorded; a message that fell due already exits 2
/// with the typed error's message, a missing target is a usage error.
async fn the_command_line_lists_cancels_and_reschedules(db: &TestDb) {
    let (outbox, _clock) = manual_outbox();
    setup(db, &outbox).await;
    let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
    uow.raise_scheduled(
        noted("o-7", 1),
        Schedule::at(t0() + TimeDelta::hours(1)).key("o-7/a"),
    );
    uow.raise_scheduled(
        noted("o-7", 2),
        Schedule::at(t0() + TimeDelta::hours(2)).key("o-7/b"),
    );
    uow.raise(noted("o-7", 0));
    let report = uow.commit().await.unwrap();
    let (first, second) = (report.scheduled[0], report.scheduled[1]);

    let (code, out, _) = run_cli(db, &outbox, &["outbox", "scheduled", "list"]).await;
    assert_eq!(code, 0, "{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "DUE AT\tKEY\tMESSAGE ID\tEVENT TYPE\tAGGREGATE");
    assert!(
        lines[1].starts_with("2026-03-01T10:00:00+00:00\to-7/a\t"),
        "{out}"
    );
    assert!(lines[1].contains(&first.to_string()), "{out}");
    assert_eq!(lines[3], "2 row(s) waiting");
    let (_, out, _) = run_cli(
        db,
        &outbox,
        &[
            "outbox",
            "scheduled",
            "list",
            "--key",
            "o-7/b",
            "--format",
            "json",
        ],
    )
    .await;
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json.as_array().unwrap().len(), 1);
    assert_eq!(json[0]["key"], "o-7/b");
    assert_eq!(json[0]["envelope"]["message_id"], second.to_string());

    let (code, out, _) = run_cli(
        db,
        &outbox,
        &[
            "outbox",
            "scheduled",
            "reschedule",
            "--key",
            "o-7/b",
            "--at",
            "2026-03-02T09:00:00Z",
            "--actor",
            "ada",
        ],
    )
    .await;
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with(&format!("reschedule {second} (")), "{out}");
    assert!(out.contains("→ 2026-03-02T09:00:00+00:00"), "{out}");
    let (code, out, _) = run_cli(
        db,
        &outbox,
        &[
            "outbox",
            "scheduled",
            "cancel",
            &first.to_string(),
            "--reason",
            "paid",
        ],
    )
    .await;
    assert_eq!(code, 0, "{out}");
    assert!(out.ends_with("1 row(s) changed\n"), "{out}");
    let (code, _, err) = run_cli(
        db,
        &outbox,
        &[
            "outbox",
            "scheduled",
            "run-now",
            &report.message_ids[0].to_string(),
        ],
    )
    .await;
    assert_eq!(code, 2);
    assert!(err.contains("is not scheduled"), "{err}");
    let (code, _, _) = run_cli(db, &outbox, &["outbox", "scheduled", "run-now"]).await;
    assert_eq!(code, 2, "a target is required");

    let ops = Operations::new(db.conn().clone(), outbox.clone());
    let waiting = ops.scheduled(None, 10).await.unwrap();
    assert_eq!(waiting.len(), 1);
    assert_eq!(
        waiting[0].due_at(),
        "2026-03-02T09:00:00Z"
            .parse::<chrono::DateTime<chrono::Utc>>()
            .unwrap()
    );
    let log = ops.operator_log(None).await.unwrap();
    assert_eq!(log.len(), 2);
    assert_eq!(log[0].actor, "ada");
}
