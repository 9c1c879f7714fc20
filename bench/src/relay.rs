//! The relay benchmarks (issue 4), on PostgreSQL, each against a baseline measured in the
//! same run on the same database:
//!
//! - **drain**: publish N pending rows (default 100 000) with a no-op publisher: the relay
//!   (`drain()`, per-aggregate mode, leases) vs a raw-SQL claim + mark loop through sqlx
//!   with the same batch size (`SELECT <the columns of an envelope> … ORDER BY seq LIMIT n
//!   FOR UPDATE SKIP LOCKED`, every column decoded — headers parsed as JSON, the payload read as validated JSON
//!   text, as the relay does —,
//!   `UPDATE … SET status = 'published' WHERE seq = ANY($1)`, `COMMIT`): what any relay
//!   must do to publish a row. Before each run the table is emptied and refilled with the
//!   same N fresh pending rows, then vacuumed and analyzed; the two alternate. (Resetting
//!   the rows to pending with an `UPDATE` instead bloats the partial pending index until
//!   PostgreSQL prefers the primary key, and then every claim of both loops walks all the
//!   rows published since the start of the run: that measures the bloat, not the loops.)
//!   Printed: rows/s of each and relay / raw.
//! - **latency**: producers commit one event each at a steady total rate (default 1 000/s)
//!   while a relay runs; commit-to-publish latency (from `commit()` returning to the
//!   in-process broker receiving the message) p50 / p99 / max, with the `NOTIFY` wake-up
//!   (poll interval 1 s) and with polling only (default 100 ms).
//! - **claim**: the relay drains M pending rows (default 10 000, batch 100) from a table
//!   with K published rows kept (default 1 000 000) and from one with none. Printed: time
//!   per claim batch in each and kept / empty.
//!
//! ```text
//! cargo run --release -p outbox-bench -- relay --database-url postgres://postgres@127.0.0.1:5432/postgres
//! ```

use std::collections::HashMap;
use std::error::Error;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bookstore_contracts::{MoneyV1, OrderPlacedV1, OrderedBookV1};
use outbox_core::Envelope;
use outbox_core::Raise;
use outbox_core::in_process::InProcessBroker;
use outbox_core::mapping::{ContractMapper, ContractSink, MapError};
use outbox_core::publish::{BatchOutcome, Publisher};
use outbox_seaorm::Outbox;
use outbox_seaorm::relay::Relay;
use sea_orm::sqlx::{self, PgPool, Row};
use sea_orm::{ConnectOptions, Database, DatabaseConnection};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

type BoxError = Box<dyn Error + Send + Sync>;

/// Which part(s) to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Part {
    /// Every part.
    All,
    /// Drain N rows: relay vs raw claim + mark loop.
    Drain,
    /// Commit-to-publish latency with `NOTIFY` and with polling only.
    Latency,
    /// Claim cost with published rows kept vs an empty table.
    Claim,
}

/// `--drain-modes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DrainMode {
    /// `Relay::drain`.
    Relay,
    /// The raw claim + mark loop.
    Raw,
}

/// Options of `relay`.
#[derive(Debug, Clone, clap::Args)]
pub struct RelayArgs {
    /// A PostgreSQL server; the benchmark creates and drops its own database on it.
    #[arg(long, default_value = "postgres://postgres@127.0.0.1:5432/postgres")]
    pub database_url: String,
    /// What to run.
    #[arg(long, value_enum, default_value_t = Part::All)]
    pub part: Part,
    /// drain: pending rows.
    #[arg(long, default_value_t = 100_000)]
    pub rows: usize,
    /// drain: rows per batch (relay and raw loop).
    #[arg(long, default_value_t = 500)]
    pub batch_size: usize,
    /// drain: runs of each.
    #[arg(long, default_value_t = 2)]
    pub rounds: usize,
    /// drain: whether the relay pipelines its batches (`RelayBuilder::pipeline`).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub pipeline: bool,
    /// drain: which loops to run (for profiling one at a time); the ratio needs both.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [DrainMode::Relay, DrainMode::Raw])]
    pub drain_modes: Vec<DrainMode>,
    /// latency: events per second, all producers together.
    #[arg(long, default_value_t = 1_000)]
    pub rate: u32,
    /// latency: seconds measured per mode.
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// latency: poll interval of the polling-only relay, in milliseconds.
    #[arg(long, default_value_t = 100)]
    pub poll_ms: u64,
    /// claim: published rows kept.
    #[arg(long, default_value_t = 1_000_000)]
    pub kept: usize,
    /// claim: pending rows drained per measurement.
    #[arg(long, default_value_t = 10_000)]
    pub claim_rows: usize,
}

