//! The embeddable `outbox` operations command line (feature `cli`), in the same style as
//! the `schemas` command line of [`outbox_core::cli`].
//!
//! ```text
//! my-ops outbox status [--format human|json] [--fail-on-dead]
//! my-ops outbox dead list [--status dead|failed] [--event-type T] [--limit N] [--format human|json]
//! my-ops outbox dead show MESSAGE_ID [--format human|json]
//! my-ops outbox requeue MESSAGE_ID… | --all-dead [--event-type T]  [--actor A] [--reason R]
//! my-ops outbox skip MESSAGE_ID --reason R [--actor A]
//! my-ops outbox scheduled list [--key K] [--limit N] [--format human|json]
//! my-ops outbox scheduled cancel MESSAGE_ID | --key K  --reason R [--actor A]
//! my-ops outbox scheduled reschedule MESSAGE_ID | --key K  --at 2026-12-08T09:00:00Z [--reason R] [--actor A]
//! my-ops outbox scheduled run-now MESSAGE_ID | --key K  [--reason R] [--actor A]
//! my-ops outbox periodic [--format human|json]
//! my-ops outbox unique [--event-type T] [--limit N] [--format human|json]
//! my-ops outbox purge [--older-than 7d] [--batch 1000]
//! my-ops outbox purge-inbox --older-than 14d [--batch 1000]
//! my-ops outbox inbox-dead list [--consumer C] [--status dead|requeued|resolved] [--limit N] [--format human|json]
//! my-ops outbox inbox-dead show ID [--format human|json]
//! my-ops outbox inbox-dead requeue ID… [--actor A]
//! my-ops outbox log-dead list [--slot S] [--event-type T] [--status dead|parked|requeued|skipped|published] [--limit N] [--format human|json]
//! my-ops outbox log-dead show ID [--format human|json]
//! my-ops outbox log-dead requeue ID… [--actor A]
//! my-ops outbox log-dead skip ID --reason R [--actor A]
//! my-ops outbox log-reset SLOT
//! my-ops schemas …                       (outbox_core::cli)
//! ```
//!
//! A service binary connects to its database, builds its [`Outbox`] configuration and hands
//! both over:
//!
//! ```no_run
//! # async fn main_() -> std::process::ExitCode {
//! let db = sea_orm::Database::connect("postgres://…").await.expect("database");
//! outbox_seaorm::cli::run(db, outbox_seaorm::Outbox::default()).await
//! # }
//! ```
//!
//! or embeds [`OutboxCommand`] in its own clap command line and calls
//! [`OutboxCommand::execute`]:
//!
//! ```
//! use clap::{Parser, Subcommand};
//! use outbox_seaorm::cli::OutboxCommand;
//!
//! #[derive(Parser)]
//! struct Ops {
//!     #[command(subcommand)]
//!     command: OpsCommand,
//! }
//!
//! #[derive(Subcommand)]
//! enum OpsCommand {
//!     /// The outbox: status, dead letters, requeue, skip, purge.
//!     Outbox(OutboxCommand),
//! }
//!
//! let ops = Ops::try_parse_from(["ops", "outbox", "skip", "0191a0b2-0000-7000-8000-000000000000", "--reason", "obsolete"])?;
//! let OpsCommand::Outbox(command) = ops.command;
//! // command.execute(&operations, &mut std::io::stdout()).await
//! # let _ = command;
//! # Ok::<(), clap::Error>(())
//! ```
//!
//! `inbox-dead` works on the consumers' dead-letter table ([`crate::inbox::dead_letter`]):
//! messages a [`Consumer`](crate::inbox::Consumer) could not handle, identified by the
//! table's numeric `id`. `inbox-dead list` shows every state unless `--status` is given;
//! `inbox-dead requeue` marks `dead` letters `requeued`, and the running consumer of their
//! consumer name redelivers them to its handlers.
//!
//! `log-dead` (with the `log-relay` feature) works on the log relay's dead letters and
//! parked events (`<outbox>_log_dead_letters`, see the `log` module of [`crate::relay`]);
//! `log-reset SLOT` forgets a slot's stored position on MariaDB after its binlogs were
//! purged (the next start backfills the pending rows; refused while a relay holds the
//! lease);
//! `status` shows the outbox's write mode and, when a log relay runs on it, its slots
//! (active relay, lag, `wal_status`, backfill) and its dead letters.
//!
//! Exit codes: 0 success, 1 `status --fail-on-dead` found dead or failed rows, 2 usage or
//! database error, unknown message id or dead-letter id, or a row or dead letter in the
//! wrong status.
//!
//! Job-queue mode ([`crate::job`]): `status` counts `failed` rows (non-retryable jobs that
//! failed) by event type and shows the pending rows per worker key; `dead list --status
//! failed` lists them; `requeue MESSAGE_ID` runs one again and `skip` gives it up, both
//! recorded (`requeue --all-dead` never touches failed rows).
//!
//! `requeue` and `skip` record who did it (`--actor`, default `$USER`, else `cli`) and why
//! in the operator log (see [`crate::ops`]); `inbox-dead requeue` records the actor on the
//! dead letter (`requeued_by`).

