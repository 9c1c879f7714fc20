//! The log relay benchmarks (issue 20, item 8), on a `wal_level = logical` PostgreSQL, each
//! figure next to a baseline measured in the same run:
//!
//! - **drain** ([`drain`]): N committed events (default 50 000, one `OrderPlacedV1` per unit
//!   of work, written beforehand by `--clients`' largest number of writers) published by
//!   - (a) the polling relay, `Relay::drain()` (table mode, batch `--poll-batch-size`,
//!     published rows deleted), on a table refilled with N fresh rows for each round;
//!   - (b) the log relay, `LogRelay::run`, streaming the same N inserts from its slot
//!     (created beforehand by a first run on the empty outbox), timed from its start until
//!     the publisher confirmed N events;
//!   - (c) **raw pgoutput**: `pg_walstream`'s own loop on a slot and publication of its own
//!     over the same N inserts, with the relay's stream options, counting the outbox's
//!     `Insert` events and acknowledging at each commit, publishing nothing.
//!
//!   The polling relay's table lives in a second scratch database, and both slots are
//!   moved past its fill (`pg_replication_slot_advance`) before the N inserts are written,
//!   so that each stream starts right before its N events and decodes nothing of the
//!   baseline's. With the no-op publisher and with NATS JetStream (a fresh stream per measurement). Printed: events/s of each, b/a and
//!   b/c per round and their medians, and CPU per event of this process and of the server.
//! - **latency** ([`latency`]): producers commit one event per unit of work at a fixed rate
//!   (default 1 000/s) for `--seconds` while a log relay runs; commit (`commit()` returned)
//!   → publisher confirmation (the no-op publisher's call, NATS's acknowledgement) p50 / p99
//!   / max; then the rate steps up until the relay falls behind (its backlog grows) or the
//!   producers cannot reach the rate, and the highest sustained rate is printed with its
//!   latencies.
//! - **write** ([`write`](mod@write)): commits/s of a unit of work writing one `OrderPlacedV1` envelope
//!   and nothing else in (a) table mode, (b) table mode with `remove_after_insert`, (c)
//!   message mode, and (d) the same outbox row inserted with raw sqlx, at 1 / 4 / 16
//!   clients. Printed: c/a, b/a and a/d.
//!
//! ```text
//! cargo run --release -p outbox-bench -- log --database-url postgres://postgres@127.0.0.1:5499/postgres
//! ```

mod cpu;
mod drain;
pub(crate) mod events;
pub(crate) mod latency;
pub(crate) mod publisher;
mod raw;
mod server;
mod write;

use std::error::Error;

use sea_orm::{ConnectOptions, Database, DatabaseConnection};

pub(crate) type BoxError = Box<dyn Error + Send + Sync>;

/// Which part(s) to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Part {
    /// Every part.
    All,
    /// Drain N events: polling relay vs log relay vs raw pgoutput.
    Drain,
    /// Commit-to-publish latency at a fixed rate, and the highest sustained rate.
    Latency,
    /// The write modes' commits/s vs a raw INSERT.
    Write,
}

/// `--publishers`: where the relays publish to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PublisherKind {
    /// A publisher that accepts every batch at once.
    Noop,
    /// `outbox-brokers`' NATS JetStream publisher (`--nats-url`).
    Nats,
}

/// Options of `log`.
#[derive(Debug, Clone, clap::Args)]
pub struct LogArgs {
    /// A PostgreSQL server with `wal_level = logical`; the benchmark creates and drops its
    /// own databases (and their replication slots) on it.
    #[arg(long, default_value = "postgres://postgres@127.0.0.1:5499/postgres")]
    pub database_url: String,
    /// What to run.
    #[arg(long, value_enum, default_value_t = Part::All)]
    pub part: Part,
    /// drain: events per round.
    #[arg(long, default_value_t = 50_000)]
    pub rows: usize,
    /// drain and write: rounds; the modes run in a rotating order in each round.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// latency: seconds at the fixed rate; write: seconds per cell.
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// write: concurrent clients, comma separated (drain writes its events with the
    /// largest number).
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 4, 16])]
    pub clients: Vec<usize>,
    /// drain and latency: the publishers to measure with, comma separated.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [PublisherKind::Noop, PublisherKind::Nats])]
    pub publishers: Vec<PublisherKind>,
    /// NATS server (JetStream enabled).
    #[arg(long, default_value = "nats://127.0.0.1:4222")]
    pub nats_url: String,
    /// drain: events per unit of work when writing the events.
    #[arg(long, default_value_t = 1)]
    pub events_per_commit: usize,
    /// drain: the log relay's batch size (its default).
    #[arg(long, default_value_t = 1_000)]
    pub batch_size: usize,
    /// drain: the polling relay's batch size (the `relay` benchmark's).
    #[arg(long, default_value_t = 500)]
    pub poll_batch_size: usize,
    /// latency: events per second at the fixed rate, all producers together.
    #[arg(long, default_value_t = 1_000)]
    pub rate: u32,
    /// latency: seconds per step of the search for the highest sustained rate.
    #[arg(long, default_value_t = 5.0)]
    pub step_seconds: f64,
    /// latency: the highest rate the search tries.
    #[arg(long, default_value_t = 64_000)]
    pub max_rate: u32,
}

/// A pool of `connections` on `url`, without SQL logging.
pub(crate) async fn connect(url: &str, connections: u32) -> Result<DatabaseConnection, BoxError> {
    let mut options = ConnectOptions::new(url.to_owned());
    options
        .max_connections(connections)
        .min_connections(connections.min(4))
        .sqlx_logging(false);
    Ok(Database::connect(options).await?)
}

/// Runs the benchmark in databases of its own.
pub async fn run(args: LogArgs) -> Result<(), BoxError> {
    let admin = connect(&args.database_url, 2).await?;
    let settings = server::settings(&admin).await?;
    println!("server: {settings}");
    if !settings.contains("wal_level=logical") {
        return Err(format!(
            "{} has not wal_level = logical; start a server of its own (see BENCHMARKS.md)",
            args.database_url
        )
        .into());
    }
    let scratch = crate::scratch::ScratchDatabase::create(&args.database_url).await?;
    // The polling relay's table, apart: its writes are not in the slots' database.
    let polled = crate::scratch::ScratchDatabase::create(&args.database_url).await?;
    let result = async {
        if matches!(args.part, Part::All | Part::Drain) {
            drain::drain(&args, scratch.url(), polled.url()).await?;
        }
        if matches!(args.part, Part::All | Part::Latency) {
            latency::latency(&args, scratch.url()).await?;
        }
        if matches!(args.part, Part::All | Part::Write) {
            write::write(&args, scratch.url()).await?;
        }
        Ok::<_, BoxError>(())
    }
    .await;
    for database in [scratch.url(), polled.url()] {
        if let Err(error) = server::drop_slots(&admin, database).await {
            eprintln!("warning: dropping the replication slots of {database}: {error}");
        }
    }
    admin.close().await?;
    scratch.drop().await?;
    polled.drop().await?;
    result
}
