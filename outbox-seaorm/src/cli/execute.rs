//! Running a command against [`Operations`]: what each command reads or changes, in which
//! order, and how it ends ([`Outcome`] or [`OutboxCliError`]). What it prints is
//! `output`'s: `human` or `json`, as `--format` says.

use std::io::{self, Write};

use outbox_core::cli::{EXIT_CHECK_FAILED, EXIT_OK, OutputFormat};
use sea_orm::DbErr;
use uuid::Uuid;

use super::args::{
    DeadAction, DeadCommand, GivenUpStatusArg, InboxDeadAction, OutboxAction, OutboxCommand,
    StatusArgs, actor,
};
use super::output::{self, human, json};
use super::scheduled::ScheduledAction;
use crate::inbox::dead_letter::DeadLetterStatus;
use crate::ops::{Operations, OpsError};

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
    /// `log-dead requeue` or `skip` of an entry that is not `dead`.
    #[error("log dead letter {id} is {status}; requeue and skip apply to dead entries")]
    LogDeadLetterWrongStatus {
        /// The entry.
        id: i64,
        /// Its state.
        status: crate::record::log_dead_letter::LogDeadLetterStatus,
    },
    /// `log-reset` of a slot that does not exist or whose lease a relay holds.
    #[error(
        "log relay slot `{slot}` was not reset: no such slot in this outbox, or a relay holds \
         its lease (stop every log relay of the slot, then run it again)"
    )]
    LogResetRefused {
        /// The slot.
        slot: String,
    },
}

impl From<DbErr> for OutboxCliError {
    fn from(error: DbErr) -> Self {
        Self::Ops(OpsError::Database(error))
    }
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
                    json::records(out, &rows)?;
                } else {
                    human::records(out, &rows, label)?;
                }
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
                    json::record(out, &record, &log)?;
                } else {
                    human::record(out, &record, &log)?;
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
                human::requeued(out, &actions)?;
                Ok(Outcome::Success)
            }
            OutboxAction::Skip(args) => {
                let action = ops
                    .skip(args.message_id, &actor(&args.actor), &args.reason)
                    .await?;
                human::skipped(out, &action)?;
                Ok(Outcome::Success)
            }
            OutboxAction::Purge(args) => {
                let rows = ops
                    .purge(args.older_than, args.batch)
                    .await?
                    .ok_or(OutboxCliError::Busy)?;
                human::purged(out, rows, args.older_than)?;
                Ok(Outcome::Success)
            }
            OutboxAction::PurgeInbox(args) => {
                let rows = ops
                    .purge_inbox(args.older_than, args.batch)
                    .await?
                    .ok_or(OutboxCliError::Busy)?;
                human::purged_inbox(out, rows, args.older_than)?;
                Ok(Outcome::Success)
            }
            OutboxAction::Scheduled(command) => scheduled(ops, &command.action, out).await,
            OutboxAction::Periodic(args) => {
                let rows = ops.periodic().await?;
                output::periodic::list(out, &rows, args.format == OutputFormat::Json)?;
                Ok(Outcome::Success)
            }
            OutboxAction::Unique(args) => {
                let rows = ops
                    .unique_keys(args.event_type.as_deref(), args.limit)
                    .await?;
                output::unique::list(out, &rows, args.format == OutputFormat::Json)?;
                Ok(Outcome::Success)
            }
            OutboxAction::InboxDead(command) => inbox_dead(ops, &command.action, out).await,
            #[cfg(log_relay)]
            OutboxAction::LogDead(command) => log_dead(ops, &command.action, out).await,
            #[cfg(log_relay)]
            OutboxAction::LogReset(args) => {
                if !ops.reset_log_position(&args.slot).await? {
                    return Err(OutboxCliError::LogResetRefused {
                        slot: args.slot.clone(),
                    });
                }
                super::output::log_relay::reset(out, &args.slot)?;
                Ok(Outcome::Success)
            }
        }
    }
}

/// `outbox scheduled …`.
async fn scheduled(
    ops: &Operations,
    action: &ScheduledAction,
    out: &mut (dyn Write + Send),
) -> Result<Outcome, OutboxCliError> {
    let actions = match action {
        ScheduledAction::List(args) => {
            let rows = ops.scheduled(args.key.as_deref(), args.limit).await?;
            output::scheduled::list(out, &rows, args.format == OutputFormat::Json)?;
            return Ok(Outcome::Success);
        }
        ScheduledAction::Cancel(args) => {
            ops.cancel_scheduled(&args.target.target(), &actor(&args.actor), &args.reason)
                .await?
        }
        ScheduledAction::Reschedule(args) => {
            ops.reschedule(
                &args.target.target(),
                args.at,
                &actor(&args.actor),
                args.reason.as_deref(),
            )
            .await?
        }
        ScheduledAction::RunNow(args) => {
            ops.run_scheduled_now(
                &args.target.target(),
                &actor(&args.actor),
                args.reason.as_deref(),
            )
            .await?
        }
    };
    output::scheduled::changed(out, &actions)?;
    Ok(Outcome::Success)
}

