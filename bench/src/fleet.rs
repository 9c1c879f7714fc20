//! A fleet of tenant databases behind one relay service (issue 37, item 4): `--pg-tenants`
//! databases on the PostgreSQL server and `--mariadb-tenants` on MariaDB, each a tenant file
//! of one `outbox run` process with a connection budget per server, relaying to NATS.
//!
//! - the databases are created and their outboxes installed, one tenant file each, and the
//!   service is started; the time until `/readyz` lists every tenant is printed;
//! - for `--seconds`, a producer commits one event at a time to a random tenant (a trickle,
//!   `--rate` events/s in all) and, every 10 s, a burst of `--burst` events in one commit to
//!   each of `--burst-tenants` tenants; each commit opens and closes its own connection, so
//!   the producer holds almost none;
//! - sampled every 200 ms: the relays' connections on each server (PostgreSQL:
//!   `pg_stat_activity` by the relays' `application_name`; MariaDB: the process list of the
//!   tenant databases, which includes a producer's commit in flight), the service's resident
//!   memory (`VmRSS`, and `VmHWM` at the end) and CPU time (`/proc/<pid>/stat`);
//! - commit → publish latency of every event (its arrival on a core NATS subscription, by
//!   its `Nats-Msg-Id`), p50 / p99 / max, trickle and bursts apart;
//! - at the end a new tenant file is written for a database that already holds an event: the
//!   time from the file to that event's arrival is the first-publish time of a new tenant.
//!
//! ```text
//! cargo build --release -p outbox-server -p outbox-bench
//! target/release/outbox-bench fleet --pg-tenants 200 --mariadb-tenants 20 --budget 40
//! ```

use std::collections::HashMap;
use std::error::Error;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use outbox_brokers::nats::{self, NatsStream, async_nats};
use outbox_core::Raise;
use outbox_seaorm::{Outbox, schema};
use sea_orm::{ConnectOptions, ConnectionTrait, Database, DatabaseConnection, DbBackend};
use uuid::Uuid;

use crate::measure::{percentile, task_cpu};
use crate::relay::{BenchContracts, BenchEvent, placed};

type BoxError = Box<dyn Error + Send + Sync>;

/// `outbox-bench fleet`.
#[derive(Debug, clap::Args)]
pub struct FleetArgs {
    /// PostgreSQL server (`…/postgres`: the databases are created beside it and dropped).
    #[arg(long, default_value = "postgres://postgres@127.0.0.1:5432/postgres")]
    database_url: String,
    /// MariaDB server.
    #[arg(long, default_value = "mysql://root@127.0.0.1:3306/mysql")]
    mariadb_url: String,
    /// NATS with JetStream.
    #[arg(long, default_value = "nats://127.0.0.1:4222")]
    nats_url: String,
    /// Tenant databases on PostgreSQL.
    #[arg(long, default_value_t = 200)]
    pg_tenants: usize,
    /// Tenant databases on MariaDB.
    #[arg(long, default_value_t = 20)]
    mariadb_tenants: usize,
    /// `[connections] max_per_server` (each relay holds one connection in its turn).
    #[arg(long, default_value_t = 40)]
    budget: u32,
    /// The relays' poll interval, in milliseconds (a budgeted relay polls).
    #[arg(long, default_value_t = 500)]
    poll_ms: u64,
    /// Trickle events per second, over every tenant.
    #[arg(long, default_value_t = 50)]
    rate: u32,
    /// Tenants that get a burst every 10 s.
    #[arg(long, default_value_t = 3)]
    burst_tenants: usize,
    /// Events per burst.
    #[arg(long, default_value_t = 1_000)]
    burst: usize,
    /// How long the producer runs.
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// The `outbox` binary (a release build).
    #[arg(long, default_value = "target/release/outbox")]
    outbox_binary: String,
}

/// One tenant database.
struct Tenant {
    name: String,
    url: String,
    backend: DbBackend,
}

