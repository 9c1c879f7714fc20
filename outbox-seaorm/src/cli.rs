//! The embeddable `outbox` operations command line (feature `cli`), in the same style as
//! the `schemas` command line of [`outbox_core::cli`].
//!
//! ```text
//! my-ops outbox status [--format human|json] [--fail-on-dead]
//! my-ops outbox dead list [--status dead|failed] [--event-type T] [--limit N] [--format human|json]
//! my-ops outbox dead show MESSAGE_ID [--format human|json]
//! my-ops outbox requeue MESSAGE_ID… | --all-dead [--event-type T]  [--actor A] [--reason R]
//! my-ops outbox skip MESSAGE_ID --reason R [--actor A]
//! my-ops outbox purge [--older-than 7d] [--batch 1000]
//! my-ops outbox purge-inbox --older-than 14d [--batch 1000]
//! my-ops outbox inbox-dead list [--consumer C] [--status dead|requeued|resolved] [--limit N] [--format human|json]
//! my-ops outbox inbox-dead show ID [--format human|json]
//! my-ops outbox inbox-dead requeue ID… [--actor A]
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

use std::ffi::OsString;
use std::io::{self, Write};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use outbox_core::cli::{
    EXIT_CHECK_FAILED, EXIT_ERROR, EXIT_OK, OutputFormat, SchemasCommand, parse_args,
};
use outbox_core::{ContractRegistry, RegistryError};
use sea_orm::{DatabaseConnection, DbErr};
use serde_json::json;
use uuid::Uuid;

use crate::config::Outbox;
use crate::inbox::dead_letter::{ConsumerDeadLetter, DeadLetterStatus, StoredMessage};
use crate::ops::{Operations, OperatorAction, OpsError};
use crate::record::OutboxRecord;

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
    /// Delete published rows older than the retention, in batches, one instance at a time.
    Purge(PurgeArgs),
    /// Delete inbox rows received before the retention, in batches, one instance at a time.
    PurgeInbox(PurgeArgs),
    /// Messages consumers could not handle (the consumer dead-letter table): list, show,
    /// requeue.
    InboxDead(InboxDeadCommand),
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

/// How a command ended when it did not fail with an [`OutboxCliError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// Done.
    Success,
    /// `status --fail-on-dead` found dead or failed rows.
    DeadRows,
}

impl Outcome {
    /// The process exit code: 0 or 1.
    pub fn code(self) -> u8 {
        match self {
            Self::Success => EXIT_OK,
            Self::DeadRows => EXIT_CHECK_FAILED,
        }
    }
}

/// Why a command failed (exit code 2).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OutboxCliError {
    /// The operation failed.
    #[error(transparent)]
    Ops(#[from] OpsError),
    /// Writing the output failed.
    #[error("cannot write the output: {0}")]
    Output(#[from] io::Error),
    /// `dead show` of an unknown message id.
    #[error("no outbox row has message id {0}")]
    NotFound(Uuid),
    /// `purge` found another instance cleaning up.
    #[error("another instance holds the cleanup lease; try again later")]
    Busy,
    /// `inbox-dead show` or `inbox-dead requeue` of an unknown dead-letter id.
    #[error("no consumer dead letter has id {0}")]
    DeadLetterNotFound(i64),
    /// `inbox-dead requeue` of a dead letter that is not `dead`.
    #[error(
        "consumer dead letter {id} is {}; requeue and skip apply to dead letters",
        status.as_str()
    )]
    DeadLetterWrongStatus {
        /// The dead letter.
        id: i64,
        /// Its state.
        status: DeadLetterStatus,
    },
}

impl From<DbErr> for OutboxCliError {
    fn from(error: DbErr) -> Self {
        Self::Ops(OpsError::Database(error))
    }
}

fn actor(given: &Option<String>) -> String {
    given
        .clone()
        .or_else(|| std::env::var("USER").ok().filter(|user| !user.is_empty()))
        .unwrap_or_else(|| "cli".to_owned())
}

fn json_line(out: &mut (dyn Write + Send), value: &serde_json::Value) -> io::Result<()> {
    let text = serde_json::to_string_pretty(value).map_err(io::Error::other)?;
    writeln!(out, "{text}")
}

