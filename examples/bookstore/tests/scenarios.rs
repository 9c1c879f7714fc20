//! Every scenario's `run`, with its measured facts asserted one by one: scenarios 1–4 on
//! SQLite (a temporary folder), PostgreSQL and MariaDB; 5 on PostgreSQL; 6 on PostgreSQL
//! and MariaDB; 5 and 6 skipped (not failed) on SQLite. Scenarios 3–6 with the log relay
//! on a `wal_level = logical` cluster of the tests' own (`outbox_tests::logical_pg`), and
//! skipped with the log relay's reason on SQLite.
//!
//! PostgreSQL and MariaDB tests fail when the server is unreachable, saying what is
//! missing; with `OUTBOX_ALLOW_MISSING_SERVICES=1` they skip with a loud message instead.

use std::path::Path;

use bookstore::broker::BrokerChoice;
use bookstore::env::{DatabaseTarget, Env, RelayChoice};
use bookstore::error::DemoError;
use bookstore::job_queue;
use bookstore::scenarios::{
    self, Report, scenario1, scenario2, scenario3, scenario4, scenario5, scenario6,
};
use outbox_seaorm::schema::OutboxStatus;
use outbox_tests::logical_pg::LogicalPostgres;
use outbox_tests::{Service, service};

fn env(database: DatabaseTarget) -> Env {
    Env {
        database,
        broker: BrokerChoice::InProcess,
        relay: RelayChoice::Polling,
    }
}

fn sqlite(dir: &Path) -> Env {
    env(DatabaseTarget::sqlite_in(dir))
}

fn server(kind: Service, test: &str) -> Option<Env> {
    let url = service(kind, test)?;
    let target = DatabaseTarget::parse(&url).expect("a server URL");
    Some(env(target))
}

fn assert_article_facts(report: &dyn Report) {
    assert!(
        report.deviations().is_empty(),
        "scenario {}: {:?}\n{}",
        report.number(),
        report.deviations(),
        report.lines().join("\n")
    );
}

async fn scenario_1(env: &Env) {
    let report = scenario1::run(env).await.expect("scenario 1 runs");
    let error = report.handler_error.as_deref().expect("the handler fails");
    assert!(error.contains("unavailable"), "{error}");
    assert_eq!(report.orders_in_db, 1, "the order is committed");
    assert_eq!(report.messages_on_broker, 0, "its event is lost");
    assert_eq!(report.lines()[1], "orders in db: 1, messages on broker: 0");
    assert_article_facts(&report);
}

async fn scenario_2(env: &Env) {
    let report = scenario2::run(env).await.expect("scenario 2 runs");
    assert_eq!(report.click_1_error, None);
    assert!(
        report.click_2_duplicate_checkout,
        "{:?}",
        report.click_2_error
    );
    assert_eq!(report.orders_in_db, 1);
    assert_eq!(report.messages_on_broker, 2, "both clicks published");
    assert_eq!(
        report.ghost_events, 1,
        "one event announces an order that does not exist"
    );
    assert_article_facts(&report);
}

async fn scenario_3(env: &Env) {
    let report = scenario3::run(env).await.expect("scenario 3 runs");
    assert_eq!(
        report.click_1_error, None,
        "checkout succeeds while the broker is down"
    );
    assert!(
        report.click_2_duplicate_checkout,
        "{:?}",
        report.click_2_error
    );
    assert_eq!(report.published_while_down, 0);
    assert_eq!(report.retried_while_down, 1);
    assert!(
        report.last_error.is_some(),
        "the failure is recorded on the row"
    );
    assert_eq!(report.published_after_back, 1);
    assert_eq!(report.orders_in_db, 1);
    assert_eq!(
        report.outbox_rows, 1,
        "the rejected click wrote no outbox row"
    );
    assert_eq!(report.attempts, 1);
    assert!(report.all_published);
    assert_eq!(report.messages_on_broker, 1);
    assert_article_facts(&report);
}

async fn scenario_4(env: &Env) {
    let report = scenario4::run(env).await.expect("scenario 4 runs");
    assert_eq!(report.relay_1, "Process crashed (simulated)");
    assert!(report.pending_after_crash, "relay #1 never marked the row");
    assert_eq!(report.relay_2_published, 1);
    assert_eq!(report.messages_on_broker, 2);
    assert_eq!(report.distinct_ids, 1, "the same message id twice");
    assert_eq!((report.applied(), report.duplicates()), (1, 1));
    assert_eq!(report.deliveries[0].outcome, "applied");
    assert_eq!(report.deliveries[1].outcome, "duplicate, skipped");
    assert!(
        report
            .deliveries
            .iter()
            .all(|d| d.event_type == "bookstore.ordering.order-placed.v1")
    );
    assert_eq!(
        (
            report.dune.title.as_str(),
            report.dune.on_hand,
            report.dune.reserved
        ),
        ("Dune", 5, 2)
    );
    assert_article_facts(&report);
}

