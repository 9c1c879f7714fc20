//! The `outbox` command line: `run FILE` (the relays and the HTTP endpoints until SIGTERM)
//! and `check-config FILE` (every problem with its key path). Exit codes: 0 success, 1 a
//! configuration with problems, 2 a usage error, 3 the service failed to start or serve.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::config::{ServerConfig, redacted_url};
use crate::service::Service;
use clap::{Parser, Subcommand};
use tokio_util::sync::CancellationToken;

/// The outbox relay service.
#[derive(Debug, Parser)]
#[command(name = "outbox", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Runs the relays of FILE and the HTTP endpoints until SIGTERM or Ctrl-C.
    Run {
        /// The configuration file (TOML).
        file: PathBuf,
    },
    /// Checks FILE (with the environment's OUTBOX_ overrides) and prints every problem
    /// with its key path; exit code 1 when there is one.
    CheckConfig {
        /// The configuration file (TOML).
        file: PathBuf,
    },
}

/// A configuration with problems.
pub const EXIT_INVALID: u8 = 1;
/// A usage error (clap's).
pub const EXIT_USAGE: u8 = 2;
/// The service failed to start or serve.
pub const EXIT_FAILED: u8 = 3;

/// Runs the command line of `args` (`args[0]` is the program's name): what the `outbox`
/// binary does, for a program that embeds the relay service (the Bookstore's launcher).
/// Usage errors print clap's message and exit 2.
pub fn run_from<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(error) => {
            let _ = error.print();
            return if error.use_stderr() {
                ExitCode::from(EXIT_USAGE)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    match cli.command {
        Command::CheckConfig { file } => check_config(&file),
        Command::Run { file } => run_service(&file),
    }
}

/// [`run_from`] the process's arguments.
pub fn run() -> ExitCode {
    run_from(std::env::args_os())
}

fn check_config(file: &std::path::Path) -> ExitCode {
    let mut out = std::io::stdout().lock();
    match ServerConfig::load(file) {
        Ok(config) => {
            let _ = writeln!(out, "{}: ok", file.display());
            for relay in &config.relays {
                let _ = writeln!(
                    out,
                    "  relay {}: {} relay, outbox {} in {}, {} at {}",
                    relay.name,
                    relay.method.as_str(),
                    relay.outbox.outbox_table(),
                    redacted_url(relay.database_url.expose()),
                    relay.broker.kind.as_str(),
                    redacted_url(relay.broker.url.expose()),
                );
            }
            let _ = writeln!(
                out,
                "  console: {}, {} user(s); listening on {}{}",
                if config.console.enabled { "on" } else { "off" },
                config.console.users.len(),
                config.http.listen,
                config
                    .http
                    .ops_listen
                    .map(|ops| format!(", operations endpoints on {ops}"))
                    .unwrap_or_default(),
            );
            if !config.overridden_by.is_empty() {
                let _ = writeln!(
                    out,
                    "  from the environment: {}",
                    config.overridden_by.join(", ")
                );
            }
            ExitCode::SUCCESS
        }
        Err(error) => {
            let _ = writeln!(std::io::stderr(), "{}: {error}", file.display());
            ExitCode::from(EXIT_INVALID)
        }
    }
}

fn run_service(file: &std::path::Path) -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                // SQLx's line per statement stays off unless RUST_LOG asks for it.
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,sqlx::query=warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let config = match ServerConfig::load(file) {
        Ok(config) => config,
        Err(error) => {
            tracing::error!("{}: {error}", file.display());
            return ExitCode::from(EXIT_INVALID);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            tracing::error!(%error, "cannot start the async runtime");
            return ExitCode::from(EXIT_FAILED);
        }
    };
    runtime.block_on(async {
        let metrics = match crate::http::metrics::install() {
            Ok(handle) => handle,
            Err(error) => {
                tracing::error!(%error, "cannot install the Prometheus recorder");
                return ExitCode::from(EXIT_FAILED);
            }
        };
        let shutdown = CancellationToken::new();
        tokio::spawn(signals(shutdown.clone()));
        match Service::new(config, metrics).run(shutdown).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                tracing::error!(%error, "the service failed");
                ExitCode::from(EXIT_FAILED)
            }
        }
    })
}

/// Cancels `shutdown` on the first SIGTERM or SIGINT; a second one exits at once.
async fn signals(shutdown: CancellationToken) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) else {
            tracing::error!("cannot listen for SIGTERM and SIGINT");
            return;
        };
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM: draining the relays"),
            _ = int.recv() => tracing::info!("SIGINT: draining the relays"),
        }
        shutdown.cancel();
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        tracing::warn!("second signal: exiting without draining");
        std::process::exit(130);
    }
    #[cfg(not(unix))]
    {
        if tokio::signal::ctrl_c().await.is_ok() {
            shutdown.cancel();
        }
    }
}
