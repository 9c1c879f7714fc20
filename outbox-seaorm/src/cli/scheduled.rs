//! `outbox scheduled …`: rows waiting for their due time (see [`crate::schedule`]) — list,
//! cancel, reschedule, run now — by message id or by key, each change recorded in the
//! operator log. Run by `execute`.

use chrono::{DateTime, Utc};
use clap::{Args, Subcommand};
use outbox_core::cli::OutputFormat;
use uuid::Uuid;

use crate::ops::ScheduledTarget;

/// `outbox scheduled …`.
#[derive(Debug, Clone, Args)]
pub struct ScheduledCommand {
    /// What to do.
    #[command(subcommand)]
    pub action: ScheduledAction,
}

/// The subcommands of [`ScheduledCommand`].
#[derive(Debug, Clone, Subcommand)]
#[non_exhaustive]
pub enum ScheduledAction {
    /// List waiting rows in due order: due time, key, message id, event type, aggregate.
    List(ScheduledListArgs),
    /// Delete waiting rows before they are due (never published); recorded with the reason.
    Cancel(ScheduledCancelArgs),
    /// Give waiting rows another due time; recorded.
    Reschedule(ScheduledRescheduleArgs),
    /// Make waiting rows due now (a relay moves them within its schedule interval);
    /// recorded.
    RunNow(ScheduledRunNowArgs),
}

/// Arguments of `outbox scheduled list`.
#[derive(Debug, Clone, Args)]
#[non_exhaustive]
pub struct ScheduledListArgs {
    /// Only rows of this key.
    #[arg(long)]
    pub key: Option<String>,
    /// At most this many rows.
    #[arg(long, default_value_t = 50)]
    pub limit: u64,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Human)]
    pub format: OutputFormat,
}

/// The rows an action is for: one message id, or every row of a key.
#[derive(Debug, Clone, Args)]
#[group(required = true, multiple = false)]
#[non_exhaustive]
pub struct TargetArgs {
    /// The row of this message id.
    pub message_id: Option<Uuid>,
    /// Every row of this key.
    #[arg(long)]
    pub key: Option<String>,
}

impl TargetArgs {
    /// The target as the operations API takes it.
    pub(super) fn target(&self) -> ScheduledTarget {
        match (&self.message_id, &self.key) {
            (Some(id), _) => ScheduledTarget::MessageId(*id),
            (None, Some(key)) => ScheduledTarget::Key(key.clone()),
            // clap requires exactly one of the two.
            (None, None) => ScheduledTarget::Key(String::new()),
        }
    }
}

/// Arguments of `outbox scheduled cancel`.
#[derive(Debug, Clone, Args)]
#[non_exhaustive]
pub struct ScheduledCancelArgs {
    /// Which rows.
    #[command(flatten)]
    pub target: TargetArgs,
    /// Why (required, recorded).
    #[arg(long)]
    pub reason: String,
    /// Who cancels (default `$USER`, else `cli`).
    #[arg(long)]
    pub actor: Option<String>,
}

/// Arguments of `outbox scheduled reschedule`.
#[derive(Debug, Clone, Args)]
#[non_exhaustive]
pub struct ScheduledRescheduleArgs {
    /// Which rows.
    #[command(flatten)]
    pub target: TargetArgs,
    /// The new due time, RFC 3339 (`2026-12-08T09:00:00Z`); a time not in the future makes
    /// them due at once.
    #[arg(long)]
    pub at: DateTime<Utc>,
    /// Why (recorded).
    #[arg(long)]
    pub reason: Option<String>,
    /// Who reschedules (default `$USER`, else `cli`).
    #[arg(long)]
    pub actor: Option<String>,
}

/// Arguments of `outbox scheduled run-now`.
#[derive(Debug, Clone, Args)]
#[non_exhaustive]
pub struct ScheduledRunNowArgs {
    /// Which rows.
    #[command(flatten)]
    pub target: TargetArgs,
    /// Why (recorded).
    #[arg(long)]
    pub reason: Option<String>,
    /// Who (default `$USER`, else `cli`).
    #[arg(long)]
    pub actor: Option<String>,
}