fn record_json(record: &OutboxRecord) -> serde_json::Value {
    json!({
        "seq": record.seq,
        "status": record.status.as_str(),
        "attempts": record.attempts,
        "next_attempt_at": record.next_attempt_at,
        "last_error": record.last_error,
        "published_at": record.published_at,
        "created_at": record.created_at,
        "partition": record.partition,
        "worker_key": record.worker_key,
        "retryable": record.retryable,
        "envelope": record.envelope,
    })
}

fn message_json(message: &StoredMessage) -> io::Result<(&'static str, serde_json::Value)> {
    Ok(match message {
        StoredMessage::Envelope(envelope) => (
            "envelope",
            serde_json::to_value(envelope.as_ref()).map_err(io::Error::other)?,
        ),
        StoredMessage::Binary(raw) => (
            "binary",
            serde_json::to_value(raw).map_err(io::Error::other)?,
        ),
    })
}

fn dead_letter_json(letter: &ConsumerDeadLetter) -> io::Result<serde_json::Value> {
    let (format, message) = message_json(&letter.message)?;
    Ok(json!({
        "id": letter.id,
        "consumer": letter.consumer,
        "status": letter.status.as_str(),
        "reason": letter.reason,
        "error": letter.error,
        "attempts": letter.attempts,
        "message_id": letter.message_id,
        "event_type": letter.event_type,
        "dead_at": letter.dead_at,
        "requeued_at": letter.requeued_at,
        "requeued_by": letter.requeued_by,
        "resolved_at": letter.resolved_at,
        "aggregate_type": letter.aggregate.as_ref().map(|(aggregate_type, _)| aggregate_type),
        "aggregate_id": letter.aggregate.as_ref().map(|(_, id)| id),
        "skipped_at": letter.skipped_at,
        "skipped_by": letter.skipped_by,
        "skip_reason": letter.skip_reason,
        "format": format,
        "message": message,
    }))
}

/// One line of a table cell: newlines and tabs become spaces.
fn cell(text: &str) -> String {
    text.replace(['\n', '\r', '\t'], " ")
}

fn or_dash<T: ToString>(value: Option<T>) -> String {
    value.map_or_else(|| "-".to_owned(), |value| value.to_string())
}

fn pretty(value: &serde_json::Value) -> io::Result<String> {
    serde_json::to_string_pretty(value).map_err(io::Error::other)
}

