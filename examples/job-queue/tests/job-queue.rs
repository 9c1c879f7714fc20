//! Runs the `example-job-queue` binary on a PostgreSQL database of its own, then reads the
//! outbox rows it left: both receipts done (order-1's after one failed attempt, kept in
//! `last_error`), the payout `failed` after its one attempt, never retried, and the alert
//! printed once, naming the payout's message id.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use outbox::Outbox;
use outbox::record::OutboxRecord;
use outbox::schema::OutboxStatus;
use outbox_tests::db::TestDb;
use tokio::process::Command;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_is_retried_and_a_failed_payout_alerts_once() {
    let test = "a_job_is_retried_and_a_failed_payout_alerts_once";
    let Some(db) = TestDb::postgres(test).await else {
        return;
    };
    let run = Command::new(env!("CARGO_BIN_EXE_example-job-queue"))
        .env("DATABASE_URL", db.url())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("the example finished within 60 s")
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");

    // The rows' final state, as an operator sees it (`outbox status`, `outbox dead list`).
    let rows = OutboxRecord::list(db.conn(), &Outbox::default(), 10)
        .await
        .unwrap();
    let summary: Vec<_> = rows
        .iter()
        .map(|row| {
            let key = row.worker_key.as_deref().unwrap();
            (
                row.envelope.aggregate_id.as_str(),
                key,
                row.retryable,
                row.status,
                row.attempts,
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("order-1", "notifications", true, OutboxStatus::Published, 1),
            ("order-2", "notifications", true, OutboxStatus::Published, 0),
            ("seller-7", "payments", false, OutboxStatus::Failed, 1),
        ],
        "{stdout}"
    );
    assert!(rows[0].last_error.as_deref().unwrap().contains("421"));
    assert!(
        rows[2]
            .last_error
            .as_deref()
            .unwrap()
            .contains("bank timed out")
    );
    assert!(rows[2].published_at.is_none());

    let payout = rows[2].envelope.message_id;
    let alerts: Vec<&str> = stdout
        .lines()
        .filter(|line| line.starts_with("ALERT"))
        .collect();
    assert_eq!(alerts.len(), 1, "the alert hook fires once: {stdout}");
    assert!(alerts[0].starts_with(&format!("ALERT {payout} failed after 1 attempt")));
    let sent = stdout
        .lines()
        .filter(|line| line.starts_with("sent the receipt"))
        .count();
    assert_eq!(sent, 2, "each receipt sent once: {stdout}");
    db.close().await;
}
