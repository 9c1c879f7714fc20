//! Scheduled rows as an operator sees them: listed in due order, cancelled, rescheduled or
//! made due now — by message id or by key, each change recorded in the operator log (see
//! [`crate::schedule`]).

use chrono::{DateTime, Utc};
use outbox_core::metric;
use uuid::Uuid;

use super::error::{OpsError, check_input};
use super::operations::Operations;
use crate::limits::MAX_DUE;
use crate::record::ScheduledRecord;
use crate::record::operator_action::{OperatorAction, OperatorActionKind};
use crate::sql::scheduled::Which;
use crate::status::OutboxStatus;

/// Most rows one action by key changes (a key names a handful of rows: an order's
/// reminders, a job's runs).
pub const MAX_ROWS_PER_KEY: u64 = 10_000;

/// Which scheduled rows an action is for.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ScheduledTarget {
    /// The row of this message id ([`CommitReport::scheduled`](crate::CommitReport::scheduled)).
    MessageId(Uuid),
    /// Every row raised with this key ([`Schedule::key`](outbox_core::schedule::Schedule::key)).
    Key(String),
}

/// The most waiting rows [`Operations::scheduled_summary`] counts: beyond, it says "more
/// than" (a count stays a bounded walk of an index, however many rows wait).
pub const MAX_COUNTED: u64 = 100_000;

/// How many rows wait, and the earliest due time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ScheduledSummary {
    /// Rows waiting in the scheduled table, at most [`MAX_COUNTED`].
    pub waiting: u64,
    /// Whether more than [`MAX_COUNTED`] wait (`waiting` is then [`MAX_COUNTED`]).
    pub more: bool,
    /// The earliest due time among them.
    pub next_due: Option<DateTime<Utc>>,
}

impl std::fmt::Display for ScheduledSummary {
    /// `3 waiting, next due 2026-12-08T09:00:00+00:00`, `more than 100000 waiting, …`,
    /// `none waiting`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.waiting, self.more) {
            (0, _) => return f.write_str("none waiting"),
            (count, true) => write!(f, "more than {count} waiting")?,
            (count, false) => write!(f, "{count} waiting")?,
        }
        if let Some(next) = self.next_due {
            write!(f, ", next due {}", next.to_rfc3339())?;
        }
        Ok(())
    }
}

impl Operations {
    /// Rows waiting in the scheduled table in due order, all or those of one key, at most
    /// `limit`.
    ///
    /// # Errors
    /// The database's error.
    pub async fn scheduled(
        &self,
        key: Option<&str>,
        limit: u64,
    ) -> Result<Vec<ScheduledRecord>, sea_orm::DbErr> {
        let which = key.map_or(Which::All, Which::Key);
        self.store
            .scheduled_rows(&self.db, which, limit, false)
            .await
    }

    /// The scheduled row of this message id, if it still waits.
    ///
    /// # Errors
    /// The database's error.
    pub async fn find_scheduled(
        &self,
        message_id: Uuid,
    ) -> Result<Option<ScheduledRecord>, sea_orm::DbErr> {
        let rows = self
            .store
            .scheduled_rows(&self.db, Which::MessageId(message_id), 1, false)
            .await?;
        Ok(rows.into_iter().next())
    }

    /// How many rows wait, and the earliest due time.
    ///
    /// # Errors
    /// The database's error.
    pub async fn scheduled_summary(&self) -> Result<ScheduledSummary, sea_orm::DbErr> {
        let (counted, next_due) = self.store.scheduled_summary(&self.db, MAX_COUNTED).await?;
        Ok(ScheduledSummary {
            waiting: counted.min(MAX_COUNTED),
            more: counted > MAX_COUNTED,
            next_due,
        })
    }

    /// Deletes waiting rows before they are due: never published. Each row is recorded in
    /// the operator log (`cancel`, with its due time). A reason is required.
    ///
    /// # Errors
    /// [`OpsError::MissingReason`], [`OpsError::NotScheduled`] (the row fell due already:
    /// [`skip`](Self::skip) it), [`OpsError::NotFound`], [`OpsError::NothingScheduled`] (no
    /// row waits under the key), [`OpsError::InputTooLong`], or the database's error
    /// (nothing changed).
    pub async fn cancel_scheduled(
        &self,
        target: &ScheduledTarget,
        actor: &str,
        reason: &str,
    ) -> Result<Vec<OperatorAction>, OpsError> {
        if reason.trim().is_empty() {
            return Err(OpsError::MissingReason);
        }
        self.change_scheduled(
            target,
            OperatorActionKind::Cancel,
            None,
            actor,
            Some(reason),
        )
        .await
    }

