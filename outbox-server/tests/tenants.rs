//! Tenants that change while the `outbox` service runs: a directory of tenant files and a
//! catalog table, each entry merged over the template; new tenants start, changed ones
//! restart alone, removed ones drain and stop, bad entries are reported and skipped — and
//! every tenant shows in `/readyz`, `/metrics` and the console within two refresh periods.

#![allow(clippy::unwrap_used)]

mod support;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use outbox_brokers::nats::{self, async_nats};
use outbox_core::Raise;
use outbox_seaorm::ops::Operations;
use outbox_seaorm::{Outbox, schema};
use outbox_tests::Service as TestService;
use outbox_tests::bookstore::{OrderingContracts, OrderingEvent};
use outbox_tests::db::TestDb;
use sea_orm::ConnectionTrait as _;
use support::{Client, ServiceProcess, eventually, free_port, get};

/// Two refresh periods of the tests' services, and the time a relay takes to publish.
const REFRESH: &str = "300ms";
const WITHIN: Duration = Duration::from_secs(20);

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

/// `n` fresh PostgreSQL databases with the default outbox installed; `None` when the
/// server is unreachable and services are not required.
async fn installed_postgres(test: &str, n: usize) -> Option<Vec<TestDb>> {
    let mut dbs = Vec::new();
    for _ in 0..n {
        let db = TestDb::postgres(test).await?;
        schema::install(db.conn(), &Outbox::default())
            .await
            .unwrap();
        dbs.push(db);
    }
    Some(dbs)
}

/// The tenant's name: its database's (`outbox_t_<uuid>`, a valid relay name).
fn tenant(db: &TestDb) -> String {
    db.url().rsplit('/').next().unwrap().to_owned()
}

/// `/readyz` as JSON.
async fn readyz(ops: SocketAddr) -> (u16, serde_json::Value) {
    // Not serving yet: status 0.
    match get(ops, "/readyz").await {
        Ok((status, body)) => (status, serde_json::from_str(&body).unwrap()),
        Err(_) => (0, serde_json::json!({ "relays": [] })),
    }
}

/// The names of the relays `/readyz` lists.
fn relays(readiness: &serde_json::Value) -> Vec<String> {
    readiness["relays"]
        .as_array()
        .unwrap()
        .iter()
        .map(|relay| relay["name"].as_str().unwrap().to_owned())
        .collect()
}

/// The template every test tenant is merged over: its own database by name, its own
/// subjects and stream on NATS.
fn template(nats_url: &str, id: &str) -> String {
    format!(
        r#"
[tenants.template]
database_url = "postgres://postgres@127.0.0.1:5432/{{tenant}}"
poll_interval = "100ms"
[tenants.template.broker]
kind = "nats"
url = "{nats_url}"
route = {{ kind = "event_type", prefix = "t{id}.{{tenant}}." }}
stream = {{ name = "T{id}_{{tenant}}", subjects = ["t{id}.{{tenant}}.>"] }}
"#
    )
}

/// The stream a tenant publishes to.
fn stream_of(id: &str, tenant: &str) -> String {
    format!("T{id}_{tenant}")
}

fn write(dir: &Path, name: &str, text: &str) {
    // As a deployment tool should: a whole file appears at once.
    let staged = dir.join(format!(".{name}.tmp"));
    std::fs::write(&staged, text).unwrap();
    std::fs::rename(staged, dir.join(name)).unwrap();
}

