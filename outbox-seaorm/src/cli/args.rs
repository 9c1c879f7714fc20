//! The command line as clap parses it: the `outbox` subcommands and their arguments, the
//! stand-alone `outbox` / `schemas` command line, and the values arguments are read into
//! (durations, dead-letter states, the actor).

use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use outbox_core::cli::{OutputFormat, SchemasCommand};
use uuid::Uuid;

use crate::inbox::dead_letter::DeadLetterStatus;

/// `outbox`: status, dead letters, requeue, skip and retention cleanup of one outbox.
#[derive(Debug, Clone, Args)]
pub struct OutboxCommand {
    /// What to do.
    #[command(subcommand)]
    pub action: OutboxAction,
}

/// The subcommands of [`OutboxCommand`].
#[derive(Debug, Clone, Subcommand)]
#[non_exhaustive]
pub enum OutboxAction {
    /// Pending rows, the oldest claimable row's age (outbox lag), dead and failed rows by
    /// event type, pending rows by worker key, live relays.
    Status(StatusArgs),
    /// Dead-lettered rows (and failed jobs with `--status failed`).
    Dead(DeadCommand),
    /// Put dead, failed (or skipped) rows back to pending; recorded in the operator log.
    Requeue(RequeueArgs),
    /// Give up on a dead, failed or pending row for good; recorded with the reason.
    Skip(SkipArgs),
    /// Rows waiting for their due time: list, cancel, reschedule, run now (by message id or
    /// key; recorded in the operator log).
    Scheduled(super::scheduled::ScheduledCommand),
    /// Periodic jobs: schedule, next run, last run and its message id.
    Periodic(PeriodicArgs),
    /// Unique jobs' keys, newest first: the job holding each and whether it still holds.
    Unique(UniqueArgs),
    /// Delete published rows older than the retention, in batches, one instance at a time.
    Purge(PurgeArgs),
    /// Delete inbox rows received before the retention, in batches, one instance at a time.
    PurgeInbox(PurgeArgs),
    /// Messages consumers could not handle (the consumer dead-letter table): list, show,
    /// requeue.
    InboxDead(InboxDeadCommand),
    /// The log relay's dead letters and parked events: list, show, requeue, skip.
    #[cfg(log_relay)]
    LogDead(super::log_relay::LogDeadCommand),
    /// Forget a log relay slot's stored position (MariaDB, after its binlogs were purged):
    /// the next start publishes the pending rows from a new snapshot. Stop the relay first.
    #[cfg(log_relay)]
    LogReset(super::log_relay::LogResetArgs),
}

/// Arguments of `outbox status`.
#[derive(Debug, Clone, Args)]
#[non_exhaustive]
pub struct StatusArgs {
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Human)]
    pub format: OutputFormat,
    /// Exit with code 1 when there are dead or failed rows (for monitoring scripts).
    #[arg(long)]
    pub fail_on_dead: bool,
}

/// `outbox dead …`.
#[derive(Debug, Clone, Args)]
pub struct DeadCommand {
    /// What to do.
    #[command(subcommand)]
    pub action: DeadAction,
}

/// The subcommands of [`DeadCommand`].
#[derive(Debug, Clone, Subcommand)]
#[non_exhaustive]
pub enum DeadAction {
    /// List dead rows (or failed ones), oldest first.
    List(DeadListArgs),
    /// Show one row (any status) with its operator log.
    Show(DeadShowArgs),
}

/// Which rows `outbox dead list` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
#[non_exhaustive]
pub enum GivenUpStatusArg {
    /// Dead-lettered rows (the default).
    #[default]
    Dead,
    /// Failed jobs: rows whose `retryable` flag is off and that failed.
    Failed,
}

/// Arguments of `outbox dead list`.
#[derive(Debug, Clone, Args)]
#[non_exhaustive]
pub struct DeadListArgs {
    /// Dead rows (default) or failed jobs.
    #[arg(long, value_enum, default_value_t = GivenUpStatusArg::Dead)]
    pub status: GivenUpStatusArg,
    /// Only this event type.
    #[arg(long)]
    pub event_type: Option<String>,
    /// At most this many rows.
    #[arg(long, default_value_t = 50)]
    pub limit: u64,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Human)]
    pub format: OutputFormat,
}