/// Runs the benchmark.
///
/// # Errors
/// Database, broker or process failures.
pub async fn run(args: FleetArgs) -> Result<(), BoxError> {
    if !Path::new(&args.outbox_binary).is_file() {
        return Err(format!("no `outbox` binary at {}", args.outbox_binary).into());
    }
    let id = Uuid::now_v7().simple().to_string()[20..].to_owned();
    let pg_admin = Database::connect(&args.database_url).await?;
    let maria_admin = Database::connect(&args.mariadb_url).await?;
    let mut tenants = Vec::new();
    let started = Instant::now();
    // One more PostgreSQL database: the tenant added at the end.
    for n in 0..=args.pg_tenants {
        tenants.push(
            create(
                &pg_admin,
                &args.database_url,
                &format!("fl_{id}_p{n}"),
                DbBackend::Postgres,
            )
            .await?,
        );
    }
    for n in 0..args.mariadb_tenants {
        tenants.push(
            create(
                &maria_admin,
                &args.mariadb_url,
                &format!("fl_{id}_m{n}"),
                DbBackend::MySql,
            )
            .await?,
        );
    }
    println!(
        "{} tenant databases created and installed in {:.1} s",
        tenants.len(),
        started.elapsed().as_secs_f64()
    );
    let late = tenants.remove(args.pg_tenants);
    let result = measure(&args, &id, &tenants, &late, &pg_admin, &maria_admin).await;
    for tenant in tenants.iter().chain([&late]) {
        let admin = if tenant.backend == DbBackend::Postgres {
            &pg_admin
        } else {
            &maria_admin
        };
        let drop = match tenant.backend {
            DbBackend::Postgres => {
                format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", tenant.name)
            }
            _ => format!("DROP DATABASE IF EXISTS `{}`", tenant.name),
        };
        admin.execute_unprepared(&drop).await?;
    }
    result
}

/// Creates database `name` beside `server_url`'s and installs the outbox in it.
async fn create(
    admin: &DatabaseConnection,
    server_url: &str,
    name: &str,
    backend: DbBackend,
) -> Result<Tenant, BoxError> {
    let create = match backend {
        DbBackend::Postgres => format!("CREATE DATABASE \"{name}\""),
        _ => format!("CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"),
    };
    admin.execute_unprepared(&create).await?;
    let url = match server_url.rsplit_once('/') {
        Some((server, _)) => format!("{server}/{name}"),
        None => return Err("the database URL names no database".into()),
    };
    let db = connect_one(&url).await?;
    schema::install(&db, &Outbox::default()).await?;
    db.close().await?;
    Ok(Tenant {
        name: name.to_owned(),
        url,
        backend,
    })
}

/// A pool of one connection, for one commit.
async fn connect_one(url: &str) -> Result<DatabaseConnection, BoxError> {
    let mut options = ConnectOptions::new(url.to_owned());
    options.max_connections(1).sqlx_logging(false);
    Ok(Database::connect(options).await?)
}

/// Commits `events` events to `tenant` in one transaction; their ids and the commit time.
async fn commit(tenant: &Tenant, events: usize) -> Result<(Vec<Uuid>, Instant), BoxError> {
    let db = connect_one(&tenant.url).await?;
    let uow = Outbox::default().begin(&db, &BenchContracts).await?;
    for _ in 0..events {
        uow.raise(BenchEvent::Placed(placed()));
    }
    let report = uow.commit().await?;
    let at = Instant::now();
    db.close().await?;
    Ok((report.message_ids, at))
}

fn tenant_file(dir: &Path, tenant: &Tenant) -> Result<(), BoxError> {
    let body = match tenant.backend {
        DbBackend::Postgres => String::new(),
        _ => format!("database_url = \"{}\"\n", tenant.url),
    };
    let staged = dir.join(format!(".{}.tmp", tenant.name));
    std::fs::write(&staged, body)?;
    std::fs::rename(staged, dir.join(format!("{}.toml", tenant.name)))?;
    Ok(())
}