/// Accepts everything at once.
struct Noop;

impl Publisher for Noop {
    async fn publish(&self, batch: &[Envelope]) -> BatchOutcome {
        Ok(vec![Ok(()); batch.len()])
    }
}

enum BenchEvent {
    Placed(OrderPlacedV1),
}

struct BenchContracts;

impl ContractMapper<BenchEvent> for BenchContracts {
    fn map(&self, event: &BenchEvent, out: &mut ContractSink<'_>) -> Result<(), MapError> {
        match event {
            BenchEvent::Placed(placed) => out.emit(placed),
        }
    }
}

fn placed() -> OrderPlacedV1 {
    OrderPlacedV1 {
        order_id: Uuid::now_v7(),
        checkout_id: Uuid::now_v7(),
        customer_id: Uuid::now_v7(),
        books: vec![OrderedBookV1 {
            book_id: "dune".into(),
            quantity: 2,
            unit_price: MoneyV1 {
                amount: "12.50".into(),
                currency: "EUR".into(),
            },
        }],
    }
}

/// Inserts `rows` rows in the framework's format with plain SQL (fast set-up), spread over
/// 1 000 aggregates, `pending` or `published`.
async fn fill(pool: &PgPool, table: &str, rows: usize, published: bool) -> Result<(), BoxError> {
    let (status, published_at) = if published {
        ("published", "now()")
    } else {
        ("pending", "NULL")
    };
    let mut done = 0;
    while done < rows {
        let chunk = (rows - done).min(100_000);
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO {table} (message_id, event_type, version, aggregate_type, aggregate_id, \
             partition, headers, occurred_at, payload, status, attempts, next_attempt_at, \
             published_at, created_at) \
             SELECT gen_random_uuid(), 'bookstore.ordering.order-placed.v1', 1, 'order', \
             'order-' || (i % 1000), (i % 1000) % 64, '{{}}'::jsonb, now(), \
             jsonb_build_object('order_id', 'order-' || (i % 1000), 'n', i, 'books', \
             jsonb_build_array(jsonb_build_object('book_id', 'dune', 'quantity', 2))), \
             '{status}', 0, now() - interval '1 second', {published_at}, now() \
             FROM generate_series(1, {chunk}) AS i"
        )))
        .execute(pool)
        .await?;
        done += chunk;
    }
    Ok(())
}

async fn vacuum(pool: &PgPool, table: &str) -> Result<(), BoxError> {
    sqlx::query(sqlx::AssertSqlSafe(format!("VACUUM ANALYZE {table}")))
        .execute(pool)
        .await?;
    Ok(())
}

async fn connect(url: &str) -> Result<DatabaseConnection, BoxError> {
    let mut options = ConnectOptions::new(url.to_owned());
    options
        .max_connections(16)
        .min_connections(4)
        .sqlx_logging(false);
    Ok(Database::connect(options).await?)
}

/// Runs the benchmark in a database of its own.
pub async fn run(args: RelayArgs) -> Result<(), BoxError> {
    let scratch = crate::ScratchDatabase::create(&args.database_url).await?;
    let url = scratch.url().to_owned();
    let result = async {
        let db = connect(&url).await?;
        if matches!(args.part, Part::All | Part::Drain) {
            drain(&db, &args).await?;
        }
        if matches!(args.part, Part::All | Part::Latency) {
            latency(&db, &args).await?;
        }
        if matches!(args.part, Part::All | Part::Claim) {
            claim(&db, &args).await?;
        }
        db.close().await?;
        Ok::<_, BoxError>(())
    }
    .await;
    scratch.drop().await?;
    result
}

