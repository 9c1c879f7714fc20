//! The demo binary, end to end: `bookstore` with no flags prints scenarios 1–4 with the
//! article's facts and 5–6 as skipped, and exits 0; with `--database postgres://…` it runs
//! all six; with `--database mysql://…` all but 5; with `--broker nats` the same facts come
//! through NATS JetStream. With `--relay log` on a `wal_level = logical` cluster of the
//! tests' own, or on a MariaDB of their own with its binary log on, scenarios 3–6 run
//! through the log relay; on SQLite (or a server without logical decoding or binary log)
//! they are skipped with the log relay's reason. Exit codes and the key
//! lines are asserted.
//!
//! Service-backed runs fail when the service is unreachable, saying what is missing; with
//! `OUTBOX_ALLOW_MISSING_SERVICES=1` they skip with a loud message instead.

use std::process::{Command, Output};

use outbox_tests::binlog_mariadb::BinlogMariaDb;
use outbox_tests::logical_pg::LogicalPostgres;
use outbox_tests::{Service, service};
use sea_orm::{ConnectionTrait, Database, DbBackend, Statement};

fn demo(args: &[&str]) -> (String, Output) {
    let output = Command::new(env!("CARGO_BIN_EXE_bookstore"))
        .args(args)
        .output()
        .expect("the demo binary runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    eprintln!(
        "--- bookstore {}\n{stdout}{}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    (stdout, output)
}

/// The block of scenario `n` (from its title line to the next blank line).
fn block(stdout: &str, n: u8) -> String {
    let start = stdout
        .find(&format!("\n{n}) "))
        .unwrap_or_else(|| panic!("no block for scenario {n} in:\n{stdout}"));
    let rest = &stdout[start + 1..];
    let end = rest.find("\n\n").unwrap_or(rest.len());
    rest[..end].to_owned()
}

fn assert_lines(block: &str, expected: &[&str]) {
    for line in expected {
        assert!(
            block.lines().any(|l| l.trim_start().starts_with(line)),
            "missing `{line}` in:\n{block}"
        );
    }
}

/// Scenarios 1–4 with the article's facts.
fn assert_scenarios_1_to_4(stdout: &str) {
    let one = block(stdout, 1);
    assert_lines(
        &one,
        &[
            "1) Commit, then publish; broker is down",
            "claim: ",
            "handler failed: ",
            "orders in db: 1, messages on broker: 0",
            "check: ok",
        ],
    );
    let two = block(stdout, 2);
    assert_lines(
        &two,
        &[
            "2) Publish, then commit; the same checkout is submitted twice",
            "click 2: checkout ",
            "orders in db: 1, messages on broker: 2",
            "check: ok",
        ],
    );
    let three = block(stdout, 3);
    assert_lines(
        &three,
        &[
            "3) Outbox: same two scenarios",
            "click 2: checkout ",
            "relay while broker is down: published 0",
            "relay after broker is back: published 1",
            "orders in db: 1, outbox rows: 1, attempts: 1, messages on broker: 1",
            "check: ok",
        ],
    );
    let four = block(stdout, 4);
    assert_lines(
        &four,
        &[
            "4) Relay crashes between publish and mark; consumer has an inbox",
            "relay #1: Process crashed (simulated)",
            "relay #2 (restart): published 1",
            "on broker: 2 messages, distinct ids: 1",
            "consumer: bookstore.ordering.order-placed.v1 applied",
            "consumer: bookstore.ordering.order-placed.v1 duplicate, skipped",
            "Dune: on hand 5, reserved 2",
            "check: ok",
        ],
    );
}

fn assert_scenario_5(stdout: &str) {
    assert_lines(
        &block(stdout, 5),
        &[
            "5) High-water mark vs processed flag",
            "Ada got sequence 1 (not committed), Alan got 2 (committed)",
            "watermark relay publishes #2 bookstore.ordering.order-placed.v1 (Alan)",
            "Ada's transaction commits; watermark relay asks for sequence > 2: 0 rows",
            "flag relay finds #1 bookstore.ordering.order-placed.v1 (Ada)",
            "check: ok",
        ],
    );
}

fn assert_scenario_6(stdout: &str) {
    assert_lines(
        &block(stdout, 6),
        &[
            "6) Two relay instances with FOR UPDATE SKIP LOCKED",
            "relay A claimed [1, 2, 3], relay B claimed [4, 5, 6]",
            "disjoint: yes, together every row: yes",
            "check: ok",
        ],
    );
}

fn assert_job_queue(stdout: &str) {
    let seven = block(stdout, 7);
    assert_lines(
        &seven,
        &[
            "7) Job-queue mode (no broker: the outbox is the queue)",
            "check: ok",
        ],
    );
    for fact in [
        "mail server called 3×, failed 2×",
        "→ published",
        "bank called 1× → failed after 1 attempt(s)",
        "alert hook fired 1×",
    ] {
        assert!(seven.contains(fact), "missing `{fact}` in:\n{seven}");
    }
}

#[test]
fn the_default_demo_prints_scenarios_1_to_4_and_skips_5_and_6() {
    let (stdout, output) = demo(&[]);
    assert!(output.status.success(), "exit status {:?}", output.status);
    assert!(stdout.contains("broker:   in-process"), "{stdout}");
    assert!(stdout.contains("database: SQLite files"), "{stdout}");
    assert_scenarios_1_to_4(&stdout);
    assert_lines(&block(&stdout, 5), &["skipped: needs PostgreSQL"]);
    assert_lines(
        &block(&stdout, 6),
        &["skipped: needs PostgreSQL or MariaDB"],
    );
    assert_job_queue(&stdout);
    assert!(!stdout.contains("FAILED"), "{stdout}");
    assert!(
        stdout.contains("5 scenario(s) with the article's facts, 2 skipped, 0 failed"),
        "{stdout}"
    );
}

#[test]
fn one_scenario_and_bad_flags() {
    let (stdout, output) = demo(&["--scenario", "4"]);
    assert!(output.status.success());
    assert!(
        stdout.contains("4) Relay crashes") && !stdout.contains("1) Commit"),
        "{stdout}"
    );

    let (_, output) = demo(&["--scenario", "8"]);
    assert_eq!(output.status.code(), Some(2), "clap rejects scenario 8");
    let (_, output) = demo(&["--database", "oracle://nowhere"]);
    assert_eq!(output.status.code(), Some(2), "an unsupported database URL");
}

#[test]
fn the_demo_on_postgres_runs_all_six() {
    let Some(url) = service(Service::Postgres, "the_demo_on_postgres_runs_all_six") else {
        return;
    };
    let (stdout, output) = demo(&["--database", &url]);
    assert!(output.status.success(), "exit status {:?}", output.status);
    assert_scenarios_1_to_4(&stdout);
    assert_scenario_5(&stdout);
    assert_scenario_6(&stdout);
    assert_job_queue(&stdout);
    assert!(stdout.contains("7 scenario(s) with the article's facts, 0 skipped, 0 failed"));
}

#[test]
fn the_demo_on_mariadb_runs_all_but_5() {
    let Some(url) = service(Service::MariaDb, "the_demo_on_mariadb_runs_all_but_5") else {
        return;
    };
    let (stdout, output) = demo(&["--database", &url]);
    assert!(output.status.success(), "exit status {:?}", output.status);
    assert_scenarios_1_to_4(&stdout);
    assert_lines(&block(&stdout, 5), &["skipped: needs PostgreSQL"]);
    assert_scenario_6(&stdout);
}

#[cfg(feature = "nats")]
#[test]
fn the_demo_through_nats_jetstream() {
    let Some(nats) = service(Service::Nats, "the_demo_through_nats_jetstream") else {
        return;
    };
    let (stdout, output) = demo(&["--broker", "nats", "--nats-url", &nats]);
    assert!(output.status.success(), "exit status {:?}", output.status);
    assert!(stdout.contains("broker:   NATS JetStream"), "{stdout}");
    assert_scenarios_1_to_4(&stdout);
    assert!(
        block(&stdout, 1).contains("handler failed: unavailable"),
        "the publisher went through the cut proxy"
    );
}

#[cfg(feature = "redis")]
#[test]
fn the_demo_through_redis_streams_on_postgres() {
    let test = "the_demo_through_redis_streams_on_postgres";
    let (Some(redis), Some(postgres)) = (
        service(Service::Redis, test),
        service(Service::Postgres, test),
    ) else {
        return;
    };
    let (stdout, output) = demo(&[
        "--broker",
        "redis",
        "--redis-url",
        &redis,
        "--database",
        &postgres,
    ]);
    assert!(output.status.success(), "exit status {:?}", output.status);
    assert_scenarios_1_to_4(&stdout);
    assert_scenario_5(&stdout);
    assert_scenario_6(&stdout);
}

#[cfg(feature = "rabbitmq")]
#[test]
fn the_demo_through_rabbitmq_on_mariadb() {
    let test = "the_demo_through_rabbitmq_on_mariadb";
    let (Some(amqp), Some(mariadb)) = (
        service(Service::RabbitMq, test),
        service(Service::MariaDb, test),
    ) else {
        return;
    };
    let (stdout, output) = demo(&[
        "--broker",
        "rabbitmq",
        "--amqp-url",
        &amqp,
        "--database",
        &mariadb,
    ]);
    assert!(output.status.success(), "exit status {:?}", output.status);
    assert_scenarios_1_to_4(&stdout);
    assert_scenario_6(&stdout);
}

/// Scenarios 3–6 with the log relay and the article's facts.
fn assert_log_scenarios_3_to_6(stdout: &str) {
    let three = block(stdout, 3);
    assert_lines(
        &three,
        &[
            "3) Outbox: same two scenarios",
            "click 2: checkout ",
            "log relay while broker is down: published 0, refused ",
            "log relay after broker is back: published 1 (the retry; retried ",
            "orders in db: 1, outbox rows: 1 (pending: the log relay reads the log, it does \
             not mark rows), messages on broker: 1",
            "check: ok",
        ],
    );
    assert!(three.contains("dead-lettered 0"), "{three}");
    let four = block(stdout, 4);
    assert_lines(
        &four,
        &[
            "4) Relay crashes between publish and acknowledgement; consumer has an inbox",
            "relay #1: Process crashed (simulated) after the broker confirmed, before the \
             acknowledgement reached the server",
            "slot after the crash: the order's commit not acknowledged",
            "relay #2 (restart): published 1",
            "on broker: 2 messages, distinct ids: 1",
            "consumer: bookstore.ordering.order-placed.v1 applied",
            "consumer: bookstore.ordering.order-placed.v1 duplicate, skipped",
            "Dune: on hand 5, reserved 2",
            "check: ok",
        ],
    );
    assert_lines(
        &block(stdout, 5),
        &[
            "5) High-water mark vs processed flag",
            "Ada got sequence 1 (not committed), Alan got 2 (committed)",
            "watermark relay publishes #2 bookstore.ordering.order-placed.v1 (Alan)",
            "Ada's transaction commits; watermark relay asks for sequence > 2: 0 rows",
            "log relay while Ada's transaction is open: published Alan (seq 2)",
            "log order: Alan (seq 2), Ada (seq 1) (commit order",
            "check: ok",
        ],
    );
    let six = block(stdout, 6);
    assert_lines(
        &six,
        &[
            "6) Two relay instances: two log relays on one slot",
            "lease held by relay-a; relay B stands by: published 0 while relay A ran",
            "relay A published [1, 2, 3] (acknowledged), then was killed",
            "relay B took over ",
            "messages on broker: 6, distinct ids: 6",
            "check: ok",
        ],
    );
    assert!(
        six.contains("(lease TTL 2 s) and published [4, 5, 6]; lease held by relay-b"),
        "{six}"
    );
}

/// The replication slots left on the server of `admin_url`.
async fn slots_left(admin_url: &str) -> Vec<String> {
    let admin = Database::connect(admin_url)
        .await
        .expect("the cluster answers");
    let rows = admin
        .query_all_raw(Statement::from_string(
            DbBackend::Postgres,
            "SELECT slot_name::text AS name FROM pg_replication_slots",
        ))
        .await
        .expect("pg_replication_slots");
    let _ = admin.close().await;
    rows.iter()
        .map(|row| row.try_get::<String>("", "name").expect("a slot name"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_with_the_log_relay_runs_3_to_6_on_a_logical_cluster() {
    let test = "the_demo_with_the_log_relay_runs_3_to_6_on_a_logical_cluster";
    let Some(cluster) = LogicalPostgres::shared(test).await else {
        return;
    };
    let url = cluster.admin_url();
    let (stdout, output) = tokio::task::spawn_blocking({
        let url = url.clone();
        move || demo(&["--database", &url, "--relay", "log"])
    })
    .await
    .expect("the demo ran");
    assert!(output.status.success(), "exit status {:?}", output.status);
    assert!(stdout.contains("relay:    log"), "{stdout}");
    assert_log_scenarios_3_to_6(&stdout);
    // 1, 2 and 7 do not involve a relay choice: as with the polling relay.
    assert_lines(
        &block(&stdout, 1),
        &["orders in db: 1, messages on broker: 0", "check: ok"],
    );
    assert_lines(
        &block(&stdout, 2),
        &["orders in db: 1, messages on broker: 2", "check: ok"],
    );
    assert_job_queue(&stdout);
    assert!(
        stdout.contains("7 scenario(s) with the article's facts, 0 skipped, 0 failed"),
        "{stdout}"
    );
    assert_eq!(
        slots_left(&url).await,
        Vec::<String>::new(),
        "every scenario dropped its slot"
    );
}

/// `--relay log --database mysql://…` on a MariaDB with its binary log: scenarios 3–6 run
/// through the log relay on the binlog, with the article's facts (block 5: commit order).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_with_the_log_relay_runs_3_to_6_on_mariadbs_binary_log() {
    let test = "the_demo_with_the_log_relay_runs_3_to_6_on_mariadbs_binary_log";
    let Some(server) = BinlogMariaDb::shared(test).await else {
        return;
    };
    let url = server.admin_url();
    let (stdout, output) = tokio::task::spawn_blocking({
        let url = url.clone();
        move || demo(&["--database", &url, "--relay", "log"])
    })
    .await
    .expect("the demo ran");
    assert!(
        output.status.success(),
        "exit status {:?}\n{stdout}",
        output.status
    );
    assert!(stdout.contains("relay:    log"), "{stdout}");
    assert_log_scenarios_3_to_6(&stdout);
    assert!(
        stdout.contains("7 scenario(s) with the article's facts, 0 skipped, 0 failed"),
        "{stdout}"
    );
}

/// The machine's MariaDB runs without its binary log: the log relay's start-up check
/// skips the scenario, saying what to change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_relay_on_mariadb_without_a_binary_log_skips_with_the_reason() {
    let test = "the_log_relay_on_mariadb_without_a_binary_log_skips_with_the_reason";
    let Some(url) = service(Service::MariaDb, test) else {
        return;
    };
    let admin = Database::connect(&url).await.expect("MariaDB answers");
    let log_bin: i64 = admin
        .query_one_raw(Statement::from_string(
            DbBackend::MySql,
            "SELECT @@log_bin AS log_bin",
        ))
        .await
        .expect("log_bin")
        .expect("a row")
        .try_get("", "log_bin")
        .expect("a number");
    let _ = admin.close().await;
    let (stdout, output) = tokio::task::spawn_blocking({
        let url = url.clone();
        move || demo(&["--database", &url, "--relay", "log", "--scenario", "3"])
    })
    .await
    .expect("the demo ran");
    assert!(output.status.success(), "exit status {:?}", output.status);
    let three = block(&stdout, 3);
    if log_bin == 1 {
        assert!(!three.contains("skipped"), "{three}");
    } else {
        assert_lines(
            &three,
            &["skipped: --relay log: MariaDB runs with log_bin = "],
        );
        assert!(three.contains("--log-bin"), "{three}");
    }
}

#[test]
fn the_log_relay_on_sqlite_skips_3_to_6_with_the_reason() {
    let (stdout, output) = demo(&["--relay", "log"]);
    assert!(output.status.success(), "exit status {:?}", output.status);
    assert!(stdout.contains("relay:    log"), "{stdout}");
    for n in 3..=6 {
        assert_lines(
            &block(&stdout, n),
            &[
                "skipped: --relay log: the log relay needs PostgreSQL with the feature log-relay, \
               or MariaDB with the feature log-relay-mariadb and a table-mode outbox (found \
               SQLite)",
            ],
        );
    }
    assert_lines(&block(&stdout, 1), &["check: ok"]);
    assert_lines(&block(&stdout, 2), &["check: ok"]);
    assert_job_queue(&stdout);
    assert!(
        stdout.contains("3 scenario(s) with the article's facts, 4 skipped, 0 failed"),
        "{stdout}"
    );
}

/// The machine's PostgreSQL runs with `wal_level = replica`: the log relay's start-up check
/// skips the scenario, saying what to change (on a server with logical decoding it runs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_relay_without_logical_decoding_skips_with_the_reason() {
    let test = "the_log_relay_without_logical_decoding_skips_with_the_reason";
    let Some(url) = service(Service::Postgres, test) else {
        return;
    };
    let admin = Database::connect(&url).await.expect("PostgreSQL answers");
    let level: String = admin
        .query_one_raw(Statement::from_string(
            DbBackend::Postgres,
            "SELECT current_setting('wal_level') AS level",
        ))
        .await
        .expect("wal_level")
        .expect("a row")
        .try_get("", "level")
        .expect("text");
    let _ = admin.close().await;
    let (stdout, output) = tokio::task::spawn_blocking({
        let url = url.clone();
        move || demo(&["--database", &url, "--relay", "log", "--scenario", "3"])
    })
    .await
    .expect("the demo ran");
    assert!(output.status.success(), "exit status {:?}", output.status);
    let three = block(&stdout, 3);
    if level == "logical" {
        assert_lines(&three, &["check: ok"]);
    } else {
        assert_lines(
            &three,
            &[&format!(
                "skipped: --relay log: PostgreSQL runs with wal_level = {level}; logical \
                 decoding needs wal_level = logical"
            )],
        );
    }
}