#[allow(clippy::too_many_lines)]
async fn measure(
    args: &FleetArgs,
    id: &str,
    tenants: &[Tenant],
    late: &Tenant,
    pg_admin: &DatabaseConnection,
    maria_admin: &DatabaseConnection,
) -> Result<(), BoxError> {
    let client = nats::connect(&args.nats_url).await?;
    let stream = NatsStream::new(format!("FLEET{id}"), [format!("fleet{id}.>")]);
    stream.ensure(&client).await?;
    let arrivals: Arc<Mutex<HashMap<Uuid, Instant>>> = Arc::default();
    let mut subscription = client.subscribe(format!("fleet{id}.>")).await?;
    let collector = tokio::spawn({
        let arrivals = Arc::clone(&arrivals);
        async move {
            while let Some(message) = subscription.next().await {
                let now = Instant::now();
                let id = message
                    .headers
                    .as_ref()
                    .and_then(|h| h.get(async_nats::header::NATS_MESSAGE_ID))
                    .and_then(|v| Uuid::parse_str(v.as_str()).ok());
                if let (Some(id), Ok(mut arrivals)) = (id, arrivals.lock()) {
                    arrivals.entry(id).or_insert(now);
                }
            }
        }
    });
    let dir = std::env::temp_dir().join(format!("outbox-fleet-{id}"));
    std::fs::create_dir_all(dir.join("tenants"))?;
    for tenant in tenants {
        tenant_file(&dir.join("tenants"), tenant)?;
    }
    let (pg_server, _) = args
        .database_url
        .rsplit_once('/')
        .ok_or("the database URL names no database")?;
    let app = format!("fleet_{id}");
    let ops = {
        let socket = std::net::TcpListener::bind("127.0.0.1:0")?;
        socket.local_addr()?
    };
    let config = format!(
        r#"
[http]
listen = "{ops}"
[console]
enabled = false
[connections]
max_per_server = {budget}
idle_timeout = "5s"
[tenants]
directory = "{tenants}"
refresh_interval = "2s"
[tenants.template]
database_url = "{pg_server}/{{tenant}}?application_name={app}"
max_connections = 1
poll_interval = "{poll}ms"
batch_size = 500
[tenants.template.broker]
kind = "nats"
url = "{nats}"
route = {{ kind = "event_type", prefix = "fleet{id}.{{tenant}}." }}
"#,
        budget = args.budget,
        tenants = dir.join("tenants").display(),
        poll = args.poll_ms,
        nats = args.nats_url,
    );
    let file = dir.join("outbox.toml");
    std::fs::write(&file, config)?;
    let started = Instant::now();
    let mut child = tokio::process::Command::new(&args.outbox_binary)
        .arg("run")
        .arg(&file)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()?;
    let pid = child.id().ok_or("the service exited at once")?;
    let all = tenants.len();
    let listed = async {
        loop {
            if let Some(body) = readyz(ops).await
                && body.matches("\"phase\":\"running\"").count() >= all
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(300), listed)
        .await
        .map_err(|_| "the tenants were not all running within 300 s")?;
    println!(
        "{all} tenants running in {:.1} s after start",
        started.elapsed().as_secs_f64()
    );
    let cpu_before = task_cpu(&pid.to_string()).ok_or("cannot read the service's CPU time")?;
    // Sampling.
    let samples: Arc<Mutex<Vec<(i64, i64, u64)>>> = Arc::default();
    let sampling = tokio_util::sync::CancellationToken::new();
    let sampler = tokio::spawn({
        let (samples, stop, pg, maria) = (
            Arc::clone(&samples),
            sampling.clone(),
            pg_admin.clone(),
            maria_admin.clone(),
        );
        let (app, prefix) = (app.clone(), format!("fl_{id}_m"));
        async move {
            while !stop.is_cancelled() {
                let pg_count = count(&pg, &format!("SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = '{app}'")).await;
                let maria_count = count(&maria, &format!("SELECT count(*) AS n FROM information_schema.processlist WHERE db LIKE '{prefix}%'")).await;
                let rss = rss_kib(pid, "VmRSS").unwrap_or(0);
                if let Ok(mut samples) = samples.lock() {
                    samples.push((pg_count, maria_count, rss));
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    });
    // The producer.
    let deadline = Instant::now() + Duration::from_secs(args.seconds);
    let mut trickle: Vec<(Uuid, Instant)> = Vec::new();
    let mut bursts: Vec<(Uuid, Instant)> = Vec::new();
    let mut tick =
        tokio::time::interval(Duration::from_secs_f64(1.0 / f64::from(args.rate.max(1))));
    let mut next_burst = Instant::now();
    let mut n = 0usize;
    while Instant::now() < deadline {
        tick.tick().await;
        if Instant::now() >= next_burst {
            next_burst += Duration::from_secs(10);
            for tenant in tenants.iter().take(args.burst_tenants) {
                let (ids, at) = commit(tenant, args.burst).await?;
                bursts.extend(ids.into_iter().map(|id| (id, at)));
            }
        }
        // A spread of tenants: every one of them, in turn.
        n = (n + 7919) % tenants.len();
        let (ids, at) = commit(&tenants[n], 1).await?;
        trickle.extend(ids.into_iter().map(|id| (id, at)));
    }
    let total = trickle.len() + bursts.len();
    let wait = async {
        loop {
            let got = arrivals.lock().map(|a| a.len()).unwrap_or(0);
            if got >= total {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(60), wait).await;
    let cpu = task_cpu(&pid.to_string())
        .ok_or("cannot read the service's CPU time")?
        .saturating_sub(cpu_before)
        .as_secs_f64();
    // A new tenant: its event is in its outbox before its file exists.
    let (ids, _) = commit(late, 1).await?;
    let written = Instant::now();
    tenant_file(&dir.join("tenants"), late)?;
    let first = async {
        loop {
            if let Some(at) = arrivals.lock().ok().and_then(|a| a.get(&ids[0]).copied()) {
                return at.saturating_duration_since(written);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let first = tokio::time::timeout(Duration::from_secs(60), first)
        .await
        .map_err(|_| "the new tenant did not publish within 60 s")?;
    sampling.cancel();
    sampler.await?;
    let hwm = rss_kib(pid, "VmHWM").unwrap_or(0);
    let _ = tokio::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .await;
    let exit = tokio::time::timeout(Duration::from_secs(60), child.wait()).await;
    collector.abort();
    let _ = stream.delete(&client).await;
    let _ = std::fs::remove_dir_all(&dir);
    let arrivals = arrivals.lock().map_err(|_| "poisoned")?.clone();
    let samples = samples.lock().map_err(|_| "poisoned")?.clone();
    let report = |label: &str, events: &[(Uuid, Instant)]| {
        let mut latencies: Vec<Duration> = events
            .iter()
            .filter_map(|(id, at)| {
                arrivals
                    .get(id)
                    .map(|got| got.saturating_duration_since(*at))
            })
            .collect();
        latencies.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let pick = |p: f64| percentile(&latencies, p);
        println!(
            "  {label:<8} {:>6} of {:>6} published  p50 {:>8.1} ms  p99 {:>8.1} ms  max {:>8.1} ms",
            latencies.len(),
            events.len(),
            ms(pick(0.5)),
            ms(pick(0.99)),
            ms(latencies.last().copied().unwrap_or_default())
        );
    };
    println!(
        "{} PostgreSQL + {} MariaDB tenants, budget {} per server, poll {} ms, {} s: trickle {} events/s, {} bursts of {} every 10 s",
        args.pg_tenants,
        args.mariadb_tenants,
        args.budget,
        args.poll_ms,
        args.seconds,
        args.rate,
        args.burst_tenants,
        args.burst
    );
    report("trickle", &trickle);
    report("bursts", &bursts);
    let max_pg = samples.iter().map(|s| s.0).max().unwrap_or(0);
    let max_maria = samples.iter().map(|s| s.1).max().unwrap_or(0);
    let mean_rss = samples.iter().map(|s| s.2).sum::<u64>() / (samples.len().max(1) as u64);
    println!(
        "  relay connections: PostgreSQL at most {max_pg} (budget {}), MariaDB at most {max_maria} (incl. the producer's commit in flight)",
        args.budget
    );
    println!(
        "  service memory: RSS mean {:.1} MiB, peak (VmHWM) {:.1} MiB",
        mean_rss as f64 / 1024.0,
        hwm as f64 / 1024.0
    );
    println!(
        "  service CPU: {cpu:.1} s over {} s ({:.1} % of one core)",
        args.seconds,
        cpu / args.seconds as f64 * 100.0
    );
    println!(
        "  a new tenant's first event published {:.2} s after its file was written",
        first.as_secs_f64()
    );
    match exit {
        Ok(Ok(status)) if status.success() => Ok(()),
        other => Err(format!("the service did not stop cleanly: {other:?}").into()),
    }
}

async fn count(db: &DatabaseConnection, sql: &str) -> i64 {
    let statement = sea_orm::Statement::from_string(db.get_database_backend(), sql.to_owned());
    match db.query_one_raw(statement).await {
        Ok(Some(row)) => row.try_get::<i64>("", "n").unwrap_or(-1),
        _ => -1,
    }
}

async fn readyz(address: std::net::SocketAddr) -> Option<String> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut stream = tokio::net::TcpStream::connect(address).await.ok()?;
    let request = "GET /readyz HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n";
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.ok()?;
    Some(answer)
}

/// `field` of `/proc/<pid>/status`, in KiB.
fn rss_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{field}:")))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
}