/// The columns of one row as the raw loop decodes them: what a relay needs to publish it.
#[allow(dead_code)]
struct RawRow {
    seq: i64,
    message_id: Uuid,
    event_type: String,
    version: i32,
    aggregate_type: String,
    aggregate_id: String,
    correlation_id: Option<Uuid>,
    causation_id: Option<Uuid>,
    traceparent: Option<String>,
    tracestate: Option<String>,
    headers: serde_json::Value,
    occurred_at: chrono::DateTime<chrono::Utc>,
    payload: sqlx::types::Json<Box<serde_json::value::RawValue>>,
    attempts: i32,
}

/// The raw loop: claim, decode every column of the envelope (headers parsed, the payload
/// read as JSON text and validated), mark, commit.
async fn raw_drain(pool: &PgPool, batch: usize) -> Result<usize, BoxError> {
    let mut total = 0;
    loop {
        let mut txn = pool.begin().await?;
        let rows = sqlx::query(
            "SELECT seq, message_id, event_type, version, aggregate_type, aggregate_id, \
             correlation_id, causation_id, traceparent, tracestate, headers, \
             occurred_at, payload, attempts FROM bench_outbox \
             WHERE status = 'pending' AND next_attempt_at <= now() \
             ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED",
        )
        .bind(i64::try_from(batch)?)
        .fetch_all(&mut *txn)
        .await?;
        if rows.is_empty() {
            txn.commit().await?;
            return Ok(total);
        }
        let mut seqs = Vec::with_capacity(rows.len());
        let mut decoded = Vec::with_capacity(rows.len());
        for row in &rows {
            let raw = RawRow {
                seq: row.try_get(0)?,
                message_id: row.try_get(1)?,
                event_type: row.try_get(2)?,
                version: row.try_get(3)?,
                aggregate_type: row.try_get(4)?,
                aggregate_id: row.try_get(5)?,
                correlation_id: row.try_get(6)?,
                causation_id: row.try_get(7)?,
                traceparent: row.try_get(8)?,
                tracestate: row.try_get(9)?,
                headers: row.try_get(10)?,
                occurred_at: row.try_get(11)?,
                payload: row.try_get(12)?,
                attempts: row.try_get(13)?,
            };
            seqs.push(raw.seq);
            decoded.push(raw);
        }
        sqlx::query(
            "UPDATE bench_outbox SET status = 'published', published_at = now() \
             WHERE seq = ANY($1)",
        )
        .bind(&seqs)
        .execute(&mut *txn)
        .await?;
        txn.commit().await?;
        total += seqs.len();
    }
}