/// Arguments of `outbox dead show`.
#[derive(Debug, Clone, Args)]
#[non_exhaustive]
pub struct DeadShowArgs {
    /// The message id.
    pub message_id: Uuid,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Human)]
    pub format: OutputFormat,
}

/// Arguments of `outbox requeue`.
#[derive(Debug, Clone, Args)]
#[non_exhaustive]
pub struct RequeueArgs {
    /// The message ids to requeue.
    #[arg(required_unless_present = "all_dead", conflicts_with = "all_dead")]
    pub message_ids: Vec<Uuid>,
    /// Requeue every dead row (of `--event-type`, if given).
    #[arg(long)]
    pub all_dead: bool,
    /// With `--all-dead`: only this event type.
    #[arg(long, requires = "all_dead")]
    pub event_type: Option<String>,
    /// Who requeues (default `$USER`, else `cli`).
    #[arg(long)]
    pub actor: Option<String>,
    /// Why.
    #[arg(long)]
    pub reason: Option<String>,
}

/// Arguments of `outbox skip`.
#[derive(Debug, Clone, Args)]
#[non_exhaustive]
pub struct SkipArgs {
    /// The message id.
    pub message_id: Uuid,
    /// Why the row is given up on (required, recorded).
    #[arg(long)]
    pub reason: String,
    /// Who skips (default `$USER`, else `cli`).
    #[arg(long)]
    pub actor: Option<String>,
}

/// Arguments of `outbox purge` and `outbox purge-inbox`.
#[derive(Debug, Clone, Args)]
#[non_exhaustive]
pub struct PurgeArgs {
    /// Keep rows younger than this: `90s`, `30m`, `12h`, `7d`.
    #[arg(long, value_parser = parse_duration, default_value = "7d")]
    pub older_than: Duration,
    /// Rows deleted per statement.
    #[arg(long, default_value_t = 1_000)]
    pub batch: usize,
}

/// `outbox inbox-dead …`.
#[derive(Debug, Clone, Args)]
pub struct InboxDeadCommand {
    /// What to do.
    #[command(subcommand)]
    pub action: InboxDeadAction,
}

/// The subcommands of [`InboxDeadCommand`].
#[derive(Debug, Clone, Subcommand)]
#[non_exhaustive]
pub enum InboxDeadAction {
    /// List consumer dead letters, oldest first (every state unless `--status`).
    List(InboxDeadListArgs),
    /// Show one consumer dead letter: every field and the stored message.
    Show(InboxDeadShowArgs),
    /// Mark dead letters `requeued`: the running consumer redelivers them to its handlers.
    Requeue(InboxDeadRequeueArgs),
    /// Give a dead letter up (`skipped`, with a reason): the messages parked behind it are
    /// applied.
    Skip(InboxDeadSkipArgs),
    /// List the messages consumers parked: waiting for their next attempt, or behind an
    /// earlier message of their aggregate.
    Parked(InboxParkedArgs),
}

/// A dead letter's state, as `--status` takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
#[non_exhaustive]
pub enum DeadLetterStatusArg {
    /// Waiting for an operator.
    Dead,
    /// Requeued, waiting for the consumer.
    Requeued,
    /// Requeued and handled.
    Resolved,
    /// Given up by an operator.
    Skipped,
}

impl From<DeadLetterStatusArg> for DeadLetterStatus {
    fn from(status: DeadLetterStatusArg) -> Self {
        match status {
            DeadLetterStatusArg::Dead => Self::Dead,
            DeadLetterStatusArg::Requeued => Self::Requeued,
            DeadLetterStatusArg::Resolved => Self::Resolved,
            DeadLetterStatusArg::Skipped => Self::Skipped,
        }
    }
}

/// Arguments of `outbox inbox-dead list`.
#[derive(Debug, Clone, Args)]
#[non_exhaustive]
pub struct InboxDeadListArgs {
    /// Only this consumer (e.g. `inventory.reserve-stock`).
    #[arg(long)]
    pub consumer: Option<String>,
    /// Only dead letters in this state (default: every state).
    #[arg(long, value_enum)]
    pub status: Option<DeadLetterStatusArg>,
    /// At most this many dead letters.
    #[arg(long, default_value_t = 50)]
    pub limit: u64,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Human)]
    pub format: OutputFormat,
}

