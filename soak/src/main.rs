//! `outbox-soak`: the chaos soak of the outbox framework (book: Reliability; and
//! RELIABILITY.md).
//!
//! `outbox-soak run` is the conductor: it makes a PostgreSQL database (the producer's), a
//! MariaDB database (the consumers'), a broker server of its own (NATS JetStream, Redis,
//! RabbitMQ, or tansu for Kafka) on a free loopback port, and starts this same binary as
//! separate processes in the other roles — one producer placing orders through units of
//! work, three relays, two consumers each applying its share of the aggregates through an
//! `#[inbox_handler]`. While the chaos lasts it kills a random relay
//! or consumer (`SIGKILL`) every 1–3 s and restarts it, now and then kills the producer
//! too, kills and restarts the broker server, and terminates the relays' PostgreSQL backends.
//! Then it waits (bounded) until the system is quiet and checks every effect: none missing,
//! none twice, each aggregate's in order. It exits with 1 when any count is not zero.

mod broker;
mod chaos;
mod conductor;
mod consumer;
mod contract;
mod databases;
mod error;
mod plan;
mod process;
mod producer;
mod relay;
mod report;
mod takeover;
mod verify;

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::plan::Plan;

/// The chaos soak of the outbox framework.
#[derive(Debug, Parser)]
#[command(name = "outbox-soak", version)]
struct Cli {
    #[command(subcommand)]
    role: Role,
}

/// What this process is.
#[derive(Debug, Subcommand)]
enum Role {
    /// Runs a soak: sets everything up, starts the other roles as processes, brings chaos,
    /// waits until quiet, verifies, cleans up.
    Run(Box<conductor::RunArgs>),
    /// (started by `run`) Places orders through units of work until killed or done.
    #[command(hide = true)]
    Producer,
    /// (started by `run`) Runs one relay.
    #[command(hide = true)]
    Relay {
        /// The relay's instance number.
        #[arg(long)]
        instance: u32,
    },
    /// (started by `run`) Runs one consumer: the inbox for one share of the aggregates.
    #[command(hide = true)]
    Consumer {
        /// The share of the aggregates it consumes.
        #[arg(long)]
        share: u32,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            tracing::error!(%error, "cannot start the runtime");
            return ExitCode::from(2);
        }
    };
    let outcome = runtime.block_on(async {
        match cli.role {
            Role::Run(args) => conductor::run(*args).await,
            Role::Producer => producer::run(&Plan::from_env()?)
                .await
                .map(|()| ExitCode::SUCCESS),
            Role::Relay { instance } => relay::run(&Plan::from_env()?, instance)
                .await
                .map(|()| ExitCode::SUCCESS),
            Role::Consumer { share } => consumer::run(&Plan::from_env()?, share)
                .await
                .map(|()| ExitCode::SUCCESS),
        }
    });
    // Child roles may leave tasks behind (a relay's heartbeat): do not wait for them.
    runtime.shutdown_timeout(Duration::from_millis(100));
    match outcome {
        Ok(code) => code,
        Err(error) => {
            tracing::error!("{error}");
            ExitCode::from(2)
        }
    }
}
