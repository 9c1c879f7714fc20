//! The log relay on MariaDB's binary log (issue 34, item 7), on a binlog-enabled MariaDB
//! server the benchmark starts for itself (`outbox_tests::binlog_mariadb`: row format, full
//! row image and metadata, `innodb_flush_log_at_trx_commit = 2`), each figure next to a
//! baseline measured in the same run on the same server:
//!
//! - **drain** ([`drain`]): N committed events (default 20 000; with 1 and with 10 events
//!   per unit of work, written beforehand by `--clients` writers) published by
//!   - (a) the polling relay, `Relay::drain()` (batch `--poll-batch-size`, published rows
//!     deleted), on a table of its own database refilled with N fresh rows each round;
//!   - (b) the log relay, `LogRelay::run`, resuming from a stored position right before the
//!     N inserts (its slot backfilled beforehand on the empty outbox), timed from its start
//!     until the publisher confirmed N events;
//!   - (c) **raw binlog dump**: `mysql_async`'s binlog stream (the client the log relay
//!     uses) from the same position, decoding the outbox's inserted rows and counting
//!     them, publishing nothing.
//!
//!   Printed: events/s of each, b/a and b/c per round and their medians, and the CPU per
//!   event of this process and of `mariadbd`.
//! - **latency** ([`latency`]): producers commit one event per unit of work at a fixed rate
//!   (default 1 000/s) for `--seconds` while (a) a polling relay (polling every 50 ms:
//!   MariaDB has no wake-up) and (b) a log relay (its defaults) run in turn; commit
//!   (`commit()` returned) → publisher confirmation p50 / p99 / max.
//!
//! ```text
//! cargo run --release -p outbox-bench -- binlog
//! ```

mod drain;
mod latency;
mod raw;
mod server;

use crate::log::{BoxError, PublisherKind};

/// Which part(s) to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Part {
    /// Every part.
    All,
    /// Drain N events: polling relay vs log relay vs raw binlog dump.
    Drain,
    /// Commit-to-publish latency at a fixed rate: polling relay vs log relay.
    Latency,
}

/// Options of `binlog`.
#[derive(Debug, Clone, clap::Args)]
pub struct BinlogArgs {
    /// What to run.
    #[arg(long, value_enum, default_value_t = Part::All)]
    pub part: Part,
    /// drain: events per round.
    #[arg(long, default_value_t = 20_000)]
    pub rows: usize,
    /// drain: rounds; the modes run in a rotating order in each round.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// drain: events per unit of work, comma separated (one drain each).
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 10])]
    pub events_per_commit: Vec<usize>,
    /// drain: concurrent writers of the events.
    #[arg(long, default_value_t = 16)]
    pub clients: usize,
    /// The publishers to measure with, comma separated.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [PublisherKind::Noop])]
    pub publishers: Vec<PublisherKind>,
    /// NATS server (JetStream enabled).
    #[arg(long, default_value = "nats://127.0.0.1:4222")]
    pub nats_url: String,
    /// drain: the log relay's batch size (its default).
    #[arg(long, default_value_t = 1_000)]
    pub batch_size: usize,
    /// drain: the polling relay's batch size (the `relay` benchmark's).
    #[arg(long, default_value_t = 500)]
    pub poll_batch_size: usize,
    /// latency: events per second, all producers together.
    #[arg(long, default_value_t = 1_000)]
    pub rate: u32,
    /// latency: seconds at the rate.
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
}

/// Runs the benchmark on a server of its own.
pub async fn run(args: BinlogArgs) -> Result<(), BoxError> {
    let server = server::BenchServer::start().await?;
    println!("server: {}", server.describe().await?);
    let result = async {
        if matches!(args.part, Part::All | Part::Drain) {
            for &per_commit in &args.events_per_commit {
                drain::drain(&args, &server, per_commit).await?;
            }
        }
        if matches!(args.part, Part::All | Part::Latency) {
            latency::latency(&args, &server).await?;
        }
        Ok::<_, BoxError>(())
    }
    .await;
    server.stop().await;
    result
}