async fn inbox_dead(
    ops: &Operations,
    action: &InboxDeadAction,
    out: &mut (dyn Write + Send),
) -> Result<Outcome, OutboxCliError> {
    match action {
        InboxDeadAction::List(args) => {
            let letters = ops
                .consumer_dead_letters(
                    args.consumer.as_deref(),
                    args.status.map(DeadLetterStatus::from),
                    args.limit,
                )
                .await?;
            if args.format == OutputFormat::Json {
                let values = letters
                    .iter()
                    .map(dead_letter_json)
                    .collect::<io::Result<Vec<_>>>()?;
                json_line(out, &serde_json::Value::Array(values))?;
                return Ok(Outcome::Success);
            }
            writeln!(
                out,
                "ID\tCONSUMER\tSTATUS\tREASON\tMESSAGE ID\tEVENT TYPE\tATTEMPTS\tDEAD AT\tERROR"
            )?;
            for letter in &letters {
                writeln!(
                    out,
                    "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
                    letter.id,
                    letter.consumer,
                    letter.status.as_str(),
                    letter.reason,
                    or_dash(letter.message_id),
                    or_dash(letter.event_type.as_deref()),
                    letter.attempts,
                    letter.dead_at.to_rfc3339(),
                    cell(&letter.error),
                )?;
            }
            writeln!(out, "{} dead letter(s)", letters.len())?;
            Ok(Outcome::Success)
        }
        InboxDeadAction::Show(args) => {
            let letter = ops
                .consumer_dead_letter(args.id)
                .await?
                .ok_or(OutboxCliError::DeadLetterNotFound(args.id))?;
            if args.format == OutputFormat::Json {
                json_line(out, &dead_letter_json(&letter)?)?;
                return Ok(Outcome::Success);
            }
            let rfc3339 =
                |at: Option<chrono::DateTime<chrono::Utc>>| or_dash(at.map(|at| at.to_rfc3339()));
            writeln!(out, "id:           {}", letter.id)?;
            writeln!(out, "consumer:     {}", letter.consumer)?;
            writeln!(out, "status:       {}", letter.status.as_str())?;
            writeln!(out, "reason:       {}", letter.reason)?;
            writeln!(out, "error:        {}", letter.error)?;
            writeln!(out, "attempts:     {}", letter.attempts)?;
            writeln!(out, "message id:   {}", or_dash(letter.message_id))?;
            writeln!(
                out,
                "event type:   {}",
                or_dash(letter.event_type.as_deref())
            )?;
            writeln!(out, "dead at:      {}", letter.dead_at.to_rfc3339())?;
            writeln!(out, "requeued at:  {}", rfc3339(letter.requeued_at))?;
            writeln!(
                out,
                "requeued by:  {}",
                or_dash(letter.requeued_by.as_deref())
            )?;
            writeln!(out, "resolved at:  {}", rfc3339(letter.resolved_at))?;
            writeln!(
                out,
                "aggregate:    {}",
                or_dash(
                    letter
                        .aggregate
                        .as_ref()
                        .map(|(aggregate_type, id)| format!("{aggregate_type} {id}"))
                )
            )?;
            if letter.status == DeadLetterStatus::Skipped {
                writeln!(out, "skipped at:   {}", rfc3339(letter.skipped_at))?;
                writeln!(
                    out,
                    "skipped by:   {}",
                    or_dash(letter.skipped_by.as_deref())
                )?;
                writeln!(
                    out,
                    "skip reason:  {}",
                    or_dash(letter.skip_reason.as_deref())
                )?;
            }
            match &letter.message {
                StoredMessage::Envelope(envelope) => {
                    writeln!(out, "format:       envelope")?;
                    // The envelope's field order (message id first), payload indented.
                    let text = serde_json::to_string_pretty(&EnvelopeView::of(envelope)?)
                        .map_err(io::Error::other)?;
                    writeln!(out, "message:\n{text}")?;
                }
                StoredMessage::Binary(raw) => {
                    writeln!(out, "format:       binary (could not be decoded)")?;
                    writeln!(out, "headers:")?;
                    for (name, value) in &raw.headers {
                        writeln!(out, "  {name}: {value}")?;
                    }
                    if raw.headers_dropped > 0 {
                        writeln!(out, "  … {} more headers not stored", raw.headers_dropped)?;
                    }
                    writeln!(
                        out,
                        "body size:    {} bytes, sha256 {}",
                        raw.body_bytes, raw.body_sha256
                    )?;
                    if raw.truncated {
                        writeln!(
                            out,
                            "stored cut:   the message was larger than a dead letter keeps \
                             ({} bytes of body, {} headers of {} bytes); it cannot be \
                             redelivered",
                            crate::limits::MAX_STORED_BODY_BYTES,
                            crate::limits::MAX_STORED_HEADERS,
                            crate::limits::MAX_STORED_HEADER_BYTES,
                        )?;
                    }
                    // A JSON body is pretty-printed; anything else as stored.
                    let body = match serde_json::from_str::<serde_json::Value>(&raw.body) {
                        Ok(value) => pretty(&value)?,
                        Err(_) => raw.body.clone(),
                    };
                    writeln!(out, "body:\n{body}")?;
                }
            }
            Ok(Outcome::Success)
        }
        InboxDeadAction::Requeue(args) => {
            let actor = actor(&args.actor);
            for &id in &args.ids {
                let letter = ops
                    .consumer_dead_letter(id)
                    .await?
                    .ok_or(OutboxCliError::DeadLetterNotFound(id))?;
                if letter.status != DeadLetterStatus::Dead {
                    return Err(OutboxCliError::DeadLetterWrongStatus {
                        id,
                        status: letter.status,
                    });
                }
                if !ops.requeue_consumer_dead_letter(id, &actor).await? {
                    // Changed since it was read (another operator, or deleted).
                    return Err(match ops.consumer_dead_letter(id).await? {
                        Some(letter) => OutboxCliError::DeadLetterWrongStatus {
                            id,
                            status: letter.status,
                        },
                        None => OutboxCliError::DeadLetterNotFound(id),
                    });
                }
                writeln!(
                    out,
                    "requeued dead letter {id} ({}, message {}) by {actor}",
                    letter.consumer,
                    or_dash(letter.message_id)
                )?;
            }
            writeln!(
                out,
                "{} dead letter(s) requeued; the running consumer redelivers them",
                args.ids.len()
            )?;
            Ok(Outcome::Success)
        }
        InboxDeadAction::Skip(args) => {
            let actor = actor(&args.actor);
            if !ops
                .skip_consumer_dead_letter(args.id, &actor, &args.reason)
                .await?
            {
                return Err(match ops.consumer_dead_letter(args.id).await? {
                    Some(letter) => OutboxCliError::DeadLetterWrongStatus {
                        id: args.id,
                        status: letter.status,
                    },
                    None => OutboxCliError::DeadLetterNotFound(args.id),
                });
            }
            writeln!(
                out,
                "skipped dead letter {} by {actor}: {}; the messages parked behind it are applied",
                args.id, args.reason
            )?;
            Ok(Outcome::Success)
        }
        InboxDeadAction::Parked(args) => {
            let parked = ops
                .consumer_parked(args.consumer.as_deref(), args.limit)
                .await?;
            if args.format == OutputFormat::Json {
                let values = parked
                    .iter()
                    .map(|message| {
                        json!({
                            "id": message.id,
                            "consumer": message.consumer,
                            "aggregate_type": message.aggregate.0,
                            "aggregate_id": message.aggregate.1,
                            "message_id": message.envelope.message_id,
                            "event_type": message.envelope.event_type,
                            "attempts": message.attempts,
                            "next_attempt_at": message.next_attempt_at,
                            "last_error": message.last_error,
                            "parked_at": message.parked_at,
                        })
                    })
                    .collect();
                json_line(out, &serde_json::Value::Array(values))?;
                return Ok(Outcome::Success);
            }
            writeln!(
                out,
                "ID\tCONSUMER\tAGGREGATE\tMESSAGE ID\tEVENT TYPE\tATTEMPTS\tNEXT ATTEMPT\tLAST ERROR"
            )?;
            for message in &parked {
                writeln!(
                    out,
                    "{}\t{}\t{} {}\t{}\t{}\t{}\t{}\t{}",
                    message.id,
                    message.consumer,
                    message.aggregate.0,
                    message.aggregate.1,
                    message.envelope.message_id,
                    message.envelope.event_type,
                    message.attempts,
                    message.next_attempt_at.to_rfc3339(),
                    cell(message.last_error.as_deref().unwrap_or("-")),
                )?;
            }
            writeln!(out, "{} parked message(s)", parked.len())?;
            Ok(Outcome::Success)
        }
    }
}

