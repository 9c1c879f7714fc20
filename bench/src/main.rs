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
//! `relay` (issue 4), `inbox` (issue 5), `brokers` (issue 6), `log` (issue 20), `service`
//! (issue 21), `binlog` (issue 34) and `fleet` (issue 37): see the modules of those names.
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

mod binlog;
mod brokers;
mod fleet;
mod inbox;
mod log;
mod measure;
mod order_rows;
mod relay;
mod scratch;
mod service;
mod write;

use std::process::ExitCode;

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
    /// The log relay: drain vs the polling relay and raw pgoutput, commit-to-publish
    /// latency and the highest sustained rate, the write modes vs a raw INSERT.
    Log(log::LogArgs),
    /// The log relay on MariaDB's binary log: drain vs the polling relay and the raw
    /// binlog dump, commit-to-publish latency of both relays.
    Binlog(binlog::BinlogArgs),
    /// The relay service (`outbox run FILE`) against an embedded `Relay`.
    Service(service::ServiceArgs),
    /// A fleet of tenant databases behind one relay service with a connection budget:
    /// connections, memory, CPU, latency, a new tenant's first publish.
    Fleet(fleet::FleetArgs),
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
            Command::Log(args) => log::run(args).await,
            Command::Binlog(args) => binlog::run(args).await,
            Command::Service(args) => service::run(args).await,
            Command::Fleet(args) => fleet::run(args).await,
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
