//! The Bookstore as three services (book: The relay service and console):
//!
//! ```text
//! bookstore-services up                      all three, against local PostgreSQL, MariaDB, NATS
//! bookstore-services ordering --database URL --listen ADDR
//! bookstore-services relay FILE              the outbox relay service (same as `outbox run FILE`)
//! bookstore-services inventory --database URL --nats-url URL --listen ADDR
//! ```

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bookstore::services::{RELAY_CONFIG, inventory_service, launcher, ordering_api};
use clap::{Parser, Subcommand};
use outbox_seaorm::Outbox;
use tokio_util::sync::CancellationToken;

/// The Bookstore as services.
#[derive(Debug, Parser)]
#[command(name = "bookstore-services", about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Starts Ordering, the relay service and Inventory; stops them on Ctrl-C.
    Up {
        /// PostgreSQL (the server; Ordering's database `bookstore_ordering` is created).
        #[arg(long, default_value = "postgres://postgres@127.0.0.1:5432/postgres")]
        postgres: String,
        /// MariaDB (the server; Inventory's database `bookstore_inventory` is created).
        #[arg(long, default_value = "mysql://root@127.0.0.1:3306/test")]
        mariadb: String,
        /// Ordering's database URL instead (not created).
        #[arg(long)]
        ordering_database: Option<String>,
        /// Inventory's database URL instead (not created).
        #[arg(long)]
        inventory_database: Option<String>,
        /// NATS with JetStream.
        #[arg(long, default_value = "nats://127.0.0.1:4222")]
        nats_url: String,
        /// The Ordering API's address.
        #[arg(long, default_value = "127.0.0.1:8081")]
        ordering_listen: SocketAddr,
        /// Inventory's address.
        #[arg(long, default_value = "127.0.0.1:8082")]
        inventory_listen: SocketAddr,
        /// The relay service's configuration.
        #[arg(long, default_value = RELAY_CONFIG)]
        relay_config: PathBuf,
    },
    /// The Ordering API.
    Ordering {
        /// Its database (PostgreSQL, MariaDB or SQLite).
        #[arg(long)]
        database: String,
        /// Its address.
        #[arg(long, default_value = "127.0.0.1:8081")]
        listen: SocketAddr,
    },
    /// The outbox relay service on FILE (what `outbox run FILE` does).
    Relay {
        /// The configuration file.
        file: PathBuf,
    },
    /// The Inventory consumer.
    Inventory {
        /// Its database.
        #[arg(long)]
        database: String,
        /// NATS with JetStream.
        #[arg(long, default_value = "nats://127.0.0.1:4222")]
        nats_url: String,
        /// Its address (`GET /stock/{book}`).
        #[arg(long, default_value = "127.0.0.1:8082")]
        listen: SocketAddr,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::Relay { file } = &cli.command {
        return outbox_server::cli::run_from([
            std::ffi::OsString::from("outbox"),
            "run".into(),
            file.clone().into_os_string(),
        ]);
    }
    // Every SQL statement is logged by SQLx at INFO: off by default (a slow one still
    // warns); `RUST_LOG=info` turns them on.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG_FILTER)),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            tracing::error!(%error, "no async runtime");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(run(cli.command));
    match result {
        Ok(code) => code,
        Err(error) => {
            tracing::error!(%error, "bookstore-services failed");
            ExitCode::FAILURE
        }
    }
}

/// The log filter without `RUST_LOG`: INFO, but not SQLx's line per statement.
const DEFAULT_LOG_FILTER: &str = "info,sqlx::query=warn";

/// Cancels `shutdown` on SIGTERM or Ctrl-C.
fn on_signal(shutdown: CancellationToken) {
    tokio::spawn(async move {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            if let (Ok(mut term), Ok(mut int)) = (
                signal(SignalKind::terminate()),
                signal(SignalKind::interrupt()),
            ) {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = int.recv() => {}
                }
            }
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
        shutdown.cancel();
    });
}

async fn run(command: Command) -> Result<ExitCode, Box<dyn std::error::Error>> {
    let shutdown = CancellationToken::new();
    on_signal(shutdown.clone());
    let outbox = Outbox::default();
    match command {
        Command::Ordering { database, listen } => {
            let db = sea_orm::Database::connect(&database).await?;
            ordering_api::set_up(&db, &outbox).await?;
            ordering_api::serve(db, outbox, listen, shutdown).await?;
        }
        Command::Inventory {
            database,
            nats_url,
            listen,
        } => {
            let db = sea_orm::Database::connect(&database).await?;
            inventory_service::set_up(&db, &outbox).await?;
            inventory_service::run(db, outbox, &nats_url, listen, shutdown).await?;
        }
        Command::Up {
            postgres,
            mariadb,
            ordering_database,
            inventory_database,
            nats_url,
            ordering_listen,
            inventory_listen,
            relay_config,
        } => {
            let ordering_database = match ordering_database {
                Some(url) => url,
                None => launcher::ensure_database(&postgres, "bookstore_ordering").await?,
            };
            let inventory_database = match inventory_database {
                Some(url) => url,
                None => launcher::ensure_database(&mariadb, "bookstore_inventory").await?,
            };
            let console_token = std::env::var("OUTBOX_CONSOLE_USER_OPERATOR_TOKEN")
                .unwrap_or_else(|_| format!("bookstore-{}", uuid::Uuid::now_v7().simple()));
            let plan = launcher::Plan {
                ordering_database,
                inventory_database,
                nats_url,
                ordering_listen,
                inventory_listen,
                relay_config,
                console_token,
            };
            tracing::info!(
                ordering = %format!("http://{}/orders", plan.ordering_listen),
                stock = %format!("http://{}/stock/dune", plan.inventory_listen),
                console_token = %plan.console_token,
                "Bookstore services starting (the console's address is in {})",
                plan.relay_config.display()
            );
            let stop = Arc::new(AtomicBool::new(false));
            let flag = stop.clone();
            tokio::spawn(async move {
                shutdown.cancelled().await;
                flag.store(true, Ordering::SeqCst);
            });
            let failed = tokio::task::spawn_blocking(move || launcher::run(&plan, &stop)).await??;
            if let Some((process, status)) = failed {
                tracing::error!(process, %status, "a Bookstore process failed");
                return Ok(ExitCode::FAILURE);
            }
        }
        Command::Relay { .. } => unreachable!("handled before the runtime starts"),
    }
    Ok(ExitCode::SUCCESS)
}
