//! The relay benchmarks (issues 4 and 17), on PostgreSQL, each against baselines measured
//! in the same run on the same database:
//!
//! - **drain**: publish N pending rows (default 100 000) with a no-op publisher, with
//!   `--workers` loops of each kind at once (default 1):
//!   - the relay (`drain()`, `--ordering`, leases);
//!   - [`raw`]: a raw-SQL claim + mark loop on our own table shape through sqlx with the
//!     same batch size (`SELECT <the columns of an envelope> … ORDER BY seq LIMIT n FOR
//!     UPDATE SKIP LOCKED`, every column decoded — headers parsed as JSON, the payload read
//!     as validated JSON text, as the relay does —, `UPDATE … SET status = 'published'
//!     WHERE seq = ANY($1)`, `COMMIT`): what any relay must do to publish a row of our
//!     table;
//!   - [`simple`]: the simplest loop a user writes by hand, on a narrow table of its own
//!     (`WHERE processed_at IS NULL … FOR UPDATE SKIP LOCKED`, `UPDATE … SET processed_at
//!     = now()`), with no order, leases or retries.
//!
//!   Before each run the table is emptied and refilled with the same N fresh pending rows,
//!   then vacuumed and analyzed; each round starts with another of the three. (Resetting
//!   the rows to pending with an `UPDATE` instead bloats the partial pending index until
//!   PostgreSQL prefers the primary key, and then every claim of both loops walks all the
//!   rows published since the start of the run: that measures the bloat, not the loops.)
//!   Printed: rows/s of each, relay / raw and relay / simple per round, and their medians.
//!   With `--pooler-url` (a PgBouncer in transaction mode in front of the same server), a
//!   fourth loop: the same relay through it with `transaction_pooling`, on a table of its
//!   own; printed as pooled / relay (issue 37).
//! - **latency**: producers commit one event each at a steady total rate (default 1 000/s)
//!   while a relay runs; commit-to-publish latency (from `commit()` returning to the
//!   in-process broker receiving the message) p50 / p99 / max, with the `NOTIFY` wake-up
//!   (poll interval 1 s) and with polling only (default 100 ms).
//! - **claim**: the relay drains M pending rows (default 10 000, batch 100) from a table
//!   with K published rows kept (default 1 000 000) and from one with none. Printed: time
//!   per claim batch in each and kept / empty.
//!
//! - **scheduled** (issue 36): rows that fell due drained from the scheduled table, with
//!   1 000 000 rows waiting for next month beside them vs none, and the same rows written
//!   pending; see [`scheduled`].
//! - **jobs** (issue 36): jobs/s through a relay with a `JobDispatcher` and a no-op handler
//!   against the simplest hand-written `SKIP LOCKED` job loop, `--workers` of each; see
//!   [`jobs`].
//!
//! ```text
//! cargo run --release -p outbox-bench -- relay --database-url postgres://postgres@127.0.0.1:5432/postgres
//! ```

mod claim;
mod drain;
mod jobs;
mod latency;
mod raw;
mod scheduled;
mod simple;

use std::error::Error;

use bookstore_contracts::{MoneyV1, OrderPlacedV1, OrderedBookV1};
use outbox_core::Envelope;
use outbox_core::mapping::{ContractMapper, ContractSink, MapError};
use outbox_core::policy::Ordering;
use outbox_core::publish::{BatchOutcome, Publisher};
use sea_orm::sqlx::{self, PgPool};
use sea_orm::{ConnectOptions, ConnectionTrait as _, Database, DatabaseConnection};
use uuid::Uuid;

type BoxError = Box<dyn Error + Send + Sync>;

/// Which part(s) to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Part {
    /// Every part.
    All,
    /// Drain N rows: relay vs the raw loop on our table vs the simplest loop.
    Drain,
    /// Commit-to-publish latency with `NOTIFY` and with polling only.
    Latency,
    /// Claim cost with published rows kept vs an empty table.
    Claim,
    /// Draining rows due from the scheduled table, with 1 M rows waiting beside them vs
    /// none.
    Scheduled,
    /// Jobs/s through `JobDispatcher` (no-op handler) vs the simplest `SKIP LOCKED` job
    /// loop.
    Jobs,
}

/// `--drain-modes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DrainMode {
    /// `Relay::drain`.
    Relay,
    /// The raw claim + mark loop on our table shape.
    Raw,
    /// The simplest hand-written loop on a narrow table of its own.
    Simple,
    /// `Relay::drain` through the PgBouncer of `--pooler-url`, with `transaction_pooling`.
    Pooled,
}

/// `--ordering` of the relay in `drain`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OrderingArg {
    /// [`Ordering::PerAggregate`] (the default).
    PerAggregate,
    /// [`Ordering::Unordered`].
    Unordered,
}