/// Arguments of `outbox inbox-dead show`.
#[derive(Debug, Clone, Args)]
#[non_exhaustive]
pub struct InboxDeadShowArgs {
    /// The dead letter's id (the `ID` column of `inbox-dead list`).
    pub id: i64,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Human)]
    pub format: OutputFormat,
}

/// Arguments of `outbox inbox-dead requeue`.
#[derive(Debug, Clone, Args)]
#[non_exhaustive]
pub struct InboxDeadRequeueArgs {
    /// The ids of the dead letters to requeue (each must be `dead`).
    #[arg(required = true)]
    pub ids: Vec<i64>,
    /// Who requeues (default `$USER`, else `cli`); recorded as `requeued_by`.
    #[arg(long)]
    pub actor: Option<String>,
}

/// Arguments of `outbox inbox-dead skip`.
#[derive(Debug, Clone, Args)]
#[non_exhaustive]
pub struct InboxDeadSkipArgs {
    /// The id of the dead letter to skip (it must be `dead`).
    pub id: i64,
    /// Why it is given up; recorded as `skip_reason`.
    #[arg(long)]
    pub reason: String,
    /// Who skips (default `$USER`, else `cli`); recorded as `skipped_by`.
    #[arg(long)]
    pub actor: Option<String>,
}

/// Arguments of `outbox inbox-dead parked`.
#[derive(Debug, Clone, Args)]
#[non_exhaustive]
pub struct InboxParkedArgs {
    /// Only this consumer.
    #[arg(long)]
    pub consumer: Option<String>,
    /// At most this many messages.
    #[arg(long, default_value_t = 50)]
    pub limit: u64,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Human)]
    pub format: OutputFormat,
}

/// Parses `90s`, `30m`, `12h`, `7d` (or plain seconds).
///
/// # Errors
/// A message for clap when the text is not such a duration.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => text.split_at(at),
        None => (text, "s"),
    };
    let number: u64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration like 90s, 30m, 12h or 7d"))?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        _ => {
            return Err(format!(
                "unknown unit `{unit}` in `{text}`: use s, m, h or d"
            ));
        }
    };
    number
        .checked_mul(seconds)
        .map(Duration::from_secs)
        .ok_or_else(|| format!("`{text}` is too long"))
}

/// Who did it: `--actor` when given, else `$USER`, else `cli`.
pub(super) fn actor(given: &Option<String>) -> String {
    given
        .clone()
        .or_else(|| std::env::var("USER").ok().filter(|user| !user.is_empty()))
        .unwrap_or_else(|| "cli".to_owned())
}

/// The stand-alone command line: `<binary> outbox …` and `<binary> schemas …`.
#[derive(Debug, Parser)]
#[command(
    name = "outbox",
    about = "Operate the outbox: status, dead letters, requeue, skip, purge, consumer dead \
             letters; contract schemas"
)]
pub(super) struct StandAlone {
    #[command(subcommand)]
    pub(super) command: StandAloneCommand,
}