fn action_line(action: &OperatorAction) -> String {
    format!(
        "{} {} by {} at {} (was {}){}",
        action.action,
        action.message_id,
        action.actor,
        action.at.to_rfc3339(),
        action.previous_status,
        action
            .reason
            .as_deref()
            .map(|reason| format!(": {reason}"))
            .unwrap_or_default()
    )
}

impl OutboxCommand {
    /// Runs the command with `ops`, writing its result to `out`.
    ///
    /// # Errors
    /// An [`OutboxCliError`] (exit code 2).
    pub async fn execute(
        &self,
        ops: &Operations,
        out: &mut (dyn Write + Send),
    ) -> Result<Outcome, OutboxCliError> {
        match &self.action {
            OutboxAction::Status(args) => status(ops, args, out).await,
            OutboxAction::Dead(DeadCommand {
                action: DeadAction::List(args),
            }) => {
                let (rows, label) = match args.status {
                    GivenUpStatusArg::Failed => (
                        ops.failed_jobs(args.event_type.as_deref(), args.limit)
                            .await?,
                        "failed",
                    ),
                    _ => (
                        ops.dead_letters(args.event_type.as_deref(), args.limit)
                            .await?,
                        "dead",
                    ),
                };
                if args.format == OutputFormat::Json {
                    json_line(out, &rows.iter().map(record_json).collect())?;
                    return Ok(Outcome::Success);
                }
                writeln!(
                    out,
                    "SEQ\tMESSAGE ID\tEVENT TYPE\tAGGREGATE\tATTEMPTS\tLAST ERROR"
                )?;
                for row in &rows {
                    writeln!(
                        out,
                        "{}\t{}\t{}\t{}/{}\t{}\t{}",
                        row.seq,
                        row.envelope.message_id,
                        row.envelope.event_type,
                        row.envelope.aggregate_type,
                        row.envelope.aggregate_id,
                        row.attempts,
                        row.last_error.as_deref().unwrap_or("")
                    )?;
                }
                writeln!(out, "{} {label} row(s)", rows.len())?;
                Ok(Outcome::Success)
            }
            OutboxAction::Dead(DeadCommand {
                action: DeadAction::Show(args),
            }) => {
                let record = ops
                    .find(args.message_id)
                    .await?
                    .ok_or(OutboxCliError::NotFound(args.message_id))?;
                let log = ops.operator_log(Some(args.message_id)).await?;
                if args.format == OutputFormat::Json {
                    let mut value = record_json(&record);
                    value["operator_log"] = serde_json::to_value(&log).map_err(io::Error::other)?;
                    json_line(out, &value)?;
                    return Ok(Outcome::Success);
                }
                let e = &record.envelope;
                writeln!(out, "message id:   {}", e.message_id)?;
                writeln!(out, "event type:   {}", e.event_type)?;
                writeln!(out, "aggregate:    {}/{}", e.aggregate_type, e.aggregate_id)?;
                writeln!(
                    out,
                    "seq:          {} (partition {})",
                    record.seq, record.partition
                )?;
                writeln!(out, "status:       {}", record.status)?;
                writeln!(out, "attempts:     {}", record.attempts)?;
                if record.worker_key.is_some() || !record.retryable {
                    writeln!(
                        out,
                        "worker key:   {}",
                        record.worker_key.as_deref().unwrap_or("-")
                    )?;
                    writeln!(out, "retryable:    {}", record.retryable)?;
                }
                writeln!(
                    out,
                    "last error:   {}",
                    record.last_error.as_deref().unwrap_or("-")
                )?;
                writeln!(out, "created at:   {}", record.created_at.to_rfc3339())?;
                writeln!(out, "payload:      {}", e.payload)?;
                for action in &log {
                    writeln!(out, "log:          {}", action_line(action))?;
                }
                Ok(Outcome::Success)
            }
            OutboxAction::Requeue(args) => {
                let actor = actor(&args.actor);
                let reason = args.reason.as_deref();
                let actions = if args.all_dead {
                    ops.requeue_dead(args.event_type.as_deref(), &actor, reason)
                        .await?
                } else {
                    let mut actions = Vec::new();
                    for id in &args.message_ids {
                        actions.push(ops.requeue(*id, &actor, reason).await?);
                    }
                    actions
                };
                for action in &actions {
                    writeln!(out, "{}", action_line(action))?;
                }
                writeln!(out, "{} row(s) requeued", actions.len())?;
                Ok(Outcome::Success)
            }
            OutboxAction::Skip(args) => {
                let action = ops
                    .skip(args.message_id, &actor(&args.actor), &args.reason)
                    .await?;
                writeln!(out, "{}", action_line(&action))?;
                Ok(Outcome::Success)
            }
            OutboxAction::Purge(args) => {
                let rows = ops
                    .purge(args.older_than, args.batch)
                    .await?
                    .ok_or(OutboxCliError::Busy)?;
                writeln!(
                    out,
                    "{rows} published row(s) older than {:?} deleted",
                    args.older_than
                )?;
                Ok(Outcome::Success)
            }
            OutboxAction::PurgeInbox(args) => {
                let rows = ops
                    .purge_inbox(args.older_than, args.batch)
                    .await?
                    .ok_or(OutboxCliError::Busy)?;
                writeln!(
                    out,
                    "{rows} inbox row(s) older than {:?} deleted",
                    args.older_than
                )?;
                Ok(Outcome::Success)
            }
            OutboxAction::InboxDead(command) => inbox_dead(ops, &command.action, out).await,
        }
    }
}

