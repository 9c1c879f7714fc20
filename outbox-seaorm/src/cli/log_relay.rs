//! The arguments of the log relay's subcommands (features `cli` and `log-relay`), run by
//! `execute`: `outbox log-dead …` works on its dead letters and parked events — list,
//! show, requeue, skip. Entries are identified by the table's numeric `id`; requeue and
//! skip apply to `dead` entries, and the active log relay acts on them at its next
//! heartbeat. `outbox log-reset SLOT` forgets a slot's stored position (MariaDB's recovery
//! after purged binlogs).

use clap::{Args, Subcommand};
use outbox_core::cli::OutputFormat;

use crate::record::log_dead_letter::LogDeadLetterStatus;

/// `outbox log-dead …`.
#[derive(Debug, Clone, Args)]
pub struct LogDeadCommand {
    /// What to do.
    #[command(subcommand)]
    pub action: LogDeadAction,
}

/// The subcommands of [`LogDeadCommand`].
#[derive(Debug, Clone, Subcommand)]
#[non_exhaustive]
pub enum LogDeadAction {
    /// List entries, oldest first (every state unless `--status`).
    List(LogDeadListArgs),
    /// Show one entry: every field and the envelope.
    Show(LogDeadShowArgs),
    /// Mark dead entries `requeued`: the active log relay publishes each, then the events
    /// parked behind it, in order.
    Requeue(LogDeadRequeueArgs),
    /// Give a dead entry up (`skipped`, with a reason): the events parked behind it go out.
    Skip(LogDeadSkipArgs),
}

/// An entry's state, as `--status` takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
#[non_exhaustive]
pub enum LogDeadStatusArg {
    /// Waiting for an operator.
    Dead,
    /// Held behind a dead event of its aggregate.
    Parked,
    /// Requeued, waiting for the relay.
    Requeued,
    /// Given up by an operator.
    Skipped,
    /// Published after a requeue or a release.
    Published,
}

impl From<LogDeadStatusArg> for LogDeadLetterStatus {
    fn from(status: LogDeadStatusArg) -> Self {
        match status {
            LogDeadStatusArg::Dead => Self::Dead,
            LogDeadStatusArg::Parked => Self::Parked,
            LogDeadStatusArg::Requeued => Self::Requeued,
            LogDeadStatusArg::Skipped => Self::Skipped,
            LogDeadStatusArg::Published => Self::Published,
        }
    }
}

/// Arguments of `outbox log-dead list`.
#[derive(Debug, Clone, Args)]
#[non_exhaustive]
pub struct LogDeadListArgs {
    /// Only this slot.
    #[arg(long)]
    pub slot: Option<String>,
    /// Only this event type.
    #[arg(long)]
    pub event_type: Option<String>,
    /// Only entries in this state.
    #[arg(long, value_enum)]
    pub status: Option<LogDeadStatusArg>,
    /// At most this many entries.
    #[arg(long, default_value_t = 50)]
    pub limit: u64,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Human)]
    pub format: OutputFormat,
}

/// Arguments of `outbox log-dead show`.
#[derive(Debug, Clone, Args)]
#[non_exhaustive]
pub struct LogDeadShowArgs {
    /// The entry's id (the `ID` column of `log-dead list`).
    pub id: i64,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Human)]
    pub format: OutputFormat,
}

/// Arguments of `outbox log-dead requeue`.
#[derive(Debug, Clone, Args)]
#[non_exhaustive]
pub struct LogDeadRequeueArgs {
    /// The ids of the entries to requeue (each must be `dead`).
    #[arg(required = true)]
    pub ids: Vec<i64>,
    /// Who requeues (default `$USER`, else `cli`).
    #[arg(long)]
    pub actor: Option<String>,
}

/// Arguments of `outbox log-dead skip`.
#[derive(Debug, Clone, Args)]
#[non_exhaustive]
pub struct LogDeadSkipArgs {
    /// The id of the entry to skip (it must be `dead`).
    pub id: i64,
    /// Why it is given up (required, recorded).
    #[arg(long)]
    pub reason: String,
    /// Who skips (default `$USER`, else `cli`).
    #[arg(long)]
    pub actor: Option<String>,
}

/// Arguments of `outbox log-reset`.
#[derive(Debug, Clone, Args)]
#[non_exhaustive]
pub struct LogResetArgs {
    /// The log relay's slot (its `slot` setting).
    pub slot: String,
}
