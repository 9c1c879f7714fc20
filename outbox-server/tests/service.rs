//! The `outbox` binary as an operator runs it: several tenant databases in one process, one
//! of them down; publishing, `/healthz`, `/readyz`, `/metrics` on their own address, and a
//! graceful stop on SIGTERM.

#![allow(clippy::unwrap_used)]

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use outbox_brokers::nats::{self, async_nats};
use outbox_core::Raise;
use outbox_seaorm::{Outbox, schema};
use outbox_tests::Service as TestService;
use outbox_tests::bookstore::{OrderingContracts, OrderingEvent};
use outbox_tests::db::TestDb;
use support::{ServiceProcess, eventually, free_port, get, sample};

/// Commits `orders` events to `db`'s outbox.
async fn place(db: &TestDb, prefix: &str, orders: usize) {
    let outbox = Outbox::default();
    let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
    for n in 0..orders {
        uow.raise(OrderingEvent::Noted {
            order_id: format!("{prefix}-{n}"),
            n: 0,
        });
    }
    uow.commit().await.unwrap();
}

/// Messages in the JetStream stream `name`.
async fn stream_messages(client: &async_nats::Client, name: &str) -> u64 {
    let jetstream = async_nats::jetstream::new(client.clone());
    match jetstream.get_stream(name).await {
        Ok(mut stream) => stream.info().await.map_or(0, |info| info.state.messages),
        Err(_) => 0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_process_relays_for_several_databases_and_one_down_stalls_no_other() {
    const TEST: &str = "one_process_relays_for_several_databases_and_one_down_stalls_no_other";
    let Some(nats_url) = outbox_tests::service(TestService::Nats, TEST) else {
        return;
    };
    let Some(tenant_a) = TestDb::postgres(TEST).await else {
        return;
    };
    let Some(tenant_b) = TestDb::mariadb(TEST).await else {
        return;
    };
    for db in [&tenant_a, &tenant_b] {
        schema::install(db.conn(), &Outbox::default())
            .await
            .unwrap();
    }
    let id = uuid::Uuid::now_v7().simple().to_string();
    let subject = format!("srv{id}");
    let stream = format!("SRV_{id}");
    let console: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let ops: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let down = free_port();
    let broker = |name: &str| {
        format!(
            r#"
[relay.broker]
kind = "nats"
route = {{ kind = "event_type", prefix = "{subject}.{name}." }}
stream = {{ name = "{stream}", subjects = ["{subject}.>"] }}
"#
        )
    };
    let config = format!(
        r#"
[http]
listen = "{console}"
ops_listen = "{ops}"

[[relay]]
name = "tenant-a"
poll_interval = "100ms"
{}
[[relay]]
name = "tenant-b"
poll_interval = "100ms"
{}
[[relay]]
name = "tenant-down"
database_url = "postgres://postgres@127.0.0.1:{down}/nowhere"
{}
"#,
        broker("a"),
        broker("b"),
        broker("down"),
    );
    // URLs from the environment, as an operator would inject them.
    let env = [
        ("OUTBOX_RELAY_TENANT_A_DATABASE_URL", tenant_a.url()),
        ("OUTBOX_RELAY_TENANT_B_DATABASE_URL", tenant_b.url()),
        ("OUTBOX_RELAY_TENANT_A_BROKER_URL", nats_url.as_str()),
        ("OUTBOX_RELAY_TENANT_B_BROKER_URL", nats_url.as_str()),
        ("OUTBOX_RELAY_TENANT_DOWN_BROKER_URL", nats_url.as_str()),
    ];
    let mut service = ServiceProcess::start(&config, &env);
    place(&tenant_a, "a", 30).await;
    place(&tenant_b, "b", 20).await;

    let client = nats::connect(&nats_url).await.unwrap();
    assert!(
        eventually(Duration::from_secs(30), || async {
            stream_messages(&client, &stream).await >= 50
        })
        .await,
        "both live tenants publish while the third is down: {} of 50 in the stream\n{}",
        stream_messages(&client, &stream).await,
        service.log()
    );
    let jetstream = async_nats::jetstream::new(client.clone());
    let mut info = jetstream.get_stream(&stream).await.unwrap();
    let info = info.info().await.unwrap();
    assert_eq!(info.state.messages, 50, "each row published once");

    let (status, body) = get(ops, "/healthz").await.unwrap();
    assert_eq!((status, body.as_str()), (200, "ok\n"));

    // A relay holds the retention purge's lease (`cleanup/outbox`) for the moment of a purge
    // beside its 64 partition leases: read readiness again until no purge runs (CI once read
    // "65 leases" in the middle of one).
    let mut attempts = 0;
    let (status, body) = loop {
        let (status, body) = get(ops, "/readyz").await.unwrap();
        attempts += 1;
        if attempts == 50 || body.matches("\"64 leases\"").count() == 2 {
            break (status, body);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(status, 503, "{body}");
    let readiness: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(readiness["ready"], false);
    let relays = readiness["relays"].as_array().unwrap();
    let relay = |name: &str| {
        relays
            .iter()
            .find(|relay| relay["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {body}"))
    };
    for name in ["tenant-a", "tenant-b"] {
        assert_eq!(relay(name)["ready"], true, "{body}");
        assert_eq!(relay(name)["phase"], "running");
        assert_eq!(relay(name)["database"], "ok");
        assert_eq!(relay(name)["broker"], "ok");
        assert_eq!(
            relay(name)["leases"],
            "64 leases",
            "every partition: {body}"
        );
    }
    let down_relay = relay("tenant-down");
    assert_eq!(down_relay["ready"], false);
    assert_eq!(down_relay["database"], "not connected");
    // Its connection attempt fails (SQLx retries for the 5 s connect timeout), is shown,
    // and is retried.
    let retrying = eventually(Duration::from_secs(20), || async {
        let (_, body) = get(ops, "/readyz").await.unwrap();
        let readiness: serde_json::Value = serde_json::from_str(&body).unwrap();
        readiness["relays"][2]["phase"] == "retrying"
    })
    .await;
    let (_, body) = get(ops, "/readyz").await.unwrap();
    assert!(retrying, "{body}");
    let readiness: serde_json::Value = serde_json::from_str(&body).unwrap();
    let error = readiness["relays"][2]["error"].as_str().unwrap();
    assert!(
        error.starts_with(&format!(
            "database postgres://postgres@127.0.0.1:{down}/nowhere: "
        )),
        "{error}"
    );
    assert_eq!(readiness["relays"][0]["ready"], true, "still: {body}");

    let metrics_ready = eventually(Duration::from_secs(10), || async {
        let (_, text) = get(ops, "/metrics").await.unwrap();
        sample(
            &text,
            r#"outbox_pending_rows{outbox="outbox",relay="tenant-a"}"#,
        ) == Some(0.0)
    })
    .await;
    let (status, text) = get(ops, "/metrics").await.unwrap();
    assert_eq!(status, 200);
    assert!(metrics_ready, "{text}");
    assert_eq!(
        sample(
            &text,
            r#"outbox_published_total{outbox="outbox",relay="tenant-a"}"#
        ),
        Some(30.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            r#"outbox_published_total{outbox="outbox",relay="tenant-b"}"#
        ),
        Some(20.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"outbox_published_total{outbox="outbox",relay="tenant-down"}"#
        ),
        Some(0.0),
        "a relay's series exist before its first event"
    );
    assert_eq!(
        sample(
            &text,
            r#"outbox_publish_failures_total{outbox="outbox",relay="tenant-a",class="transient"}"#
        ),
        Some(0.0)
    );
    assert!(
        text.contains("# TYPE outbox_relay_batch_duration_seconds histogram"),
        "{text}"
    );
    assert!(
        sample(
            &text,
            r#"outbox_relay_heartbeat_timestamp_seconds{outbox="outbox",relay="tenant-b"}"#
        )
        .unwrap()
            > 1.7e9
    );

    // The console's address does not serve the operations endpoints when they have their own.
    let (status, _) = get(console, "/metrics").await.unwrap();
    assert_eq!(status, 404);

    // SIGTERM: the relays finish and the process exits 0.
    service.terminate();
    let exit = service.wait(Duration::from_secs(20));
    let log = service.log();
    assert!(
        exit.is_some_and(|status| status.success()),
        "{exit:?}\n{log}"
    );
    assert!(log.contains("outbox relay service stopped"), "{log}");
    assert!(
        log.contains("database step failing")
            && log.contains("work=relay service subject=tenant-down step=\"database connection\""),
        "the down tenant is retried: {log}"
    );
    let warnings = log
        .lines()
        .filter(|line| line.contains("subject=tenant-down") && line.contains(" WARN "))
        .count();
    assert!(
        (1..=2).contains(&warnings),
        "the down tenant warns once, then at most every 30 s: {log}"
    );
    assert!(!log.contains("panicked"), "{log}");
    let _ = jetstream.delete_stream(&stream).await;
    tenant_a.close().await;
    tenant_b.close().await;
}

/// A relay started before its tables exist (the usual order of a first deployment): it
/// waits quietly — one WARN that names the table and the fix, never a busy loop —, `/readyz`
/// says it is not ready and why, and once the tables are installed it publishes and is
/// ready (issue 32).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_waits_for_its_tables_and_says_why_it_is_not_ready() {
    const TEST: &str = "a_relay_waits_for_its_tables_and_says_why_it_is_not_ready";
    let Some(nats_url) = outbox_tests::service(TestService::Nats, TEST) else {
        return;
    };
    let Some(tenant) = TestDb::postgres(TEST).await else {
        return;
    };
    let id = uuid::Uuid::now_v7().simple().to_string();
    let (subject, stream) = (format!("bare{id}"), format!("BARE_{id}"));
    let ops: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let config = format!(
        r#"
[http]
ops_listen = "{ops}"

[[relay]]
name = "bare"
poll_interval = "100ms"
[relay.broker]
kind = "nats"
route = {{ kind = "event_type", prefix = "{subject}." }}
stream = {{ name = "{stream}", subjects = ["{subject}.>"] }}
"#
    );
    let env = [
        ("OUTBOX_RELAY_BARE_DATABASE_URL", tenant.url()),
        ("OUTBOX_RELAY_BARE_BROKER_URL", nats_url.as_str()),
    ];
    let mut service = ServiceProcess::start(&config, &env);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (status, body) = get(ops, "/readyz").await.unwrap();
    assert_eq!(status, 503, "{body}");
    let readiness: serde_json::Value = serde_json::from_str(&body).unwrap();
    let relay = &readiness["relays"][0];
    assert_eq!(relay["ready"], false, "{body}");
    assert_eq!(relay["phase"], "running", "{body}");
    assert_eq!(relay["database"], "ok", "the database answers: {body}");
    let error = relay["error"].as_str().unwrap();
    // The first step of a look that reads a missing table names it: the move of scheduled
    // rows (which runs before the batch) or the batch.
    assert!(
        error.starts_with("batch: table ") || error.starts_with("scheduled rows: table "),
        "{error}"
    );
    assert!(error.contains("does not exist"), "{error}");
    assert!(error.contains("schema::install"), "{error}");
    let log = service.log();
    // One WARN per failing step in 5 s (the move of scheduled rows and the batch both read
    // missing tables), not one per retry.
    let warnings: Vec<String> = log
        .lines()
        .filter(|line| line.contains(" WARN "))
        .map(str::to_owned)
        .collect();
    let steps: std::collections::BTreeSet<&str> = warnings
        .iter()
        .filter_map(|line| line.split(" step=").nth(1)?.split(" error=").next())
        .collect();
    assert_eq!(
        warnings.len(),
        steps.len(),
        "one WARN per step in 5 s: {log}"
    );
    assert!(steps.contains("\"batch\""), "{log}");
    assert!(steps.len() <= 2, "{log}");
    assert!(
        warnings
            .iter()
            .all(|line| line.contains("database step failing")),
        "{log}"
    );
    assert!(!log.contains("relay batch failed"), "{log}");

    schema::install(tenant.conn(), &Outbox::default())
        .await
        .unwrap();
    place(&tenant, "bare", 3).await;
    let client = nats::connect(&nats_url).await.unwrap();
    assert!(
        eventually(Duration::from_secs(10), || async {
            stream_messages(&client, &stream).await >= 3
        })
        .await,
        "published once the tables exist: {}",
        service.log()
    );
    assert!(
        eventually(Duration::from_secs(10), || async {
            get(ops, "/readyz")
                .await
                .is_ok_and(|(status, _)| status == 200)
        })
        .await,
        "ready: {}",
        get(ops, "/readyz").await.unwrap().1
    );
    service.terminate();
    let exit = service.wait(Duration::from_secs(20));
    let log = service.log();
    assert!(exit.is_some_and(|status| status.success()), "{log}");
    assert!(log.contains("database step recovered"), "{log}");
    assert_eq!(
        log.lines().filter(|line| line.contains(" WARN ")).count(),
        warnings.len(),
        "no WARN after the tables came: {log}"
    );
    let _ = async_nats::jetstream::new(client)
        .delete_stream(&stream)
        .await;
    tenant.close().await;
}

#[tokio::test]
async fn start_up_errors_are_clear_and_exit_non_zero() {
    // A file with problems: exit 1, every problem in the log, no panic.
    let mut service = ServiceProcess::start("[[relay]]\nname = \"x\"\nmethod = \"cdc\"\n", &[]);
    let status = service.wait(Duration::from_secs(10)).unwrap();
    assert_eq!(status.code(), Some(1));
    let log = service.log();
    assert!(
        log.contains("relay[0].method: `cdc` is not one of"),
        "{log}"
    );
    assert!(log.contains("relay[0].broker: missing"), "{log}");
    assert!(!log.contains("panicked"), "{log}");

    // An address that is taken: exit 3, naming it.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap();
    let config = format!(
        r#"
[http]
listen = "{address}"
[[relay]]
name = "x"
database_url = "sqlite::memory:"
[relay.broker]
kind = "redis"
url = "redis://127.0.0.1:6379"
"#
    );
    let mut service = ServiceProcess::start(&config, &[]);
    let status = service.wait(Duration::from_secs(10)).unwrap();
    let log = service.log();
    assert_eq!(status.code(), Some(3), "{log}");
    assert!(
        log.contains(&format!("cannot listen on {address}")),
        "{log}"
    );
}

/// A `method = "log"` relay from the file: it creates its slot, publishes what is
/// committed in commit order, and reports its slot's lag in `/metrics`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_relay_runs_from_the_file() {
    const TEST: &str = "a_log_relay_runs_from_the_file";
    let Some(nats_url) = outbox_tests::service(TestService::Nats, TEST) else {
        return;
    };
    let Some(db) = TestDb::logical_postgres(TEST).await else {
        return;
    };
    schema::install(db.conn(), &Outbox::default())
        .await
        .unwrap();
    let id = uuid::Uuid::now_v7().simple().to_string();
    let slot = format!("srv_{id}");
    let stream = format!("SRVLOG_{id}");
    let ops: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let config = format!(
        r#"
[http]
listen = "{ops}"

[[relay]]
name = "orders"
database_url = "{}"
method = "log"
batch_size = 50
[relay.log]
slot = "{slot}"
heartbeat_interval = "1s"
[relay.broker]
kind = "nats"
url = "{nats_url}"
route = {{ kind = "event_type", prefix = "srvlog{id}." }}
stream = {{ name = "{stream}", subjects = ["srvlog{id}.>"] }}
"#,
        db.url()
    );
    let mut service = ServiceProcess::start(&config, &[]);
    let active = format!(
        "SELECT COUNT(*)::bigint AS n FROM pg_replication_slots WHERE slot_name = '{slot}' AND active"
    );
    let streaming = eventually(Duration::from_secs(30), || async {
        use sea_orm::{ConnectionTrait, Statement};
        let row = db
            .conn()
            .query_one_raw(Statement::from_string(
                db.conn().get_database_backend(),
                active.clone(),
            ))
            .await
            .unwrap()
            .unwrap();
        row.try_get::<i64>("", "n").unwrap() == 1
    })
    .await;
    assert!(streaming, "{}", service.log());
    place(&db, "log", 25).await;
    let client = nats::connect(&nats_url).await.unwrap();
    assert!(
        eventually(Duration::from_secs(30), || async {
            stream_messages(&client, &stream).await >= 25
        })
        .await,
        "{}",
        service.log()
    );
    let lag_reported = eventually(Duration::from_secs(15), || async {
        let (_, text) = get(ops, "/metrics").await.unwrap();
        sample(
            &text,
            &format!(
                r#"outbox_log_slot_lag_bytes{{outbox="outbox",relay="orders",slot="{slot}"}}"#
            ),
        )
        .is_some()
    })
    .await;
    let (_, text) = get(ops, "/metrics").await.unwrap();
    assert!(lag_reported, "{text}");
    assert_eq!(
        sample(
            &text,
            r#"outbox_published_total{outbox="outbox",relay="orders"}"#
        ),
        Some(25.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            r#"outbox_write_mode{outbox="outbox",relay="orders",mode="table"}"#
        ),
        Some(1.0)
    );
    let (status, body) = get(ops, "/readyz").await.unwrap();
    assert_eq!(status, 200, "{body}");
    let readiness: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        readiness["relays"][0]["leases"],
        format!("active on slot {slot}")
    );
    service.terminate();
    let exit = service.wait(Duration::from_secs(20));
    assert!(
        exit.is_some_and(|status| status.success()),
        "{}",
        service.log()
    );
    assert_eq!(
        stream_messages(&client, &stream).await,
        25,
        "each event once"
    );
    let jetstream = async_nats::jetstream::new(client.clone());
    let _ = jetstream.delete_stream(&stream).await;
    let drop_slot = format!("SELECT pg_drop_replication_slot('{slot}')");
    use sea_orm::ConnectionTrait;
    let _ = db.conn().execute_unprepared(&drop_slot).await;
    db.close().await;
}

/// A `method = "log"` relay on MariaDB (`mysql://`, a server with its binary log on): it
/// backfills nothing on an empty outbox, streams what is committed, says `active on slot`
/// in `/readyz`, and on SIGTERM stores the position of what the broker confirmed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_relay_on_mariadb_runs_from_the_file() {
    use sea_orm::{ConnectionTrait, Statement};
    const TEST: &str = "a_log_relay_on_mariadb_runs_from_the_file";
    let Some(nats_url) = outbox_tests::service(TestService::Nats, TEST) else {
        return;
    };
    let Some(db) = TestDb::binlog_mariadb(TEST).await else {
        return;
    };
    schema::install(db.conn(), &Outbox::default())
        .await
        .unwrap();
    let id = uuid::Uuid::now_v7().simple().to_string();
    let slot = format!("srv_{id}");
    let stream = format!("SRVBINLOG_{id}");
    let ops: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let config = format!(
        r#"
[http]
listen = "{ops}"

[[relay]]
name = "orders"
database_url = "{}"
method = "log"
batch_size = 50
[relay.log]
slot = "{slot}"
feedback_interval = "200ms"
[relay.broker]
kind = "nats"
url = "{nats_url}"
route = {{ kind = "event_type", prefix = "srvbinlog{id}." }}
stream = {{ name = "{stream}", subjects = ["srvbinlog{id}.>"] }}
"#,
        db.url()
    );
    let mut service = ServiceProcess::start(&config, &[]);
    let position =
        format!("SELECT acknowledged_lsn AS p FROM outbox_log_slots WHERE slot = '{slot}'");
    let backfilled = format!(
        "SELECT COUNT(*) AS n FROM outbox_log_slots WHERE slot = '{slot}' AND backfilled_at IS NOT NULL"
    );
    let query = |sql: String| {
        let conn = db.conn().clone();
        async move {
            conn.query_one_raw(Statement::from_string(conn.get_database_backend(), sql))
                .await
                .unwrap()
        }
    };
    let streaming = eventually(Duration::from_secs(30), || async {
        query(backfilled.clone())
            .await
            .is_some_and(|row| row.try_get::<i64>("", "n").unwrap() == 1)
    })
    .await;
    assert!(streaming, "{}", service.log());
    place(&db, "binlog", 25).await;
    let client = nats::connect(&nats_url).await.unwrap();
    assert!(
        eventually(Duration::from_secs(30), || async {
            stream_messages(&client, &stream).await >= 25
        })
        .await,
        "{}",
        service.log()
    );
    let (status, body) = get(ops, "/readyz").await.unwrap();
    assert_eq!(status, 200, "{body}");
    let readiness: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        readiness["relays"][0]["leases"],
        format!("active on slot {slot}")
    );
    let (_, text) = get(ops, "/metrics").await.unwrap();
    assert_eq!(
        sample(
            &text,
            r#"outbox_published_total{outbox="outbox",relay="orders"}"#
        ),
        Some(25.0),
        "{text}"
    );
    service.terminate();
    let exit = service.wait(Duration::from_secs(20));
    assert!(
        exit.is_some_and(|status| status.success()),
        "{}",
        service.log()
    );
    assert_eq!(
        stream_messages(&client, &stream).await,
        25,
        "each event once"
    );
    // The position stored at the stop is the last commit's GTID (domain-server-sequence).
    let stored = query(position)
        .await
        .and_then(|row| row.try_get::<Option<String>>("", "p").unwrap())
        .unwrap_or_default();
    assert!(
        stored.split('-').count() == 3,
        "a GTID position: {stored:?}\n{}",
        service.log()
    );
    let jetstream = async_nats::jetstream::new(client.clone());
    let _ = jetstream.delete_stream(&stream).await;
    db.close().await;
}