async fn status(
    ops: &Operations,
    args: &StatusArgs,
    out: &mut (dyn Write + Send),
) -> Result<Outcome, OutboxCliError> {
    let report = ops.status().await?;
    if args.format == OutputFormat::Json {
        json_line(
            out,
            &serde_json::to_value(&report).map_err(io::Error::other)?,
        )?;
    } else {
        writeln!(out, "outbox:            {}", report.outbox)?;
        let age = |age: Option<Duration>| {
            age.map_or_else(
                || "-".to_owned(),
                |age| format!("{:.1}s", age.as_secs_f64()),
            )
        };
        writeln!(
            out,
            "pending:           {} (in backoff: {}, held back: {})",
            report.pending, report.in_backoff, report.held
        )?;
        writeln!(
            out,
            "oldest claimable:  {}",
            age(report.oldest_claimable_age)
        )?;
        writeln!(out, "oldest held back:  {}", age(report.oldest_held_age))?;
        writeln!(out, "dead:              {}", report.dead())?;
        for (event_type, count) in &report.dead_by_event_type {
            writeln!(out, "  {event_type}  {count}")?;
        }
        writeln!(out, "failed:            {}", report.failed())?;
        for (event_type, count) in &report.failed_by_event_type {
            writeln!(out, "  {event_type}  {count}")?;
        }
        if !report.pending_by_worker_key.is_empty() {
            writeln!(out, "pending by worker key:")?;
            for (key, status) in &report.pending_by_worker_key {
                writeln!(
                    out,
                    "  {key}  {} (oldest claimable: {})",
                    status.pending,
                    status.oldest_claimable_age.map_or_else(
                        || "-".to_owned(),
                        |age| format!("{:.1}s", age.as_secs_f64())
                    )
                )?;
            }
        }
        writeln!(out, "skipped:           {}", report.skipped)?;
        writeln!(
            out,
            "live relays:       {}",
            if report.live_relays.is_empty() {
                "-".to_owned()
            } else {
                report.live_relays.join(", ")
            }
        )?;
    }
    Ok(
        if args.fail_on_dead && report.dead() + report.failed() > 0 {
            Outcome::DeadRows
        } else {
            Outcome::Success
        },
    )
}