async fn scenario_5(env: &Env) {
    let report = scenario5::run(env).await.expect("scenario 5 runs");
    assert_eq!((report.ada_sequence, report.alan_sequence), (1, 2));
    assert_eq!(
        report.visible_before_ada_commits,
        [(2, "Alan".to_owned())],
        "Ada's row is not visible before her commit"
    );
    assert_eq!(report.watermark_published, [(2, "Alan".to_owned())]);
    assert_eq!(report.watermark, 2);
    assert_eq!(
        report.watermark_rows_after_ada_commits, 0,
        "the watermark lost Ada's event"
    );
    assert_eq!(report.flag_relay_finds, [(1, "Ada".to_owned())]);
    assert_eq!(
        report.relay_published,
        ["Alan", "Ada"],
        "the relay lost nothing"
    );
    assert_article_facts(&report);
}

async fn scenario_6(env: &Env) {
    let report = scenario6::run(env).await.expect("scenario 6 runs");
    assert_eq!(report.rows, [1, 2, 3, 4, 5, 6]);
    assert_eq!(report.relay_a, [1, 2, 3]);
    assert_eq!(report.relay_b, [4, 5, 6]);
    assert!(report.disjoint() && report.complete());
    assert_eq!(report.published, (3, 3));
    assert_eq!(report.messages_on_broker, 6);
    assert_article_facts(&report);
}