    /// Gives waiting rows a new due time, recorded in the operator log (`reschedule`, old
    /// and new due time). A time not in the future makes them due at once (the next
    /// look of a relay moves them).
    ///
    /// # Errors
    /// [`OpsError::DueOutOfRange`], and those of
    /// [`cancel_scheduled`](Self::cancel_scheduled) but the reason's.
    pub async fn reschedule(
        &self,
        target: &ScheduledTarget,
        at: DateTime<Utc>,
        actor: &str,
        reason: Option<&str>,
    ) -> Result<Vec<OperatorAction>, OpsError> {
        if at > MAX_DUE {
            return Err(OpsError::DueOutOfRange { at, max: MAX_DUE });
        }
        self.change_scheduled(
            target,
            OperatorActionKind::Reschedule,
            Some(at),
            actor,
            reason,
        )
        .await
    }

    /// Makes waiting rows due now (a relay moves them at its next look, within its
    /// schedule interval), recorded in the operator log (`run-now`).
    ///
    /// # Errors
    /// As [`reschedule`](Self::reschedule).
    pub async fn run_scheduled_now(
        &self,
        target: &ScheduledTarget,
        actor: &str,
        reason: Option<&str>,
    ) -> Result<Vec<OperatorAction>, OpsError> {
        let now = self.outbox.clock().now();
        self.change_scheduled(target, OperatorActionKind::RunNow, Some(now), actor, reason)
            .await
    }

    /// Locks the target's rows, deletes them (`due` `None`) or sets their due time, logs
    /// one entry per row, commits.
    async fn change_scheduled(
        &self,
        target: &ScheduledTarget,
        action: OperatorActionKind,
        due: Option<DateTime<Utc>>,
        actor: &str,
        reason: Option<&str>,
    ) -> Result<Vec<OperatorAction>, OpsError> {
        check_input(actor, reason)?;
        // The transaction's connection counts in a budget, if any.
        let _seat = self.db.enter().await;
        let txn = crate::transaction::begin_whole_at(&self.db, None).await?;
        let which = match target {
            ScheduledTarget::MessageId(id) => Which::MessageId(*id),
            ScheduledTarget::Key(key) => Which::Key(key),
        };
        let rows = self
            .store
            .scheduled_rows(&txn, which, MAX_ROWS_PER_KEY, true)
            .await?;
        if rows.is_empty() {
            // Rolled back now, not when dropped: on MariaDB a dropped transaction's
            // connection went back to the pool still open, holding its metadata locks, and a
            // later `DROP DATABASE` waited on them for good (the book's example hung).
            txn.rollback().await?;
            return Err(self.not_waiting(target).await);
        }
        let seqs: Vec<i64> = rows.iter().map(|row| row.record.seq).collect();
        match due {
            None => self.store.cancel_scheduled(&txn, &seqs).await?,
            Some(at) => self.store.set_due(&txn, &seqs, at).await?,
        }
        let now = self.outbox.clock().now();
        let mut entries = Vec::with_capacity(rows.len());
        for row in rows {
            let was = row.due_at();
            let entry = OperatorAction {
                seq: row.record.seq,
                message_id: row.record.envelope.message_id,
                event_type: row.record.envelope.event_type.clone(),
                action,
                previous_status: OutboxStatus::Scheduled.as_str().to_owned(),
                actor: actor.to_owned(),
                reason: reason.map(str::to_owned),
                last_error: None,
                at: now,
                detail: Some(match due {
                    None => format!("was due {}", was.to_rfc3339()),
                    Some(at) => format!("due {} → {}", was.to_rfc3339(), at.to_rfc3339()),
                }),
            };
            self.store.log_action(&txn, &entry).await?;
            entries.push(entry);
        }
        txn.commit().await?;
        let mut labels = self.labels.clone();
        labels.push(metrics::Label::new("action", action.as_str()));
        metrics::counter!(metric::OPERATOR_ACTIONS, labels).increment(entries.len() as u64);
        tracing::info!(
            ?target,
            rows = entries.len(),
            action = action.as_str(),
            actor,
            reason = reason.unwrap_or(""),
            "outbox operator action on scheduled rows"
        );
        Ok(entries)
    }

    /// Why nothing waits for `target`: due already (its status in the outbox table),
    /// unknown, or no row under the key.
    async fn not_waiting(&self, target: &ScheduledTarget) -> OpsError {
        match target {
            ScheduledTarget::Key(key) => OpsError::NothingScheduled { key: key.clone() },
            ScheduledTarget::MessageId(message_id) => match self.find(*message_id).await {
                Ok(Some(row)) => OpsError::NotScheduled {
                    message_id: *message_id,
                    status: row.status,
                },
                Ok(None) => OpsError::NotFound {
                    message_id: *message_id,
                },
                Err(error) => OpsError::Database(error),
            },
        }
    }
}