async fn status(
    ops: &Operations,
    args: &StatusArgs,
    out: &mut (dyn Write + Send),
) -> Result<Outcome, OutboxCliError> {
    let report = ops.status().await?;
    let scheduled = ops.scheduled_summary().await?;
    if args.format == OutputFormat::Json {
        json::status(out, &report, &scheduled)?;
    } else {
        human::status(out, &report)?;
        writeln!(out, "scheduled:         {scheduled}")?;
    }
    Ok(
        if args.fail_on_dead && report.dead() + report.failed() > 0 {
            Outcome::DeadRows
        } else {
            Outcome::Success
        },
    )
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
                json::dead_letters(out, &letters)?;
            } else {
                human::dead_letters(out, &letters)?;
            }
            Ok(Outcome::Success)
        }
        InboxDeadAction::Show(args) => {
            let letter = ops
                .consumer_dead_letter(args.id)
                .await?
                .ok_or(OutboxCliError::DeadLetterNotFound(args.id))?;
            if args.format == OutputFormat::Json {
                json::dead_letter(out, &letter)?;
            } else {
                human::dead_letter(out, &letter)?;
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
                human::requeued_dead_letter(out, id, &letter, &actor)?;
            }
            human::requeued_dead_letters(out, args.ids.len())?;
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
            human::skipped_dead_letter(out, args.id, &actor, &args.reason)?;
            Ok(Outcome::Success)
        }
        InboxDeadAction::Parked(args) => {
            let parked = ops
                .consumer_parked(args.consumer.as_deref(), args.limit)
                .await?;
            if args.format == OutputFormat::Json {
                json::parked(out, &parked)?;
            } else {
                human::parked(out, &parked)?;
            }
            Ok(Outcome::Success)
        }
    }
}

/// `outbox log-dead …`.
#[cfg(log_relay)]
async fn log_dead(
    ops: &Operations,
    action: &super::log_relay::LogDeadAction,
    out: &mut (dyn Write + Send),
) -> Result<Outcome, OutboxCliError> {
    use super::log_relay::LogDeadAction;
    use super::output::log_relay as output;
    use crate::record::log_dead_letter::LogDeadLetterStatus;
    match action {
        LogDeadAction::List(args) => {
            let entries = ops
                .log_dead_letters(
                    args.slot.as_deref(),
                    args.event_type.as_deref(),
                    args.status.map(LogDeadLetterStatus::from),
                    args.limit,
                )
                .await?;
            output::dead_letters(out, &entries, args.format == OutputFormat::Json)?;
        }
        LogDeadAction::Show(args) => {
            let entry = ops
                .log_dead_letter(args.id)
                .await?
                .ok_or(OpsError::DeadLetterNotFound { id: args.id })?;
            output::dead_letter(out, &entry, args.format == OutputFormat::Json)?;
        }
        LogDeadAction::Requeue(args) => {
            let actor = actor(&args.actor);
            for &id in &args.ids {
                if !ops.requeue_log_dead_letter(id, &actor).await? {
                    return Err(log_wrong_status(ops, id).await);
                }
                output::acted(out, id, "requeued", &actor, None)?;
            }
        }
        LogDeadAction::Skip(args) => {
            let actor = actor(&args.actor);
            if !ops
                .skip_log_dead_letter(args.id, &actor, &args.reason)
                .await?
            {
                return Err(log_wrong_status(ops, args.id).await);
            }
            output::acted(out, args.id, "skipped", &actor, Some(&args.reason))?;
        }
    }
    Ok(Outcome::Success)
}

/// The error for a log dead letter that was not `dead`.
#[cfg(log_relay)]
async fn log_wrong_status(ops: &Operations, id: i64) -> OutboxCliError {
    match ops.log_dead_letter(id).await {
        Ok(Some(entry)) => OutboxCliError::LogDeadLetterWrongStatus {
            id,
            status: entry.status,
        },
        Ok(None) => OpsError::DeadLetterNotFound { id }.into(),
        Err(error) => error.into(),
    }
}