mod args;
mod execute;
#[cfg(log_relay)]
mod log_relay;
mod output;
mod scheduled;

use std::ffi::OsString;
use std::io::{self, Write};
use std::process::ExitCode;

use outbox_core::cli::{EXIT_ERROR, parse_args};
use outbox_core::{ContractRegistry, RegistryError};
use sea_orm::DatabaseConnection;

use crate::config::Outbox;
use crate::ops::Operations;
use args::{StandAlone, StandAloneCommand};

pub use args::{
    DeadAction, DeadCommand, DeadLetterStatusArg, DeadListArgs, DeadShowArgs, GivenUpStatusArg,
    InboxDeadAction, InboxDeadCommand, InboxDeadListArgs, InboxDeadRequeueArgs, InboxDeadShowArgs,
    InboxDeadSkipArgs, InboxParkedArgs, OutboxAction, OutboxCommand, PeriodicArgs, PurgeArgs,
    RequeueArgs, SkipArgs, StatusArgs, parse_duration,
};
pub use execute::{OutboxCliError, Outcome};
#[cfg(log_relay)]
pub use log_relay::{
    LogDeadAction, LogDeadCommand, LogDeadListArgs, LogDeadRequeueArgs, LogDeadShowArgs,
    LogDeadSkipArgs, LogDeadStatusArg, LogResetArgs,
};
pub use scheduled::{
    ScheduledAction, ScheduledCancelArgs, ScheduledCommand, ScheduledListArgs,
    ScheduledRescheduleArgs, ScheduledRunNowArgs, TargetArgs,
};

/// Runs the command line with the process's arguments on `db` and `outbox`, printing to
/// stdout / stderr. Returns the exit code to hand back from `main`.
pub async fn run(db: DatabaseConnection, outbox: Outbox) -> ExitCode {
    // `Stdout` and `Stderr` rather than their locks, which are not `Send`: the future of
    // `run` can then be spawned on a multi-threaded runtime.
    // Collected first: `ArgsOs` is not `Send` either.
    let args: Vec<OsString> = std::env::args_os().collect();
    let code = run_with(
        args,
        db,
        outbox,
        ContractRegistry::collect,
        &mut io::stdout(),
        &mut io::stderr(),
    )
    .await;
    ExitCode::from(code)
}

/// The whole command line with everything injected: the arguments (program name first),
/// the database, the outbox configuration, the contract registry (for `schemas`), the
/// output and the error output. Returns the numeric exit code.
pub async fn run_with<I, T>(
    args: I,
    db: DatabaseConnection,
    outbox: Outbox,
    registry: impl FnOnce() -> Result<ContractRegistry, RegistryError> + Send,
    out: &mut (dyn Write + Send),
    err: &mut (dyn Write + Send),
) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match parse_args::<StandAlone, _, _>(args, out, err) {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    match cli.command {
        StandAloneCommand::Outbox(command) => {
            let ops = Operations::new(db, outbox);
            match command.execute(&ops, out).await {
                Ok(outcome) => outcome.code(),
                Err(error) => {
                    // Nothing better to do when the error output itself fails.
                    let _ = writeln!(err, "error: {error}");
                    EXIT_ERROR
                }
            }
        }
        StandAloneCommand::Schemas(command) => {
            let result = registry()
                .map_err(outbox_core::cli::CliError::from)
                .and_then(|registry| command.execute(&registry, out));
            match result {
                Ok(outcome) => outcome.code(),
                Err(error) => {
                    let _ = writeln!(err, "error: {error}");
                    error.code()
                }
            }
        }
    }
}