/// How many times the log says the relay of `tenant` started.
fn starts(log: &str, tenant: &str) -> usize {
    log.lines()
        .filter(|line| line.contains("relay starting") && line.contains(&format!("relay={tenant}")))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenant_files_come_change_turn_bad_and_go_while_the_service_runs() {
    const TEST: &str = "tenant_files_come_change_turn_bad_and_go_while_the_service_runs";
    let Some(nats_url) = outbox_tests::service(TestService::Nats, TEST) else {
        return;
    };
    let mut dbs = Vec::new();
    for _ in 0..3 {
        let Some(db) = TestDb::postgres(TEST).await else {
            return;
        };
        dbs.push(db);
    }
    let Some(maria) = TestDb::mariadb(TEST).await else {
        return;
    };
    for db in dbs.iter().chain([&maria]) {
        schema::install(db.conn(), &Outbox::default())
            .await
            .unwrap();
    }
    let [a, b, c] = [&dbs[0], &dbs[1], &dbs[2]].map(tenant);
    let m = tenant(&maria);
    let id = uuid::Uuid::now_v7().simple().to_string();
    let tenants = tempfile::tempdir().unwrap();
    let dir = tenants.path();
    write(dir, &format!("{a}.toml"), "");
    write(dir, &format!("{b}.toml"), "batch_size = 50\n");
    // An entry's own URL over the template's: this tenant is on MariaDB.
    write(
        dir,
        &format!("{m}.toml"),
        &format!("database_url = \"{}\"\n", maria.url()),
    );
    std::fs::write(dir.join("README.md"), "not a tenant").unwrap();
    let console: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let ops: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let token = "tenants-test-token-0123456789abcdef";
    let config = format!(
        r#"
[http]
listen = "{console}"
ops_listen = "{ops}"

[[console.user]]
name = "ana"
role = "reader"
token = "{token}"

[tenants]
directory = "{}"
refresh_interval = "{REFRESH}"
{}
"#,
        dir.display(),
        template(&nats_url, &id)
    );
    let mut service = ServiceProcess::start(&config, &[]);
    let client = nats::connect(&nats_url).await.unwrap();
    place(&dbs[0], "a", 10).await;
    place(&dbs[1], "b", 10).await;
    place(&maria, "m", 4).await;
    for (name, expected) in [(&a, 10), (&b, 10), (&m, 4)] {
        let stream = stream_of(&id, name);
        assert!(
            eventually(WITHIN, || async {
                stream_messages(&client, &stream).await >= expected
            })
            .await,
            "tenant {name} publishes from the directory: {} of {expected}\n{}",
            stream_messages(&client, &stream).await,
            service.log()
        );
    }
    let (status, ready) = readyz(ops).await;
    assert_eq!(status, 200, "{ready}");
    let mut expected = vec![a.clone(), b.clone(), m.clone()];
    expected.sort();
    assert_eq!(relays(&ready), expected, "{ready}");

    // A new file: its tenant runs within two refresh periods, in /readyz, /metrics and the
    // console.
    write(dir, &format!("{c}.toml"), "");
    assert!(
        eventually(WITHIN, || async {
            relays(&readyz(ops).await.1).contains(&c)
        })
        .await,
        "{}",
        service.log()
    );
    let (_, metrics) = get(ops, "/metrics").await.unwrap();
    assert!(
        metrics.contains(&format!(
            "outbox_published_total{{outbox=\"outbox\",relay=\"{c}\"}} 0"
        )),
        "the new tenant's counters exist before its first event"
    );
    let mut browser = Client::new(format!("http://{console}"));
    assert_eq!(browser.log_in("", token).await.status, 303);
    let overview = browser.get("/").await;
    assert!(
        overview.body.contains(&format!("data-relay=\"{c}\"")),
        "the console shows the new tenant"
    );
    place(&dbs[2], "c", 5).await;
    let stream_c = stream_of(&id, &c);
    assert!(
        eventually(WITHIN, || async {
            stream_messages(&client, &stream_c).await >= 5
        })
        .await,
        "{}",
        service.log()
    );

    // A changed file restarts its tenant alone.
    write(dir, &format!("{b}.toml"), "batch_size = 7\n");
    assert!(
        eventually(WITHIN, || async { starts(&service.log(), &b) == 2 }).await,
        "{}",
        service.log()
    );
    place(&dbs[1], "b2", 6).await;
    let stream_b = stream_of(&id, &b);
    assert!(
        eventually(WITHIN, || async {
            stream_messages(&client, &stream_b).await >= 16
        })
        .await,
        "{}",
        service.log()
    );
    let log = service.log();
    assert_eq!(
        (starts(&log, &a), starts(&log, &c), starts(&log, &m)),
        (1, 1, 1),
        "{log}"
    );

    // A bad new file is reported and skipped; the others run.
    write(dir, "bad.toml", "batch_size = \"many\"\ncolour = \"red\"\n");
    // A good tenant's file turns bad: it keeps its last good settings.
    write(dir, &format!("{b}.toml"), "batch_size = [\n");
    let problems = |ready: &serde_json::Value| ready["tenant_problems"].clone();
    assert!(
        eventually(WITHIN, || async {
            problems(&readyz(ops).await.1)
                .as_array()
                .is_some_and(|p| p.len() == 2)
        })
        .await,
        "{}",
        service.log()
    );
    let (status, ready) = readyz(ops).await;
    assert_eq!(
        status, 503,
        "a bad entry makes the service not ready: {ready}"
    );
    let problems = problems(&ready);
    let bad = problems
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["tenant"] == "bad")
        .unwrap();
    let text = bad["problem"].as_str().unwrap();
    assert!(text.contains("tenant[bad].batch_size"), "{text}");
    assert!(text.contains("tenant[bad].colour"), "{text}");
    assert_eq!(bad["running"], false);
    assert!(bad["source"].as_str().unwrap().ends_with("bad.toml"));
    let broken = problems
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["tenant"] == b.as_str())
        .unwrap();
    assert!(
        broken["problem"]
            .as_str()
            .unwrap()
            .starts_with("not valid TOML"),
        "{broken}"
    );
    assert_eq!(broken["running"], true);
    assert!(!relays(&ready).contains(&"bad".to_owned()));
    let overview = browser.get("/").await;
    assert!(
        overview.body.contains("data-tenant=\"bad\""),
        "the console shows the problem"
    );
    assert!(service.log().contains("tenant entry not applied"));
    place(&dbs[1], "b3", 4).await;
    place(&dbs[0], "a2", 3).await;
    let stream_a = stream_of(&id, &a);
    assert!(
        eventually(WITHIN, || async {
            stream_messages(&client, &stream_b).await >= 20
                && stream_messages(&client, &stream_a).await >= 13
        })
        .await,
        "the others, and the tenant on its last good settings, still publish\n{}",
        service.log()
    );

    // A removed file drains its tenant: it stops and releases its leases.
    std::fs::remove_file(dir.join(format!("{a}.toml"))).unwrap();
    assert!(
        eventually(WITHIN, || async {
            !relays(&readyz(ops).await.1).contains(&a)
        })
        .await,
        "{}",
        service.log()
    );
    let leases = Operations::new(dbs[0].conn().clone(), Outbox::default());
    let held: usize = leases
        .relay_instances()
        .await
        .unwrap()
        .iter()
        .map(|instance| instance.leases.len())
        .sum();
    assert_eq!(held, 0, "a removed tenant's relay releases its leases");
    place(&dbs[0], "a3", 3).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        stream_messages(&client, &stream_a).await,
        13,
        "a removed tenant no longer relays"
    );

    // Fixed: ready again, nothing restarted that did not change.
    std::fs::remove_file(dir.join("bad.toml")).unwrap();
    write(dir, &format!("{b}.toml"), "batch_size = 7\n");
    assert!(
        eventually(WITHIN, || async { readyz(ops).await.0 == 200 }).await,
        "{}",
        readyz(ops).await.1
    );
    assert_eq!(
        starts(&service.log(), &b),
        2,
        "b's settings are those it runs on"
    );
    assert!(service.log().contains("tenant entry problem resolved"));

    service.terminate();
    let status = service.wait(Duration::from_secs(30)).unwrap();
    assert!(status.success(), "{}", service.log());
    drop(client);
    for db in dbs {
        db.close().await;
    }
    maria.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_catalog_table_lists_tenants_and_its_outage_keeps_the_last_good_list() {
    const TEST: &str = "a_catalog_table_lists_tenants_and_its_outage_keeps_the_last_good_list";
    let Some(nats_url) = outbox_tests::service(TestService::Nats, TEST) else {
        return;
    };
    let Some(control) = TestDb::postgres(TEST).await else {
        return;
    };
    let Some(dbs) = installed_postgres(TEST, 3).await else {
        return;
    };
    let [a, b, c] = [&dbs[0], &dbs[1], &dbs[2]].map(tenant);
    control
        .conn()
        .execute_unprepared(
            "CREATE TABLE outbox_tenants (name VARCHAR(63) PRIMARY KEY, database_url TEXT, settings TEXT)",
        )
        .await
        .unwrap();
    control
        .conn()
        .execute_unprepared(&format!(
            "INSERT INTO outbox_tenants VALUES ('{a}', NULL, NULL), ('{b}', '{}', 'batch_size = 20')",
            dbs[1].url()
        ))
        .await
        .unwrap();
    let id = uuid::Uuid::now_v7().simple().to_string();
    let ops: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let config = format!(
        r#"
[http]
listen = "127.0.0.1:{}"
ops_listen = "{ops}"

[tenants]
refresh_interval = "{REFRESH}"
{}
"#,
        free_port(),
        template(&nats_url, &id)
    );
    let mut service =
        ServiceProcess::start(&config, &[("OUTBOX_TENANTS_CATALOG_URL", control.url())]);
    let client = nats::connect(&nats_url).await.unwrap();
    place(&dbs[0], "a", 5).await;
    place(&dbs[1], "b", 5).await;
    for name in [&a, &b] {
        let stream = stream_of(&id, name);
        assert!(
            eventually(WITHIN, || async {
                stream_messages(&client, &stream).await >= 5
            })
            .await,
            "{name} relays from the catalog\n{}",
            service.log()
        );
    }
    assert_eq!(readyz(ops).await.0, 200);

    // The catalog cannot be read: reported, and the tenants it listed keep running.
    control
        .conn()
        .execute_unprepared("ALTER TABLE outbox_tenants RENAME TO outbox_tenants_moved")
        .await
        .unwrap();
    assert!(
        eventually(WITHIN, || async {
            readyz(ops).await.1["source_problems"]
                .as_array()
                .is_some_and(|p| !p.is_empty())
        })
        .await,
        "{}",
        service.log()
    );
    let (status, ready) = readyz(ops).await;
    assert_eq!(status, 200, "the last good list runs: {ready}");
    assert_eq!(ready["source_problems"][0]["running_last_good"], true);
    assert_eq!(relays(&ready).len(), 2);
    place(&dbs[0], "a2", 5).await;
    let stream_a = stream_of(&id, &a);
    assert!(
        eventually(WITHIN, || async {
            stream_messages(&client, &stream_a).await >= 10
        })
        .await,
        "{}",
        service.log()
    );

    // Back, with a row added and one removed.
    control
        .conn()
        .execute_unprepared("ALTER TABLE outbox_tenants_moved RENAME TO outbox_tenants")
        .await
        .unwrap();
    control
        .conn()
        .execute_unprepared(&format!(
            "INSERT INTO outbox_tenants VALUES ('{c}', NULL, 'poll_interval = \"200ms\"'); DELETE FROM outbox_tenants WHERE name = '{b}'"
        ))
        .await
        .unwrap();
    assert!(
        eventually(WITHIN, || async {
            let ready = readyz(ops).await.1;
            let mut names = relays(&ready);
            names.sort();
            let mut expected = vec![a.clone(), c.clone()];
            expected.sort();
            names == expected && ready.get("source_problems").is_none()
        })
        .await,
        "{}",
        readyz(ops).await.1
    );
    place(&dbs[2], "c", 3).await;
    let stream_c = stream_of(&id, &c);
    assert!(
        eventually(WITHIN, || async {
            stream_messages(&client, &stream_c).await >= 3
        })
        .await,
        "{}",
        service.log()
    );

    // A catalog never read: the service is not ready, and says why.
    let down = free_port();
    let never = ServiceProcess::start(
        &format!(
            "[http]\nlisten = \"127.0.0.1:{}\"\nops_listen = \"127.0.0.1:{down}\"\n[tenants]\ncatalog_url = \"postgres://postgres@127.0.0.1:{}/control\"\n",
            free_port(),
            free_port()
        ),
        &[],
    );
    let never_ops: SocketAddr = format!("127.0.0.1:{down}").parse().unwrap();
    assert!(
        eventually(WITHIN, || async {
            get(never_ops, "/readyz").await.is_ok_and(|(status, body)| {
                status == 503 && body.contains("\"running_last_good\":false")
            })
        })
        .await,
        "{}",
        never.log()
    );
    drop(never);

    service.terminate();
    assert!(service.wait(Duration::from_secs(30)).unwrap().success());
    drop(client);
    for db in dbs {
        db.close().await;
    }
    control.close().await;
}

