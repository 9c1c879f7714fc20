//! The relay service's overhead (issue 21): the `outbox` binary relaying from a TOML file
//! against an embedded `Relay` in this process, measured in the same run on the same
//! database, the same NATS server, the same settings and the same method:
//!
//! - N rows (default 20 000 over 200 aggregates, an `OrderPlacedV1` payload of about 330
//!   bytes) are inserted parked in backoff (not claimable), and the relay is started and
//!   given 1 s to connect and take its leases;
//! - (e) **embedded**: `Relay::run` in this process, with the NATS publisher, batch 500,
//!   poll interval 50 ms, the default retention (a published row is deleted), and the
//!   service's Prometheus recorder installed in this process too;
//! - (s) **service**: `outbox run` on a file with the same settings (a child process; its
//!   `/readyz` answered before the clock starts);
//! - one `UPDATE` makes every row due; the clock runs until the table is empty (polled every
//!   5 ms), and the stream is checked to hold the N messages.
//!
//! Printed: rows/s of each (median of `--rounds` rounds, modes alternating) and s / e.
//!
//! ```text
//! cargo build --release -p outbox-server -p outbox-bench
//! target/release/outbox-bench service --outbox-binary target/release/outbox
//! ```

use std::error::Error;
use std::process::Stdio;
use std::time::{Duration, Instant};

use outbox_brokers::nats::{self, NatsPublisher, NatsStream, async_nats};
use outbox_brokers::route::Route;
use outbox_seaorm::relay::Relay;
use outbox_seaorm::{Outbox, schema};
use sea_orm::sqlx::{self, PgPool};
use sea_orm::{ConnectionTrait, Database, DatabaseConnection};
use tokio_util::sync::CancellationToken;

use crate::measure::median;
use crate::order_rows::{self, Due};

type BoxError = Box<dyn Error + Send + Sync>;

/// The outbox table of the benchmark.
const OUTBOX: &str = "svc_outbox";
/// Rows per batch, in both modes.
const BATCH: usize = 500;
/// Poll interval, in both modes.
const POLL: Duration = Duration::from_millis(50);

/// `outbox-bench service`.
#[derive(Debug, clap::Args)]
pub struct ServiceArgs {
    /// PostgreSQL (a database of the benchmark's own is created and dropped).
    #[arg(long, default_value = "postgres://postgres@127.0.0.1:5432/postgres")]
    database_url: String,
    /// NATS with JetStream.
    #[arg(long, default_value = "nats://127.0.0.1:4222")]
    nats_url: String,
    /// Rows per measurement.
    #[arg(long, default_value_t = 20_000)]
    rows: usize,
    /// Aggregates the rows are spread over.
    #[arg(long, default_value_t = 200)]
    aggregates: usize,
    /// Rounds (each measures both modes).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// The `outbox` binary (a release build).
    #[arg(long, default_value = "target/release/outbox")]
    outbox_binary: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Embedded,
    Service,
}

/// Runs the benchmark.
///
/// # Errors
/// Database, broker or process failures.
pub async fn run(args: ServiceArgs) -> Result<(), BoxError> {
    if !std::path::Path::new(&args.outbox_binary).is_file() {
        return Err(format!(
            "no `outbox` binary at {} (cargo build --release -p outbox-server)",
            args.outbox_binary
        )
        .into());
    }
    let metrics = outbox_server::http::metrics::install()?;
    let name = format!("bench_svc_{}", uuid::Uuid::now_v7().simple());
    let admin = Database::connect(&args.database_url).await?;
    admin
        .execute_unprepared(&format!("CREATE DATABASE {name}"))
        .await?;
    let url = match args.database_url.rsplit_once('/') {
        Some((server, _)) => format!("{server}/{name}"),
        None => return Err("the database URL names no database".into()),
    };
    let result = measure(&args, &url).await;
    drop(metrics);
    let drop_database = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
    admin.execute_unprepared(&drop_database).await?;
    result
}

async fn measure(args: &ServiceArgs, url: &str) -> Result<(), BoxError> {
    let db = Database::connect(url).await?;
    let outbox = Outbox::builder().outbox_table(OUTBOX).build()?;
    schema::install(&db, &outbox).await?;
    let pool = PgPool::connect(url).await?;
    let client = nats::connect(&args.nats_url).await?;
    let mut embedded = Vec::new();
    let mut service = Vec::new();
    for round in 0..args.rounds {
        let order = if round % 2 == 0 {
            [Mode::Embedded, Mode::Service]
        } else {
            [Mode::Service, Mode::Embedded]
        };
        for mode in order {
            let id = uuid::Uuid::now_v7().simple().to_string();
            let stream = NatsStream::new(format!("SVC{id}"), [format!("svc{id}.>")]);
            stream.ensure(&client).await?;
            fill(&pool, args.rows, args.aggregates).await?;
            let rate = match mode {
                Mode::Embedded => embedded_rate(&db, &outbox, &pool, &client, &id, args).await?,
                Mode::Service => service_rate(&pool, url, &id, args).await?,
            };
            let jetstream = async_nats::jetstream::new(client.clone());
            let mut info = jetstream.get_stream(stream.name()).await?;
            let messages = info.info().await?.state.messages;
            stream.delete(&client).await?;
            if messages != args.rows as u64 {
                return Err(format!("{mode:?}: {messages} messages for {} rows", args.rows).into());
            }
            println!("  round {round} {mode:?}: {rate:.0} rows/s");
            match mode {
                Mode::Embedded => embedded.push(rate),
                Mode::Service => service.push(rate),
            }
        }
    }
    let (Some(e), Some(s)) = (median(&mut embedded), median(&mut service)) else {
        return Err("no round measured".into());
    };
    println!(
        "relay service vs embedded Relay, NATS, {} rows over {} aggregates, batch {BATCH}, median of {} rounds:",
        args.rows, args.aggregates, args.rounds
    );
    println!("  (e) embedded Relay::run   {e:>9.0} rows/s");
    println!("  (s) outbox run FILE        {s:>9.0} rows/s");
    println!("  s / e = {:.3}", s / e);
    Ok(())
}

