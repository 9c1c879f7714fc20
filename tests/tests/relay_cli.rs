//! The `outbox` operations command line (feature `cli` of outbox-seaorm) on every backend:
//! status, dead letters, requeue, skip (recorded) and purge.

// Scenarios are plain async functions called by generated #[tokio::test]s, which clippy's
// `allow-unwrap-in-tests` does not see as tests.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use chrono::TimeDelta;
use outbox_core::clock::ManualClock;
use outbox_core::in_process::InProcessBroker;
use outbox_core::publish::PublishError;
use outbox_core::{ContractRegistry, Raise};
use outbox_seaorm::record::OutboxRecord;
use outbox_seaorm::relay::Relay;
use outbox_seaorm::{Outbox, cli, schema};
use outbox_tests::backend_tests;
use outbox_tests::bookstore::{OrderingContracts, OrderingEvent};
use outbox_tests::db::TestDb;

backend_tests!(operations_command_line, held_back_rows_are_not_lag,);

/// Runs the command line; returns (exit code, stdout, stderr).
async fn ops(db: &TestDb, outbox: &Outbox, args: &[&str]) -> (u8, String, String) {
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

async fn operations_command_line(db: &TestDb) {
    let clock = Arc::new(ManualClock::starting_at(
        "2026-03-01T09:00:00Z".parse().unwrap(),
    ));
    let outbox = Outbox::builder().clock(clock.clone()).build().unwrap();
    schema::install(db.conn(), &outbox).await.unwrap();
    let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
    for n in 0..2 {
        uow.raise(OrderingEvent::Noted {
            order_id: "poison".into(),
            n,
        });
    }
    let ids = uow.commit().await.unwrap().message_ids;
    let broker = InProcessBroker::new();
    broker.fail_messages(|_| Some(PublishError::rejected("no such exchange")));
    // Kept after publication: the operator looks at the requeued row and purges it.
    let mut relay = Relay::builder(db.conn().clone(), outbox.clone(), broker.clone())
        .retention(Some(Duration::from_secs(7 * 24 * 3600)))
        .build()
        .unwrap();
    assert_eq!(relay.drain().await.unwrap().dead_lettered, 1);

    let (code, out, _) = ops(db, &outbox, &["outbox", "status"]).await;
    assert_eq!(code, 0);
    assert!(
        out.contains("pending:           1 (in backoff: 0, held back: 1)"),
        "{out}"
    );
    assert!(out.contains("dead:              1"), "{out}");
    assert!(
        out.contains("outboxtest.ordering.order-noted.v2  1"),
        "{out}"
    );
    let (code, _, _) = ops(db, &outbox, &["outbox", "status", "--fail-on-dead"]).await;
    assert_eq!(code, 1);
    let (_, out, _) = ops(db, &outbox, &["outbox", "status", "--format", "json"]).await;
    let status: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(status["pending"], 1);
    assert_eq!(
        status["dead_by_event_type"]["outboxtest.ordering.order-noted.v2"],
        1
    );

    let (code, out, _) = ops(db, &outbox, &["outbox", "dead", "list"]).await;
    assert_eq!(code, 0);
    assert!(
        out.contains(&ids[0].to_string()) && out.contains("no such exchange"),
        "{out}"
    );
    assert!(out.ends_with("1 dead row(s)\n"), "{out}");
    let id = ids[0].to_string();
    let (_, out, _) = ops(
        db,
        &outbox,
        &["outbox", "dead", "show", &id, "--format", "json"],
    )
    .await;
    let shown: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(shown["status"], "dead");
    assert_eq!(shown["envelope"]["message_id"], id);

    let (code, _, err) = ops(db, &outbox, &["outbox", "skip", &id]).await;
    assert_eq!(code, 2, "--reason is required: {err}");
    let unknown = uuid::Uuid::now_v7().to_string();
    let (code, _, err) = ops(db, &outbox, &["outbox", "requeue", &unknown]).await;
    assert_eq!(code, 2);
    assert!(err.contains("no outbox row"), "{err}");

    broker.clear_failures();
    let (code, out, _) = ops(
        db,
        &outbox,
        &[
            "outbox",
            "requeue",
            &id,
            "--actor",
            "carol",
            "--reason",
            "exchange created",
        ],
    )
    .await;
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("requeue") && out.contains("by carol"), "{out}");
    let (code, _, err) = ops(db, &outbox, &["outbox", "requeue", &id]).await;
    assert_eq!(code, 2, "pending rows are not requeued");
    assert!(err.contains("is pending"), "{err}");
    assert_eq!(relay.drain().await.unwrap().published, 2);
    let (_, out, _) = ops(db, &outbox, &["outbox", "dead", "show", &id]).await;
    assert!(out.contains("status:       published"), "{out}");
    assert!(
        out.contains("log:          requeue") && out.contains(": exchange created"),
        "{out}"
    );

    clock.advance(TimeDelta::hours(1));
    let (code, out, _) = ops(
        db,
        &outbox,
        &["outbox", "purge", "--older-than", "30m", "--batch", "1"],
    )
    .await;
    assert_eq!(code, 0);
    assert!(out.starts_with("2 published row(s)"), "{out}");
    assert_eq!(OutboxRecord::count(db.conn(), &outbox).await.unwrap(), 0);
    let (code, out, _) = ops(
        db,
        &outbox,
        &["outbox", "purge-inbox", "--older-than", "14d"],
    )
    .await;
    assert_eq!(code, 0);
    assert!(out.starts_with("0 inbox row(s)"), "{out}");
}