/// The stand-alone command line: `<binary> outbox …` and `<binary> schemas …`.
#[derive(Debug, Parser)]
#[command(
    name = "outbox",
    about = "Operate the outbox: status, dead letters, requeue, skip, purge, consumer dead \
             letters; contract schemas"
)]
struct StandAlone {
    #[command(subcommand)]
    command: StandAloneCommand,
}

#[derive(Debug, Subcommand)]
enum StandAloneCommand {
    /// Status, dead letters, requeue, skip and purge of the outbox; consumer dead letters.
    Outbox(OutboxCommand),
    /// List, export and check the contract schemas.
    Schemas(SchemasCommand),
}

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

/// An envelope as `inbox dead show` prints it: the envelope's fields in their order, with
/// the payload as a JSON tree so that it is indented with the rest (a `Payload` is written
/// as the text it holds).
#[derive(serde::Serialize)]
struct EnvelopeView<'a> {
    message_id: Uuid,
    event_type: &'a str,
    version: u32,
    occurred_at: chrono::DateTime<chrono::Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    correlation_id: Option<Uuid>,
    #[serde(skip_serializing_if = "Option::is_none")]
    causation_id: Option<Uuid>,
    #[serde(skip_serializing_if = "Option::is_none")]
    traceparent: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tracestate: Option<&'a str>,
    aggregate_type: &'a str,
    aggregate_id: &'a str,
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    headers: &'a std::collections::BTreeMap<String, String>,
    payload: serde_json::Value,
}

impl<'a> EnvelopeView<'a> {
    fn of(envelope: &'a outbox_core::Envelope) -> io::Result<Self> {
        Ok(Self {
            message_id: envelope.message_id,
            event_type: &envelope.event_type,
            version: envelope.version,
            occurred_at: envelope.occurred_at,
            correlation_id: envelope.correlation_id,
            causation_id: envelope.causation_id,
            traceparent: envelope.traceparent.as_deref(),
            tracestate: envelope.tracestate.as_deref(),
            aggregate_type: &envelope.aggregate_type,
            aggregate_id: &envelope.aggregate_id,
            headers: &envelope.headers,
            payload: envelope.payload.to_value().map_err(io::Error::other)?,
        })
    }
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