#[derive(Debug, Subcommand)]
pub(super) enum StandAloneCommand {
    /// Status, dead letters, requeue, skip and purge of the outbox; consumer dead letters.
    Outbox(OutboxCommand),
    /// List, export and check the contract schemas.
    Schemas(SchemasCommand),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("30m"), Ok(Duration::from_secs(1_800)));
        assert_eq!(parse_duration("12h"), Ok(Duration::from_secs(43_200)));
        assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(604_800)));
        assert_eq!(parse_duration("15"), Ok(Duration::from_secs(15)));
        assert!(parse_duration("7w").is_err());
        assert!(parse_duration("d").is_err());
    }

    #[test]
    fn parses_every_subcommand() {
        let id = "0191a0b2-0000-7000-8000-000000000000";
        for args in [
            vec![
                "x",
                "outbox",
                "status",
                "--format",
                "json",
                "--fail-on-dead",
            ],
            vec![
                "x",
                "outbox",
                "dead",
                "list",
                "--event-type",
                "a.b.c.v1",
                "--limit",
                "5",
            ],
            vec!["x", "outbox", "dead", "list", "--status", "failed"],
            vec!["x", "outbox", "dead", "show", id],
            vec!["x", "outbox", "requeue", id, id, "--actor", "ann"],
            vec![
                "x",
                "outbox",
                "requeue",
                "--all-dead",
                "--event-type",
                "a.b.c.v1",
            ],
            vec!["x", "outbox", "skip", id, "--reason", "obsolete"],
            vec![
                "x",
                "outbox",
                "purge",
                "--older-than",
                "3d",
                "--batch",
                "10",
            ],
            vec!["x", "outbox", "purge-inbox", "--older-than", "14d"],
            vec!["x", "outbox", "inbox-dead", "list"],
            vec![
                "x",
                "outbox",
                "inbox-dead",
                "list",
                "--consumer",
                "inventory.reserve-stock",
                "--status",
                "requeued",
                "--limit",
                "5",
                "--format",
                "json",
            ],
            vec![
                "x",
                "outbox",
                "inbox-dead",
                "show",
                "42",
                "--format",
                "json",
            ],
            vec![
                "x",
                "outbox",
                "inbox-dead",
                "requeue",
                "1",
                "2",
                "--actor",
                "ann",
            ],
            vec!["x", "schemas", "list"],
        ] {
            assert!(StandAlone::try_parse_from(&args).is_ok(), "{args:?}");
        }
        for args in [
            vec!["x", "outbox", "skip", id],
            vec!["x", "outbox", "requeue"],
            vec!["x", "outbox", "requeue", id, "--all-dead"],
            vec!["x", "outbox", "dead", "show", "not-a-uuid"],
            vec!["x", "outbox", "inbox-dead", "requeue"],
            vec!["x", "outbox", "inbox-dead", "requeue", id],
            vec!["x", "outbox", "inbox-dead", "show"],
            vec!["x", "outbox", "inbox-dead", "list", "--status", "pending"],
            vec!["x", "outbox", "dead", "list", "--status", "pending"],
        ] {
            assert!(StandAlone::try_parse_from(&args).is_err(), "{args:?}");
        }
        let parsed = StandAlone::try_parse_from([
            "x",
            "outbox",
            "inbox-dead",
            "list",
            "--status",
            "resolved",
        ])
        .map(|cli| cli.command);
        let Ok(StandAloneCommand::Outbox(OutboxCommand {
            action:
                OutboxAction::InboxDead(InboxDeadCommand {
                    action: InboxDeadAction::List(args),
                }),
        })) = parsed
        else {
            panic!("not inbox-dead list: {parsed:?}");
        };
        assert_eq!(args.status, Some(DeadLetterStatusArg::Resolved));
        assert_eq!(args.consumer, None);
        assert_eq!(args.limit, 50);
        let parsed = StandAlone::try_parse_from(["x", "outbox", "inbox-dead", "requeue", "3", "7"])
            .map(|cli| cli.command);
        let Ok(StandAloneCommand::Outbox(OutboxCommand {
            action:
                OutboxAction::InboxDead(InboxDeadCommand {
                    action: InboxDeadAction::Requeue(args),
                }),
        })) = parsed
        else {
            panic!("not inbox-dead requeue: {parsed:?}");
        };
        assert_eq!(args.ids, [3, 7]);
        assert_eq!(args.actor, None);
    }
}

/// Arguments of `outbox unique`.
#[derive(Debug, Clone, Args)]
#[non_exhaustive]
pub struct UniqueArgs {
    /// Only the keys of this event type.
    #[arg(long)]
    pub event_type: Option<String>,
    /// At most this many keys (at most 1 000).
    #[arg(long, default_value_t = 100)]
    pub limit: u64,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Human)]
    pub format: OutputFormat,
}

/// Arguments of `outbox periodic`.
#[derive(Debug, Clone, Args)]
#[non_exhaustive]
pub struct PeriodicArgs {
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Human)]
    pub format: OutputFormat,
}