/// The command line's futures are `Send`: a service spawns them on a multi-threaded runtime
/// (`run_with` and `OutboxCommand::execute` took `&mut dyn Write`, and "`dyn Write` cannot
/// be sent between threads safely" refused `tokio::spawn`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_line_runs_on_a_spawned_task() {
    fn spawnable<F: std::future::Future + Send + 'static>(_: &F) {}
    let db = TestDb::sqlite_memory().await;
    let outbox = Outbox::default();
    schema::install(db.conn(), &outbox).await.unwrap();
    spawnable(&cli::run(db.conn().clone(), outbox.clone()));

    let (conn, config) = (db.conn().clone(), outbox.clone());
    let standalone = tokio::spawn(async move {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = cli::run_with(
            ["ops", "outbox", "status", "--format", "json"],
            conn,
            config,
            ContractRegistry::collect,
            &mut out,
            &mut err,
        )
        .await;
        (code, String::from_utf8(out).unwrap())
    });
    let (code, out) = standalone.await.unwrap();
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("\"pending\": 0"), "{out}");

    use clap::Parser as _;
    #[derive(clap::Parser)]
    struct Ops {
        #[command(subcommand)]
        command: OpsCommand,
    }
    #[derive(clap::Subcommand)]
    enum OpsCommand {
        Outbox(cli::OutboxCommand),
    }
    let OpsCommand::Outbox(command) = Ops::try_parse_from(["ops", "outbox", "status"])
        .unwrap()
        .command;
    let operations = outbox_seaorm::ops::Operations::new(db.conn().clone(), outbox.clone());
    let embedded = tokio::spawn(async move {
        let mut out = Vec::new();
        let outcome = command.execute(&operations, &mut out).await.unwrap();
        (outcome.code(), String::from_utf8(out).unwrap())
    });
    let (code, out) = embedded.await.unwrap();
    assert_eq!(code, 0);
    assert!(out.contains("pending"), "{out}");
    db.close().await;
}

/// `outbox_oldest_claimable_age_seconds` and `status` count only rows the claim would take:
/// rows held behind a dead row (`Block`) or behind a row in backoff are reported apart, so
/// one poisoned aggregate does not look like a stuck relay (issue 15, item 2).
async fn held_back_rows_are_not_lag(db: &TestDb) {
    use outbox_core::policy::{Backoff, DeadLetterPolicy, Ordering};
    use std::time::Duration;

    let clock = Arc::new(ManualClock::starting_at(
        "2026-03-01T09:00:00Z".parse().unwrap(),
    ));
    let outbox = Outbox::builder().clock(clock.clone()).build().unwrap();
    schema::install(db.conn(), &outbox).await.unwrap();
    let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
    for (order_id, n) in [
        ("poison", 0),
        ("poison", 1),
        ("poison", 2),
        ("flaky", 0),
        ("flaky", 1),
        ("ok", 0),
    ] {
        uow.raise(OrderingEvent::Noted {
            order_id: order_id.into(),
            n,
        });
    }
    uow.commit().await.unwrap();
    let broker = InProcessBroker::new();
    broker.fail_messages(|envelope| match envelope.aggregate_id.as_str() {
        "poison" => Some(PublishError::rejected("no such exchange")),
        "flaky" => Some(PublishError::unavailable("broker down")),
        _ => None,
    });
    let mut relay = Relay::builder(db.conn().clone(), outbox.clone(), broker.clone())
        .backoff(
            Backoff::new()
                .with_min_delay(Duration::from_secs(3600))
                .with_jitter(false),
        )
        .build()
        .unwrap();
    let report = relay.drain().await.unwrap();
    assert_eq!(
        (report.published, report.dead_lettered, report.retried),
        (1, 1, 1)
    );
    clock.advance(TimeDelta::minutes(10));

    let status = relay.operations().status().await.unwrap();
    assert_eq!(
        (status.pending, status.in_backoff, status.held),
        (4, 1, 3),
        "{status:?}"
    );
    assert_eq!(
        status.oldest_claimable_age, None,
        "nothing is claimable: {status:?}"
    );
    assert_eq!(status.oldest_held_age, Some(Duration::from_secs(600)));

    // A new row is claimable: the lag is its age, not the held rows' age.
    let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
    uow.raise(OrderingEvent::Noted {
        order_id: "fresh".into(),
        n: 0,
    });
    uow.commit().await.unwrap();
    clock.advance(TimeDelta::seconds(30));
    let (_, out, _) = ops(db, &outbox, &["outbox", "status", "--format", "json"]).await;
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["held"], 3, "{out}");
    assert_eq!(json["in_backoff"], 1, "{out}");
    assert_eq!(json["oldest_claimable_age"], 30.0, "{out}");
    assert_eq!(json["oldest_held_age"], 630.0, "{out}");
    let (_, out, _) = ops(db, &outbox, &["outbox", "status"]).await;
    assert!(
        out.contains("pending:           5 (in backoff: 1, held back: 3)"),
        "{out}"
    );
    assert!(out.contains("oldest claimable:  30.0s"), "{out}");
    assert!(out.contains("oldest held back:  630.0s"), "{out}");

    // Under `Skip` a dead row holds nothing back: only the row behind the retry is held.
    let skip = outbox_seaorm::ops::Operations::new(db.conn().clone(), outbox.clone())
        .with_relay_policy(Ordering::PerAggregate, DeadLetterPolicy::Skip)
        .status()
        .await
        .unwrap();
    assert_eq!(skip.held, 1, "{skip:?}");
    assert_eq!(skip.oldest_claimable_age, Some(Duration::from_secs(630)));
    // Unordered relays hold nothing back.
    let unordered = outbox_seaorm::ops::Operations::new(db.conn().clone(), outbox.clone())
        .with_relay_policy(Ordering::Unordered, DeadLetterPolicy::Block)
        .status()
        .await
        .unwrap();
    assert_eq!(unordered.held, 0, "{unordered:?}");
}