/// The `relay` counter `outbox_published_total` of `tenant` in a `/metrics` text.
fn published(metrics: &str, tenant: &str) -> f64 {
    support::sample(
        metrics,
        &format!("outbox_published_total{{outbox=\"outbox\",relay=\"{tenant}\"}}"),
    )
    .unwrap_or(0.0)
}

/// The readiness entry of `tenant`.
fn relay_of<'a>(readiness: &'a serde_json::Value, tenant: &str) -> Option<&'a serde_json::Value> {
    readiness["relays"]
        .as_array()?
        .iter()
        .find(|relay| relay["name"] == tenant)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenant_faults_stay_with_their_tenant() {
    const TEST: &str = "tenant_faults_stay_with_their_tenant";
    let Some(nats_url) = outbox_tests::service(TestService::Nats, TEST) else {
        return;
    };
    let Some(mut dbs) = installed_postgres(TEST, 4).await else {
        return;
    };
    let Some(mut pgbouncer) = outbox_tests::pgbouncer::PgBouncer::start(TEST, 5432, 4).await else {
        return;
    };
    // d's database is where the ghost tenant ends up.
    let [a, b, c] = [&dbs[0], &dbs[1], &dbs[2]].map(tenant);
    let id = uuid::Uuid::now_v7().simple().to_string();
    let tenants = tempfile::tempdir().unwrap();
    let dir = tenants.path();
    // a and b behind PgBouncer in transaction mode, c direct, and a tenant whose database
    // does not answer from the start.
    let pooled = |name: &str| {
        format!(
            "database_url = \"{}\"\ntransaction_pooling = true\n",
            pgbouncer.url(name)
        )
    };
    write(dir, &format!("{a}.toml"), &pooled(&a));
    write(dir, &format!("{b}.toml"), &pooled(&b));
    write(dir, &format!("{c}.toml"), "");
    let nowhere = format!(
        "database_url = \"postgres://postgres@127.0.0.1:{}/nowhere\"\n",
        free_port()
    );
    write(dir, "ghost.toml", &nowhere);
    let ops: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let config = format!(
        "[http]\nlisten = \"127.0.0.1:{}\"\nops_listen = \"{ops}\"\n[tenants]\ndirectory = \"{}\"\nrefresh_interval = \"{REFRESH}\"\n{}",
        free_port(),
        dir.display(),
        template(&nats_url, &id)
    );
    let mut service = ServiceProcess::start(&config, &[]);
    let client = nats::connect(&nats_url).await.unwrap();
    for (db, name) in [(&dbs[0], "a"), (&dbs[1], "b"), (&dbs[2], "c")] {
        place(db, name, 5).await;
    }
    for name in [&a, &b, &c] {
        let stream = stream_of(&id, name);
        assert!(
            eventually(WITHIN, || async {
                stream_messages(&client, &stream).await >= 5
            })
            .await,
            "{name} publishes beside a tenant that is down\n{}",
            service.log()
        );
    }
    assert!(
        eventually(WITHIN, || async {
            relay_of(&readyz(ops).await.1, "ghost").is_some_and(|g| g["phase"] == "retrying")
        })
        .await,
        "{}",
        readyz(ops).await.1
    );
    let (status, ready) = readyz(ops).await;
    assert_eq!(status, 503, "{ready}");
    let ghost = relay_of(&ready, "ghost").unwrap();
    assert!(
        ghost["error"].as_str().unwrap().contains("nowhere"),
        "{ready}"
    );
    for name in [&a, &b, &c] {
        assert_eq!(relay_of(&ready, name).unwrap()["ready"], true, "{ready}");
    }

    // b's database is dropped while it runs: b fails, the others publish.
    dbs.remove(1).close().await;
    assert!(
        eventually(WITHIN, || async {
            relay_of(&readyz(ops).await.1, &b).is_some_and(|relay| relay["ready"] == false)
        })
        .await,
        "{}",
        readyz(ops).await.1
    );
    place(&dbs[0], "a2", 5).await;
    place(&dbs[1], "c2", 5).await;
    // PgBouncer restarts under a: its relay reconnects.
    pgbouncer.restart().await;
    place(&dbs[0], "a3", 5).await;
    let (stream_a, stream_c) = (stream_of(&id, &a), stream_of(&id, &c));
    assert!(
        eventually(WITHIN, || async {
            stream_messages(&client, &stream_a).await >= 15
                && stream_messages(&client, &stream_c).await >= 10
        })
        .await,
        "a (through a restarted PgBouncer) and c publish while b's database is gone\n{}",
        service.log()
    );

    // The dropped tenant's entry is removed: it stops although its database is gone. The
    // ghost's entry is fixed: it starts on a database that answers.
    std::fs::remove_file(dir.join(format!("{b}.toml"))).unwrap();
    // dbs is now a, c, d.
    write(
        dir,
        "ghost.toml",
        &format!("database_url = \"{}\"\n", dbs[2].url()),
    );
    place(&dbs[2], "ghost", 4).await;
    let stream_ghost = stream_of(&id, "ghost");
    assert!(
        eventually(WITHIN, || async {
            stream_messages(&client, &stream_ghost).await >= 4
        })
        .await,
        "{}",
        service.log()
    );
    assert!(
        eventually(WITHIN, || async { readyz(ops).await.0 == 200 }).await,
        "{}",
        readyz(ops).await.1
    );
    assert!(!relays(&readyz(ops).await.1).contains(&b));

    service.terminate();
    let status = service.wait(Duration::from_secs(30));
    assert!(status.is_some_and(|s| s.success()), "{}", service.log());
    pgbouncer.stop();
    drop(client);
    for db in dbs {
        db.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_service_processes_share_each_tenant_and_publish_each_event_once() {
    const TEST: &str = "two_service_processes_share_each_tenant_and_publish_each_event_once";
    let Some(nats_url) = outbox_tests::service(TestService::Nats, TEST) else {
        return;
    };
    let Some(dbs) = installed_postgres(TEST, 2).await else {
        return;
    };
    let names: Vec<String> = dbs.iter().map(tenant).collect();
    let id = uuid::Uuid::now_v7().simple().to_string();
    let tenants = tempfile::tempdir().unwrap();
    for name in &names {
        // Rebalancing runs at each heartbeat: short ones, for a short test.
        write(
            tenants.path(),
            &format!("{name}.toml"),
            "heartbeat_interval = \"300ms\"\nlease_ttl = \"3s\"\npublish_timeout = \"1s\"\n",
        );
    }
    let ops: Vec<SocketAddr> = (0..2)
        .map(|_| format!("127.0.0.1:{}", free_port()).parse().unwrap())
        .collect();
    let services: Vec<ServiceProcess> = ops
        .iter()
        .map(|ops| {
            ServiceProcess::start(
                &format!(
                    "[http]\nlisten = \"127.0.0.1:{}\"\nops_listen = \"{ops}\"\n[tenants]\ndirectory = \"{}\"\nrefresh_interval = \"{REFRESH}\"\n{}",
                    free_port(),
                    tenants.path().display(),
                    template(&nats_url, &id)
                ),
                &[],
            )
        })
        .collect();
    // Both processes run both tenants and split each tenant's partitions by leases.
    for ops in &ops {
        assert!(
            eventually(WITHIN, || async { readyz(*ops).await.0 == 200 }).await,
            "{}",
            readyz(*ops).await.1
        );
    }
    let split = |db: &TestDb| {
        let ops = Operations::new(db.conn().clone(), Outbox::default());
        async move {
            let instances = ops.relay_instances().await.unwrap_or_default();
            let holding = instances.iter().filter(|i| !i.leases.is_empty()).count();
            let leases: usize = instances.iter().map(|i| i.leases.len()).sum();
            (holding, leases)
        }
    };
    for db in &dbs {
        assert!(
            eventually(WITHIN, || async { split(db).await == (2, 64) }).await,
            "each tenant's partitions split between the two processes: {:?}",
            split(db).await
        );
    }
    const ORDERS: usize = 300;
    for (db, name) in dbs.iter().zip(&names) {
        for round in 0..3 {
            place(db, &format!("{name}-{round}"), ORDERS / 3).await;
        }
    }
    let total = |name: String| {
        let ops = ops.clone();
        async move {
            let mut sum = 0.0;
            for ops in ops {
                sum += published(&get(ops, "/metrics").await.unwrap().1, &name);
            }
            sum
        }
    };
    for name in &names {
        assert!(
            eventually(WITHIN, || async {
                total(name.clone()).await >= ORDERS as f64
            })
            .await,
            "{} of {ORDERS} published for {name}\n{}\n{}",
            total(name.clone()).await,
            services[0].log(),
            services[1].log()
        );
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    for (db, name) in dbs.iter().zip(&names) {
        assert_eq!(
            total(name.clone()).await,
            ORDERS as f64,
            "{name}: each event once"
        );
        assert_eq!(split(db).await, (2, 64), "{name}");
    }
    for service in &services {
        service.terminate();
    }
    for mut service in services {
        assert!(
            service
                .wait(Duration::from_secs(30))
                .is_some_and(|s| s.success())
        );
    }
    for db in dbs {
        db.close().await;
    }
}

/// Connections open now whose `application_name` is `app`.
async fn connections_of(admin: &sea_orm::DatabaseConnection, app: &str) -> i64 {
    let row = admin
        .query_one_raw(sea_orm::Statement::from_string(
            sea_orm::DbBackend::Postgres,
            format!("SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = '{app}'"),
        ))
        .await
        .unwrap()
        .unwrap();
    row.try_get::<i64>("", "n").unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_budget_caps_a_server_shares_turns_and_idle_tenants_hold_none() {
    const TEST: &str = "a_connection_budget_caps_a_server_shares_turns_and_idle_tenants_hold_none";
    const TENANTS: usize = 8;
    const BUDGET: i64 = 4;
    const BURST: u64 = 3_000;
    let Some(nats_url) = outbox_tests::service(TestService::Nats, TEST) else {
        return;
    };
    let Some(dbs) = installed_postgres(TEST, TENANTS).await else {
        return;
    };
    let names: Vec<String> = dbs.iter().map(tenant).collect();
    let id = uuid::Uuid::now_v7().simple().to_string();
    // The relays' connections, told apart from the test's own by their application name.
    let app = format!("budget_{id}");
    let tenants = tempfile::tempdir().unwrap();
    let entry = |poll: &str| format!("poll_interval = \"{poll}\"\nbatch_size = 50\n");
    for name in &names {
        write(tenants.path(), &format!("{name}.toml"), &entry("100ms"));
    }
    let ops: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let template = template(&nats_url, &id).replace(
        "database_url = \"postgres://postgres@127.0.0.1:5432/{tenant}\"",
        &format!(
            "database_url = \"postgres://postgres@127.0.0.1:5432/{{tenant}}?application_name={app}\"\nmax_connections = 1"
        ),
    );
    let config = format!(
        "[http]\nlisten = \"127.0.0.1:{}\"\nops_listen = \"{ops}\"\n[connections]\nmax_per_server = {BUDGET}\nidle_timeout = \"300ms\"\n[tenants]\ndirectory = \"{}\"\nrefresh_interval = \"{REFRESH}\"\n{template}",
        free_port(),
        tenants.path().display(),
    );
    let mut service = ServiceProcess::start(&config, &[]);
    let admin = dbs[0].conn().clone();
    // Sample the relays' connections while they work.
    let sampling = tokio_util::sync::CancellationToken::new();
    let sampler = {
        let (admin, app, stop) = (admin.clone(), app.clone(), sampling.clone());
        tokio::spawn(async move {
            let mut most = 0;
            while !stop.is_cancelled() {
                most = most.max(connections_of(&admin, &app).await);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            most
        })
    };
    assert!(
        eventually(WITHIN, || async {
            relays(&readyz(ops).await.1).len() == TENANTS
        })
        .await,
        "{}",
        service.log()
    );
    // A burst to one tenant, then a trickle to each of the others.
    for round in 0..(BURST / 500) {
        place(&dbs[0], &format!("burst-{round}"), 500).await;
    }
    for (db, name) in dbs.iter().zip(&names).skip(1) {
        place(db, name, 10).await;
    }
    let client = nats::connect(&nats_url).await.unwrap();
    let busy = stream_of(&id, &names[0]);
    let mut busy_when_the_others_were_done = 0;
    for name in names.iter().skip(1) {
        let stream = stream_of(&id, name);
        assert!(
            eventually(WITHIN, || async {
                stream_messages(&client, &stream).await >= 10
            })
            .await,
            "{name} gets its turns beside a busy tenant\n{}",
            service.log()
        );
        busy_when_the_others_were_done = stream_messages(&client, &busy).await;
    }
    assert!(
        eventually(Duration::from_secs(60), || async {
            stream_messages(&client, &busy).await >= BURST
        })
        .await,
        "{} of {BURST}",
        stream_messages(&client, &busy).await
    );
    sampling.cancel();
    let most = sampler.await.unwrap();
    eprintln!(
        "budget {BUDGET}: at most {most} relay connections; the busy tenant had published {busy_when_the_others_were_done} of {BURST} when the last other tenant was done"
    );
    assert!(most <= BUDGET, "{most} connections, budget {BUDGET}");
    assert!(most >= 2, "the relays did connect ({most})");
    assert!(
        busy_when_the_others_were_done < BURST,
        "the small tenants were served while the busy one still had work"
    );

    // Idle tenants hold no connection: woken every 5 s (polls, scheduled rows), closed
    // after 300 ms.
    for name in &names {
        let idle = format!("{}schedule_interval = \"10s\"\n", entry("5s"));
        write(tenants.path(), &format!("{name}.toml"), &idle);
    }
    assert!(
        eventually(WITHIN, || async {
            starts(&service.log(), &names[TENANTS - 1]) == 2
        })
        .await,
        "{}",
        service.log()
    );
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let mut most_idle = 0;
    for _ in 0..40 {
        most_idle = most_idle.max(connections_of(&admin, &app).await);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        most_idle,
        0,
        "idle tenants hold no connection\n{}",
        service.log()
    );
    service.terminate();
    assert!(
        service
            .wait(Duration::from_secs(30))
            .is_some_and(|s| s.success())
    );
    drop(client);
    for db in dbs {
        db.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_catalog_on_mariadb_lists_tenants_on_both_servers() {
    const TEST: &str = "a_catalog_on_mariadb_lists_tenants_on_both_servers";
    let Some(nats_url) = outbox_tests::service(TestService::Nats, TEST) else {
        return;
    };
    let Some(control) = TestDb::mariadb(TEST).await else {
        return;
    };
    let Some(pg) = TestDb::postgres(TEST).await else {
        return;
    };
    let Some(maria) = TestDb::mariadb(TEST).await else {
        return;
    };
    for db in [&pg, &maria] {
        schema::install(db.conn(), &Outbox::default())
            .await
            .unwrap();
    }
    let (p, m) = (tenant(&pg), tenant(&maria));
    control
        .conn()
        .execute_unprepared(
            "CREATE TABLE outbox_tenants (name VARCHAR(63) PRIMARY KEY, database_url TEXT, settings TEXT)",
        )
        .await
        .unwrap();
    // The PostgreSQL tenant takes the template's URL; the MariaDB one has its own.
    control
        .conn()
        .execute_unprepared(&format!(
            "INSERT INTO outbox_tenants VALUES ('{p}', NULL, 'batch_size = 10'), ('{m}', '{}', NULL)",
            maria.url()
        ))
        .await
        .unwrap();
    let id = uuid::Uuid::now_v7().simple().to_string();
    let ops: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let config = format!(
        "[http]\nlisten = \"127.0.0.1:{}\"\nops_listen = \"{ops}\"\n[tenants]\ncatalog_url = \"{}\"\nrefresh_interval = \"{REFRESH}\"\n{}",
        free_port(),
        control.url(),
        template(&nats_url, &id)
    );
    let mut service = ServiceProcess::start(&config, &[]);
    place(&pg, "p", 4).await;
    place(&maria, "m", 3).await;
    let client = nats::connect(&nats_url).await.unwrap();
    for (name, expected) in [(&p, 4), (&m, 3)] {
        let stream = stream_of(&id, name);
        assert!(
            eventually(WITHIN, || async {
                stream_messages(&client, &stream).await >= expected
            })
            .await,
            "{name} relays from a catalog on MariaDB\n{}",
            service.log()
        );
    }
    assert_eq!(readyz(ops).await.0, 200);
    service.terminate();
    assert!(
        service
            .wait(Duration::from_secs(30))
            .is_some_and(|s| s.success())
    );
    drop(client);
    for db in [pg, maria, control] {
        db.close().await;
    }
}