impl From<OrderingArg> for Ordering {
    fn from(arg: OrderingArg) -> Self {
        match arg {
            OrderingArg::PerAggregate => Ordering::PerAggregate,
            OrderingArg::Unordered => Ordering::Unordered,
        }
    }
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
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [DrainMode::Relay, DrainMode::Raw, DrainMode::Simple])]
    pub drain_modes: Vec<DrainMode>,
    /// drain: loops of each kind running at once (relays with instance ids of their own).
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// drain: the relay's ordering.
    #[arg(long, value_enum, default_value_t = OrderingArg::PerAggregate)]
    pub ordering: OrderingArg,
    /// Every part: the scratch database's `synchronous_commit`.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub synchronous_commit: bool,
    /// Every part: log every statement's plan, time, buffers and WAL to the server log
    /// through `auto_explain` (superuser; for finding where the time goes, not for timing:
    /// it slows every statement down).
    #[arg(long)]
    pub auto_explain: bool,
    /// drain: keep published rows (`RelayBuilder::retention(None)`, the mark an `UPDATE`;
    /// the raw loop on our table then updates too) instead of the default, deleting them.
    #[arg(long)]
    pub keep_published: bool,
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
    /// scheduled: rows due per measurement.
    #[arg(long, default_value_t = 100_000)]
    pub due_rows: usize,
    /// scheduled: rows waiting for next month beside them.
    #[arg(long, default_value_t = 1_000_000)]
    pub future_rows: usize,
    /// scheduled: leave the tables unvacuumed and unanalyzed before each drain (a burst into
    /// tables whose statistics are stale, as in production between autovacuum runs).
    #[arg(long)]
    pub no_vacuum: bool,
    /// scheduled: rows of the steady flow.
    #[arg(long, default_value_t = 20_000)]
    pub flow_rows: usize,
    /// scheduled: seconds over which the steady flow's rows fall due.
    #[arg(long, default_value_t = 10.0)]
    pub flow_seconds: f64,
    /// jobs: every job under worker key `bench`, one in ten at priority 0 and the others at
    /// 5; the relays claim by `(priority, seq)`, the simple loop by `(priority, id)` through
    /// an index of its own.
    #[arg(long)]
    pub priorities: bool,
    /// drain: a PgBouncer in transaction pooling mode in front of the server of
    /// `--database-url` (`postgres://user@host:port`, no database: the scratch database's
    /// name is added); adds a fourth loop, the relay through it with `transaction_pooling`.
    #[arg(long)]
    pub pooler_url: Option<String>,
}

/// Accepts everything at once.
#[derive(Clone, Copy)]
struct Noop;

impl Publisher for Noop {
    async fn publish(&self, batch: &[Envelope]) -> BatchOutcome {
        Ok(vec![Ok(()); batch.len()])
    }
}

pub(crate) enum BenchEvent {
    /// An order placed.
    Placed(OrderPlacedV1),
}

pub(crate) struct BenchContracts;

impl ContractMapper<BenchEvent> for BenchContracts {
    fn map(&self, event: &BenchEvent, out: &mut ContractSink<'_>) -> Result<(), MapError> {
        match event {
            BenchEvent::Placed(placed) => out.emit(placed),
        }
    }
}

pub(crate) fn placed() -> OrderPlacedV1 {
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
        // Time-ordered message ids, as the framework writes them (UUIDv7): the ms clock,
        // the row number below it, random bits after.
        let message_id = format!(
            "(lpad(to_hex((extract(epoch from clock_timestamp()) * 1000)::bigint * 4096 + {done} + i), 16, '0') \
             || replace(substr(gen_random_uuid()::text, 20), '-', ''))::uuid"
        );
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO {table} (message_id, event_type, version, aggregate_type, aggregate_id, \
             partition, headers, occurred_at, payload, status, attempts, next_attempt_at, \
             published_at, created_at) \
             SELECT {message_id}, 'bookstore.ordering.order-placed.v1', 1, 'order', \
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
    let scratch = crate::scratch::ScratchDatabase::create(&args.database_url).await?;
    let url = scratch.url().to_owned();
    let result = async {
        let mut settings = Vec::new();
        if !args.synchronous_commit {
            settings.push("synchronous_commit = off");
        }
        if args.auto_explain {
            settings.extend([
                "session_preload_libraries = 'auto_explain'",
                "auto_explain.log_min_duration = 0",
                "auto_explain.log_analyze = on",
                "auto_explain.log_timing = off",
                "auto_explain.log_buffers = on",
                "auto_explain.log_wal = on",
                "auto_explain.log_format = json",
                "log_statement = 'ddl'",
            ]);
        }
        if !settings.is_empty() {
            let db = connect(&url).await?;
            let name = url.rsplit_once('/').map_or("", |(_, name)| name);
            for setting in settings {
                db.execute_unprepared(&format!("ALTER DATABASE {name} SET {setting}"))
                    .await?;
            }
            db.close().await?;
        }
        let db = connect(&url).await?;
        if matches!(args.part, Part::All | Part::Drain) {
            let pooled = match &args.pooler_url {
                Some(pooler) => {
                    let name = url.rsplit_once('/').map_or("", |(_, name)| name);
                    let pooled = format!(
                        "{}/{name}?statement-cache-capacity=0",
                        pooler.trim_end_matches('/')
                    );
                    Some(connect(&pooled).await?)
                }
                None => None,
            };
            drain::drain(&db, pooled.as_ref(), &args).await?;
        }
        if matches!(args.part, Part::All | Part::Latency) {
            latency::latency(&db, &args).await?;
        }
        if matches!(args.part, Part::All | Part::Claim) {
            claim::claim(&db, &args).await?;
        }
        if matches!(args.part, Part::All | Part::Scheduled) {
            scheduled::scheduled(&db, &args).await?;
        }
        if matches!(args.part, Part::All | Part::Jobs) {
            jobs::jobs(&db, &args).await?;
        }
        db.close().await?;
        Ok::<_, BoxError>(())
    }
    .await;
    scratch.drop().await?;
    result
}
