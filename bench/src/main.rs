//! Benchmark harness. Every figure is printed next to a baseline measured in the same run, on
//! the same database, with the same pool and the same number of clients.
//!
//! `write` (issue 3), PostgreSQL, 1 / 4 / 16 concurrent clients:
//! - (a) **raw SQL**: BEGIN; INSERT order; INSERT 3 lines (one statement); INSERT 1 outbox row
//!   (every column the framework writes, payload serialized with serde_json); COMMIT — through
//!   sqlx directly on the same pool;
//! - (b) **framework**: a unit of work; the aggregate raises `OrderPlaced`; order and lines
//!   inserted through SeaORM entities on the unit of work; `commit()` maps the event to
//!   `OrderPlacedV1` and writes the outbox row;
//! - (c) **business only**: the same SeaORM inserts in a plain SeaORM transaction, no outbox.
//!
//! Printed: transactions per second of each, and the ratios b/a and b/c.
//!
//! ```text
//! cargo run --release -p outbox-bench -- write --database-url postgres://postgres@127.0.0.1:5432/postgres
//! ```
//!
//! `relay` (issue 4), `inbox` (issue 5) and `brokers` (issue 6): see the modules `relay`,
//! `inbox` and `brokers`.
#![allow(clippy::print_stdout)]

/// The harness's allocator (default feature `mimalloc`): it applies to every mode, framework
/// and raw baselines alike, since they all run in this process.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The allocator this binary was built with, printed with every benchmark's figures.
const ALLOCATOR_NAME: &str = if cfg!(feature = "mimalloc") {
    "mimalloc"
} else {
    "the system allocator (glibc malloc)"
};

mod brokers;
mod inbox;
mod relay;
mod write;

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

/// Benchmarks of the outbox framework against raw baselines measured in the same run.
#[derive(Debug, Parser)]
#[command(name = "outbox-bench")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The write side: raw SQL vs unit of work vs business transaction without outbox.
    Write(write::WriteArgs),
    /// The relay: drain vs raw claim + mark loop, commit-to-publish latency, claim cost
    /// with published rows kept.
    Relay(relay::RelayArgs),
    /// The inbox: a consumer transaction through `inbox::apply` vs the same statements in
    /// raw SQL vs the business statements alone; `Consumer::deliver` dispatch.
    Inbox(inbox::InboxArgs),
    /// The broker adapters: relay -> broker throughput vs raw drain and raw client publish;
    /// consumer runner throughput through the inbox.
    Brokers(brokers::BrokersArgs),
}

/// Shared timing options.
#[derive(Debug, Clone, clap::Args)]
pub struct Timing {
    /// Seconds each measured cell runs.
    #[arg(long, default_value_t = 4.0)]
    pub seconds: f64,
    /// Rounds; the modes run interleaved in each round, in a rotating order, so drift of the
    /// machine hits every mode alike.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Concurrent clients, comma separated.
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 4, 16])]
    pub clients: Vec<usize>,
}

impl Timing {
    /// The measured duration of one cell.
    pub fn cell(&self) -> Duration {
        Duration::from_secs_f64(self.seconds.max(0.05))
    }
}

/// Errors of the benchmarks.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A database of the benchmark's own on the server of `--database-url`, dropped (with its
/// connections) at the end, so no run depends on another's leftovers.
pub struct ScratchDatabase {
    admin: sea_orm::DatabaseConnection,
    name: String,
    url: String,
}

impl ScratchDatabase {
    /// Creates `outbox_bench_<uuid>` on the server of `server_url` (a PostgreSQL URL with a
    /// database name, which is replaced).
    pub async fn create(server_url: &str) -> Result<Self, BoxError> {
        use sea_orm::ConnectionTrait as _;
        let name = format!("outbox_bench_{}", uuid::Uuid::now_v7().simple());
        let Some((server, _)) = server_url.rsplit_once('/') else {
            return Err("the database URL has no database name".into());
        };
        let url = format!("{server}/{name}");
        let admin = sea_orm::Database::connect(server_url).await?;
        admin
            .execute_unprepared(&format!("CREATE DATABASE {name}"))
            .await?;
        Ok(Self { admin, name, url })
    }

    /// The URL of the scratch database.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Drops the database.
    pub async fn drop(self) -> Result<(), BoxError> {
        use sea_orm::ConnectionTrait as _;
        self.admin
            .execute_unprepared(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ))
            .await?;
        Ok(())
    }
}

/// CPU time so far of every thread of process `pid` (`self` for this one), from
/// `/proc/<pid>/task/*/schedstat`; `None` when the process cannot be read.
pub fn task_cpu(pid: &str) -> Option<std::time::Duration> {
    let mut total = 0u64;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let Ok(text) = std::fs::read_to_string(task.ok()?.path().join("schedstat")) else {
            continue; // the thread ended meanwhile
        };
        total += text.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(std::time::Duration::from_nanos(total))
}

/// The single `bigint` of `query`.
pub async fn count(pool: &sea_orm::sqlx::PgPool, query: &'static str) -> Result<i64, BoxError> {
    let row: (i64,) = sea_orm::sqlx::query_as(query).fetch_one(pool).await?;
    Ok(row.0)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    println!("allocator: {ALLOCATOR_NAME} (every mode, framework and baselines)");
    let result = runtime.block_on(async {
        match cli.command {
            Command::Write(args) => write::run(args).await,
            Command::Relay(args) => relay::run(args).await,
            Command::Inbox(args) => inbox::run(args).await,
            Command::Brokers(args) => brokers::run(args).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("benchmark failed: {error}");
            ExitCode::FAILURE
        }
    }
}