/// `rows` rows parked in backoff (not claimable), the table vacuumed.
async fn fill(pool: &PgPool, rows: usize, aggregates: usize) -> Result<(), BoxError> {
    sqlx::query(sqlx::AssertSqlSafe(format!("DELETE FROM {OUTBOX}")))
        .execute(pool)
        .await?;
    order_rows::insert(pool, OUTBOX, rows, aggregates, Due::Parked).await?;
    sqlx::query(sqlx::AssertSqlSafe(format!("VACUUM ANALYZE {OUTBOX}")))
        .execute(pool)
        .await?;
    Ok(())
}

/// Makes every row due, and times until the table is empty.
async fn release_and_time(pool: &PgPool, rows: usize) -> Result<f64, BoxError> {
    let started = Instant::now();
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE {OUTBOX} SET attempts = 0, next_attempt_at = now() - interval '1 second'"
    )))
    .execute(pool)
    .await?;
    let deadline = started + Duration::from_secs(600);
    loop {
        let left: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT count(*) FROM {OUTBOX}"
        )))
        .fetch_one(pool)
        .await?;
        if left == 0 {
            #[allow(clippy::cast_precision_loss)]
            return Ok(rows as f64 / started.elapsed().as_secs_f64());
        }
        if Instant::now() > deadline {
            return Err(format!("{left} rows left after 10 minutes").into());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn embedded_rate(
    db: &DatabaseConnection,
    outbox: &Outbox,
    pool: &PgPool,
    client: &async_nats::Client,
    id: &str,
    args: &ServiceArgs,
) -> Result<f64, BoxError> {
    let publisher = NatsPublisher::builder(client.clone())
        .route(Route::event_type(format!("svc{id}.")))
        .build();
    let relay = Relay::builder(db.clone(), outbox.clone(), publisher)
        .batch_size(BATCH)
        .poll_interval(POLL)
        .build()?;
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(relay.run(shutdown.clone()));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rate = release_and_time(pool, args.rows).await;
    shutdown.cancel();
    running.await??;
    rate
}

async fn service_rate(
    pool: &PgPool,
    url: &str,
    id: &str,
    args: &ServiceArgs,
) -> Result<f64, BoxError> {
    let listen = {
        let socket = std::net::TcpListener::bind("127.0.0.1:0")?;
        socket.local_addr()?
    };
    let config = format!(
        r#"
[http]
listen = "{listen}"

[console]
enabled = false

[[relay]]
name = "bench"
database_url = "{url}"
outbox_table = "{OUTBOX}"
batch_size = {BATCH}
poll_interval = "{}ms"

[relay.broker]
kind = "nats"
url = "{}"
route = {{ kind = "event_type", prefix = "svc{id}." }}
"#,
        POLL.as_millis(),
        args.nats_url
    );
    let dir = std::env::temp_dir().join(format!("outbox-bench-{id}"));
    std::fs::create_dir_all(&dir)?;
    let file = dir.join("outbox.toml");
    std::fs::write(&file, config)?;
    let mut child = tokio::process::Command::new(&args.outbox_binary)
        .arg("run")
        .arg(&file)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()?;
    let ready = async {
        loop {
            if let Ok(mut stream) = tokio::net::TcpStream::connect(listen).await {
                use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
                let request = "GET /readyz HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n";
                if stream.write_all(request.as_bytes()).await.is_ok() {
                    let mut answer = String::new();
                    let _ = stream.read_to_string(&mut answer).await;
                    if answer.starts_with("HTTP/1.1 200") {
                        return;
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), ready)
        .await
        .map_err(|_| "the service did not become ready within 30 s")?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rate = release_and_time(pool, args.rows).await;
    if let Some(pid) = child.id() {
        let _ = tokio::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .await;
    }
    let exit = tokio::time::timeout(Duration::from_secs(30), child.wait()).await;
    let _ = std::fs::remove_dir_all(&dir);
    match exit {
        Ok(Ok(status)) if status.success() => rate,
        other => Err(format!("the service did not stop cleanly: {other:?}").into()),
    }
}