/// Block 7, the job-queue mode: the e-mail fails twice and is retried with
/// backoff; the payout is not retryable: one attempt, `failed`, one alert, never run again.
async fn job_queue_block(env: &Env) {
    let report = job_queue::run_in(env)
        .await
        .expect("the job-queue block runs");
    assert_eq!(report.orders_stored, 1);
    assert_eq!(report.mail_worker_key.as_deref(), Some("notifications"));
    assert_eq!(report.mail_attempts, 3, "failed twice, then sent");
    assert_eq!(report.mail_failed_attempts, 2);
    assert_eq!(report.mail_status, OutboxStatus::Published);
    assert_eq!(report.payout_worker_key.as_deref(), Some("payments"));
    assert!(!report.payout_retryable);
    assert_eq!(report.payout_attempts, 1, "the bank is called once");
    assert_eq!(report.payout_recorded_attempts, 1);
    assert_eq!(report.payout_status, OutboxStatus::Failed);
    assert!(report.passes_after_failure >= 1);
    assert_eq!(report.alerts_fired, 1, "the alert hook fires once");
    assert!(report.failed_rows_in_status >= 1);
    assert_article_facts(&report);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenarios_1_to_4_on_sqlite() {
    let dir = tempfile::tempdir().expect("temporary folder");
    let env = sqlite(dir.path());
    scenario_1(&env).await;
    scenario_2(&env).await;
    scenario_3(&env).await;
    scenario_4(&env).await;
    job_queue_block(&env).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenarios_1_to_4_on_sqlite_in_memory() {
    let env = env(DatabaseTarget::SqliteMemory);
    scenario_1(&env).await;
    scenario_2(&env).await;
    scenario_3(&env).await;
    scenario_4(&env).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenarios_5_and_6_are_skipped_on_sqlite_with_the_reason() {
    let dir = tempfile::tempdir().expect("temporary folder");
    let env = sqlite(dir.path());
    match scenario5::run(&env).await {
        Err(DemoError::Skipped { reason }) => assert!(reason.contains("PostgreSQL"), "{reason}"),
        other => panic!("scenario 5 on SQLite: {other:?}"),
    }
    match scenario6::run(&env).await {
        Err(DemoError::Skipped { reason }) => {
            assert!(reason.contains("SKIP LOCKED"), "{reason}");
        }
        other => panic!("scenario 6 on SQLite: {other:?}"),
    }
    let outcome = scenarios::outcome(&env, 5).await;
    assert!(outcome.is_ok(), "a skip is not a failure");
    assert!(
        scenarios::block(5, RelayChoice::Polling, &outcome)[1]
            .starts_with("  skipped: needs PostgreSQL")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_scenario_on_postgres() {
    let Some(env) = server(Service::Postgres, "every_scenario_on_postgres") else {
        return;
    };
    scenario_1(&env).await;
    scenario_2(&env).await;
    scenario_3(&env).await;
    scenario_4(&env).await;
    scenario_5(&env).await;
    scenario_6(&env).await;
    job_queue_block(&env).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenarios_1_to_4_and_6_on_mariadb() {
    let Some(env) = server(Service::MariaDb, "scenarios_1_to_4_and_6_on_mariadb") else {
        return;
    };
    scenario_1(&env).await;
    scenario_2(&env).await;
    scenario_3(&env).await;
    scenario_4(&env).await;
    assert!(matches!(
        scenario5::run(&env).await,
        Err(DemoError::Skipped { .. })
    ));
    scenario_6(&env).await;
    job_queue_block(&env).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenarios_3_to_6_with_the_log_relay() {
    let Some(cluster) = LogicalPostgres::shared("scenarios_3_to_6_with_the_log_relay").await else {
        return;
    };
    let mut env = env(DatabaseTarget::Postgres(cluster.admin_url()));
    env.relay = RelayChoice::Log;

    let three = scenario3::log::run(&env).await.expect("scenario 3 runs");
    assert_eq!(
        three.click_1_error, None,
        "checkout succeeds while the broker is down"
    );
    assert!(
        three.click_2_duplicate_checkout,
        "{:?}",
        three.click_2_error
    );
    assert_eq!(
        (three.published_while_down, three.published_after_back),
        (0, 1)
    );
    assert!(three.refused_while_down >= 1, "{three:?}");
    assert!(
        three.relay_retried >= 1,
        "the refusal was retried: {three:?}"
    );
    assert_eq!(three.relay_dead_lettered, 0);
    assert!(three.rows_pending, "the log relay marks no row");
    assert_eq!((three.outbox_rows, three.messages_on_broker), (1, 1));
    assert_article_facts(&three);

    let four = scenario4::log::run(&env).await.expect("scenario 4 runs");
    assert!(
        four.pending_after_crash,
        "relay #1 died before its acknowledgement reached the server: {four:?}"
    );
    assert_eq!(four.relay_2_published, 1);
    assert_eq!((four.messages_on_broker, four.distinct_ids), (2, 1));
    assert_eq!((four.applied(), four.duplicates()), (1, 1));
    assert_eq!((four.dune.on_hand, four.dune.reserved), (5, 2));
    assert_article_facts(&four);

    let five = scenario5::log::run(&env).await.expect("scenario 5 runs");
    assert_eq!((five.ada_sequence, five.alan_sequence), (1, 2));
    assert_eq!(
        five.watermark_rows_after_ada_commits, 0,
        "the watermark lost Ada's"
    );
    assert_eq!(
        five.log_published_before_ada_commits,
        [(2, "Alan".to_owned())]
    );
    assert_eq!(
        five.log_order,
        [(2, "Alan".to_owned()), (1, "Ada".to_owned())],
        "commit order, nothing lost"
    );
    assert_article_facts(&five);

    let six = scenario6::log::run(&env).await.expect("scenario 6 runs");
    assert_eq!(six.lease_before.as_deref(), Some("relay-a"));
    assert_eq!(six.relay_a, [1, 2, 3]);
    assert_eq!(six.relay_b_while_a_ran, 0, "the standby publishes nothing");
    assert_eq!(six.relay_b, [4, 5, 6]);
    assert_eq!(six.lease_after.as_deref(), Some("relay-b"));
    assert!(
        six.takeover <= six.lease_ttl + scenario6::log::TAKEOVER_MARGIN,
        "{:?}",
        six.takeover
    );
    assert_eq!((six.messages_on_broker, six.distinct_ids), (6, 6));
    assert_article_facts(&six);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_relay_scenarios_are_skipped_on_sqlite_with_the_reason() {
    let dir = tempfile::tempdir().expect("temporary folder");
    let mut env = sqlite(dir.path());
    env.relay = RelayChoice::Log;
    for number in 3..=6 {
        match scenarios::run(&env, number).await {
            Err(DemoError::Skipped { reason }) => assert!(
                reason.starts_with("--relay log: the log relay needs PostgreSQL"),
                "{reason}"
            ),
            other => panic!("scenario {number} with the log relay on SQLite: {other:?}"),
        }
    }
}