async fn drain(db: &DatabaseConnection, args: &RelayArgs) -> Result<(), BoxError> {
    let outbox = Outbox::builder()
        .outbox_table("bench_outbox")
        .inbox_table("bench_inbox")
        .build()?;
    outbox_seaorm::schema::install(db, &outbox).await?;
    let pool = db.get_postgres_connection_pool().clone();
    let mut relay = Relay::builder(db.clone(), outbox.clone(), Noop)
        .batch_size(args.batch_size)
        .pipeline(args.pipeline)
        .listen(false)
        .retention(None)
        .build()?;
    // The same fresh rows before every run (see the module documentation).
    let reset = async || -> Result<(), BoxError> {
        sqlx::query("TRUNCATE bench_outbox").execute(&pool).await?;
        fill(&pool, "bench_outbox", args.rows, false).await?;
        vacuum(&pool, "bench_outbox").await
    };
    println!(
        "drain {} pending rows, batch {}, no-op publisher, PostgreSQL",
        args.rows, args.batch_size
    );
    println!(
        "{:>6}  {:>14}  {:>14}  {:>6}",
        "round", "relay rows/s", "raw rows/s", "ratio"
    );
    let (mut relay_total, mut raw_total) = (Duration::ZERO, Duration::ZERO);
    for round in 0..args.rounds.max(1) {
        let mut times = [Duration::ZERO; 2];
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for which in order {
            let mode = [DrainMode::Relay, DrainMode::Raw][which];
            if !args.drain_modes.contains(&mode) {
                times[which] = Duration::from_secs(1);
                continue;
            }
            reset().await?;
            let started = Instant::now();
            let published = if which == 0 {
                relay.drain().await?.published
            } else {
                raw_drain(&pool, args.batch_size).await?
            };
            times[which] = started.elapsed();
            if published != args.rows {
                return Err(format!("published {published} of {} rows", args.rows).into());
            }
        }
        relay_total += times[0];
        raw_total += times[1];
        let rate = |took: Duration| args.rows as f64 / took.as_secs_f64();
        println!(
            "{round:>6}  {:>14.0}  {:>14.0}  {:>6.3}",
            rate(times[0]),
            rate(times[1]),
            rate(times[0]) / rate(times[1])
        );
    }
    println!(
        "drain: relay / raw throughput = {:.3} (target >= 0.90)",
        raw_total.as_secs_f64() / relay_total.as_secs_f64()
    );
    Ok(())
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

async fn latency(db: &DatabaseConnection, args: &RelayArgs) -> Result<(), BoxError> {
    let outbox = Outbox::builder()
        .outbox_table("lat_outbox")
        .inbox_table("lat_inbox")
        .notify_channel(Some("lat_outbox_pending"))
        .build()?;
    outbox_seaorm::schema::install(db, &outbox).await?;
    println!(
        "commit-to-publish latency at {} events/s for {} s (one event per commit), PostgreSQL",
        args.rate, args.seconds
    );
    println!(
        "{:>28}  {:>7}  {:>9}  {:>9}  {:>9}",
        "mode", "events", "p50", "p99", "max"
    );
    for (mode, listen, poll) in [
        ("NOTIFY (poll 1 s)", true, Duration::from_secs(1)),
        ("polling only", false, Duration::from_millis(args.poll_ms)),
    ] {
        let broker = InProcessBroker::new();
        let mut received = broker.subscribe();
        let arrivals: Arc<Mutex<HashMap<Uuid, Instant>>> = Arc::default();
        let collector = tokio::spawn({
            let arrivals = Arc::clone(&arrivals);
            async move {
                while let Ok(envelope) = received.recv().await {
                    let now = Instant::now();
                    if let Ok(mut arrivals) = arrivals.lock() {
                        arrivals.insert(envelope.message_id, now);
                    }
                }
            }
        });
        let shutdown = CancellationToken::new();
        let relay = Relay::builder(db.clone(), outbox.clone(), broker.clone())
            .poll_interval(poll)
            .listen(listen)
            .retention(None)
            .build()?;
        let running = tokio::spawn(relay.run(shutdown.clone()));
        tokio::time::sleep(Duration::from_millis(500)).await;
        let producers = 8u32;
        let per_producer =
            Duration::from_secs_f64(f64::from(producers) / f64::from(args.rate.max(1)));
        let deadline = Instant::now() + Duration::from_secs_f64(args.seconds);
        let mut tasks = Vec::new();
        for _ in 0..producers {
            let (db, outbox) = (db.clone(), outbox.clone());
            tasks.push(tokio::spawn(async move {
                let mut committed = Vec::new();
                let mut tick = tokio::time::interval(per_producer);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                while Instant::now() < deadline {
                    tick.tick().await;
                    let uow = outbox.begin(&db, &BenchContracts).await?;
                    uow.raise(BenchEvent::Placed(placed()));
                    let report = uow.commit().await?;
                    let at = Instant::now();
                    committed.extend(report.message_ids.into_iter().map(|id| (id, at)));
                }
                Ok::<_, BoxError>(committed)
            }));
        }
        let mut committed = Vec::new();
        for task in tasks {
            committed.extend(task.await??);
        }
        let _ = broker
            .wait_for_published(committed.len(), Duration::from_secs(10))
            .await;
        shutdown.cancel();
        running.await??;
        collector.abort();
        let arrivals = arrivals.lock().map_err(|_| "poisoned")?.clone();
        let mut latencies: Vec<Duration> = committed
            .iter()
            .filter_map(|(id, at)| {
                arrivals
                    .get(id)
                    .map(|got| got.saturating_duration_since(*at))
            })
            .collect();
        latencies.sort();
        let ms = |d: Duration| format!("{:.2} ms", d.as_secs_f64() * 1000.0);
        println!(
            "{mode:>28}  {:>7}  {:>9}  {:>9}  {:>9}",
            latencies.len(),
            ms(percentile(&latencies, 0.50)),
            ms(percentile(&latencies, 0.99)),
            ms(latencies.last().copied().unwrap_or_default())
        );
        if latencies.len() != committed.len() {
            println!(
                "  ({} of {} events not published)",
                committed.len() - latencies.len(),
                committed.len()
            );
        }
    }
    println!("latency targets with NOTIFY: p50 <= 5 ms, p99 <= 25 ms");
    Ok(())
}

async fn claim(db: &DatabaseConnection, args: &RelayArgs) -> Result<(), BoxError> {
    let pool = db.get_postgres_connection_pool().clone();
    let empty = Outbox::builder()
        .outbox_table("empty_outbox")
        .inbox_table("empty_inbox")
        .build()?;
    let kept = Outbox::builder()
        .outbox_table("kept_outbox")
        .inbox_table("kept_inbox")
        .build()?;
    outbox_seaorm::schema::install(db, &empty).await?;
    outbox_seaorm::schema::install(db, &kept).await?;
    println!(
        "claim cost: filling kept_outbox with {} published rows…",
        args.kept
    );
    fill(&pool, "kept_outbox", args.kept, true).await?;
    const BATCH: usize = 100;
    let mut per_batch = [Duration::ZERO; 2];
    let rounds = 3;
    for round in 0..rounds {
        for (which, (outbox, table)) in [(&empty, "empty_outbox"), (&kept, "kept_outbox")]
            .into_iter()
            .enumerate()
        {
            fill(&pool, table, args.claim_rows, false).await?;
            sqlx::query(sqlx::AssertSqlSafe(format!("UPDATE {table} SET payload = payload || '{{\"claim\": true}}'::jsonb WHERE status = 'pending'")))
                .execute(&pool)
                .await?;
            vacuum(&pool, table).await?;
            // One instance id: each round's relay takes over the previous one's leases.
            let mut relay = Relay::builder(db.clone(), outbox.clone(), Noop)
                .instance_id("bench-claim")
                .batch_size(BATCH)
                .listen(false)
                .retention(None)
                .build()?;
            relay.refresh_leases().await?;
            let started = Instant::now();
            let report = relay.drain().await?;
            let took = started.elapsed();
            if report.published != args.claim_rows {
                return Err(format!(
                    "{table}: published {} of {}",
                    report.published, args.claim_rows
                )
                .into());
            }
            per_batch[which] += took / u32::try_from(report.batches.max(1))?;
            // Published claim rows go: the next round starts from the same table.
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "DELETE FROM {table} WHERE payload ? 'claim'"
            )))
            .execute(&pool)
            .await?;
        }
        let _ = round;
    }
    let (a, b) = (per_batch[0] / rounds, per_batch[1] / rounds);
    println!(
        "claim + publish + mark per batch of {BATCH}: empty table {:.3} ms, with {} published rows kept {:.3} ms",
        a.as_secs_f64() * 1000.0,
        args.kept,
        b.as_secs_f64() * 1000.0
    );
    println!(
        "claim cost: kept / empty = {:.3} (target <= 1.10)",
        b.as_secs_f64() / a.as_secs_f64()
    );
    Ok(())
}
