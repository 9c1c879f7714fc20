//! The `outbox` operations command line (feature `cli` of outbox-seaorm) on every backend:
//! status, dead letters, requeue, skip (recorded) and purge.

// Scenarios are plain async functions called by generated #[tokio::test]s, which clippy's
// `allow-unwrap-in-tests` does not see as tests.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

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

backend_tests!(operations_command_line);

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
    let mut relay = Relay::builder(db.conn().clone(), outbox.clone(), broker.clone())
        .build()
        .unwrap();
    assert_eq!(relay.drain().await.unwrap().dead_lettered, 1);

    let (code, out, _) = ops(db, &outbox, &["outbox", "status"]).await;
    assert_eq!(code, 0);
    assert!(
        out.contains("pending:           1 (in backoff: 0)"),
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
