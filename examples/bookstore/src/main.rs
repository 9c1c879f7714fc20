//! The Bookstore demo: scenarios 1–6 of the outbox article and the job-queue mode (block 7),
//! run for real with the outbox framework; the book's chapter The demo lists them.
//!
//! ```text
//! cargo run -p bookstore                                   # SQLite in a temp folder, in-process broker
//! cargo run -p bookstore -- --database postgres://postgres@127.0.0.1:5432/postgres
//! cargo run -p bookstore -- --database mysql://root@127.0.0.1:3306/test --broker nats
//! cargo run -p bookstore -- --scenario 4
//! cargo run -p bookstore -- --database postgres://…(wal_level=logical) --relay log
//! cargo run -p bookstore -- --database mysql://…(log_bin, binlog_format=ROW) --relay log
//! ```
//!
//! Exits non-zero when a scenario could not run or measured facts other than the article's.
#![allow(clippy::print_stdout)]

use std::process::ExitCode;

use bookstore::broker::{
    BrokerChoice, DEFAULT_AMQP_URL, DEFAULT_KAFKA_BROKERS, DEFAULT_NATS_URL, DEFAULT_REDIS_URL,
};
use bookstore::env::{DatabaseTarget, Env, RelayChoice};
use bookstore::error::DemoError;
use bookstore::scenarios::{self, Outcome};
use clap::{Parser, ValueEnum};

/// Which broker the relays publish to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum BrokerKind {
    /// In memory, no service needed.
    InProcess,
    /// NATS JetStream (`--nats-url`).
    Nats,
    /// RabbitMQ (`--amqp-url`).
    Rabbitmq,
    /// Kafka or tansu (`--kafka-brokers`; build with `--features kafka`).
    Kafka,
    /// Redis Streams (`--redis-url`).
    Redis,
}

/// Which relay publishes the outbox in scenarios 3–6.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum RelayKind {
    /// The polling relay: claims pending rows, marks them published (any database).
    Polling,
    /// The log relay: tails PostgreSQL's write-ahead log (wal_level=logical) or MariaDB's
    /// binary log (log_bin, row format); elsewhere scenarios 3–6 are skipped, saying what
    /// is missing.
    Log,
}

/// The Bookstore demo: the six scenarios of the outbox article and the job-queue mode, run
/// for real (the book's chapter The demo lists them).
#[derive(Debug, Parser)]
#[command(name = "bookstore", version)]
struct Cli {
    /// Database server or file: sqlite://PATH, sqlite::memory:, postgres://… or mysql://…
    /// (each scenario gets a fresh database of its own, created and dropped on that server).
    /// Default: SQLite files in a fresh temporary folder, removed at the end.
    #[arg(long, value_name = "URL")]
    database: Option<String>,

    /// The broker the relays publish to.
    #[arg(long, value_enum, default_value = "in-process")]
    broker: BrokerKind,

    /// NATS server URL.
    #[arg(long, value_name = "URL", default_value = DEFAULT_NATS_URL)]
    nats_url: String,

    /// RabbitMQ AMQP URL.
    #[arg(long, value_name = "URL", default_value = DEFAULT_AMQP_URL)]
    amqp_url: String,

    /// Redis URL.
    #[arg(long, value_name = "URL", default_value = DEFAULT_REDIS_URL)]
    redis_url: String,

    /// Kafka bootstrap servers.
    #[arg(long, value_name = "HOST:PORT[,…]", default_value = DEFAULT_KAFKA_BROKERS)]
    kafka_brokers: String,

    /// The relay of scenarios 3–6 (1, 2 and 7 do not involve a relay choice).
    #[arg(long, value_enum, default_value = "polling")]
    relay: RelayKind,

    /// Run only this scenario (1–6: the article's scenarios; 7: the job-queue mode).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(1..=7))]
    scenario: Option<u8>,
}

impl Cli {
    fn broker(&self) -> BrokerChoice {
        match self.broker {
            BrokerKind::InProcess => BrokerChoice::InProcess,
            BrokerKind::Nats => BrokerChoice::Nats {
                url: self.nats_url.clone(),
            },
            BrokerKind::Rabbitmq => BrokerChoice::RabbitMq {
                url: self.amqp_url.clone(),
            },
            BrokerKind::Kafka => BrokerChoice::Kafka {
                brokers: self.kafka_brokers.clone(),
            },
            BrokerKind::Redis => BrokerChoice::Redis {
                url: self.redis_url.clone(),
            },
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("bookstore: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(demo(&cli));
    // Broker clients may keep background tasks (reconnects); do not wait for them.
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("bookstore: {error}");
            ExitCode::from(2)
        }
    }
}

/// Runs the selected scenarios and prints their blocks; whether every one ran (or was
/// skipped) with the article's facts.
async fn demo(cli: &Cli) -> Result<bool, DemoError> {
    // The default database lives in a temporary folder removed when `folder` drops.
    let (folder, database) = match &cli.database {
        Some(url) => (None, DatabaseTarget::parse(url)?),
        None => {
            let folder = tempfile::Builder::new()
                .prefix("bookstore-demo-")
                .tempdir()?;
            let target = DatabaseTarget::sqlite_in(folder.path());
            (Some(folder), target)
        }
    };
    let env = Env {
        database,
        broker: cli.broker(),
        relay: match cli.relay {
            RelayKind::Polling => RelayChoice::Polling,
            RelayKind::Log => RelayChoice::Log,
        },
    };
    println!(
        "The Bookstore: six scenarios of the dual-write problem and the job queue, run with \
         the outbox framework (book: The demo)"
    );
    let temporary = if folder.is_some() {
        " (a fresh temporary folder, removed at the end)"
    } else {
        ""
    };
    println!("  database: {}{temporary}", env.database.describe());
    println!("  broker:   {}", env.broker.describe());
    println!("  relay:    {}", env.relay.describe());
    println!();

    let selected: Vec<u8> = match cli.scenario {
        Some(number) => vec![number],
        None => scenarios::ALL.to_vec(),
    };
    let mut all_ok = true;
    let (mut ran, mut skipped, mut failed) = (0, 0, 0);
    for number in selected {
        let outcome = scenarios::outcome(&env, number).await;
        for line in scenarios::block(number, env.relay, &outcome) {
            println!("{line}");
        }
        println!();
        match &outcome {
            Outcome::Skipped(_) => skipped += 1,
            _ if outcome.is_ok() => ran += 1,
            _ => failed += 1,
        }
        all_ok &= outcome.is_ok();
    }
    println!("{ran} scenario(s) with the article's facts, {skipped} skipped, {failed} failed");
    Ok(all_ok)
}
