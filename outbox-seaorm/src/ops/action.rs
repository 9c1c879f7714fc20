//! Given-up outbox rows and operator actions: listing dead and failed rows, requeue and
//! skip (each recorded in the operator log), the log itself.

use outbox_core::metric;
use sea_orm::DbErr;
use uuid::Uuid;

use super::error::{OpsError, check_input};
use super::operations::Operations;
use crate::record::OutboxRecord;
use crate::record::operator_action::{OperatorAction, OperatorActionKind};
use crate::sql::ActionRow;
use crate::status::OutboxStatus;

impl Operations {
    /// Dead rows in `seq` order, of one event type or all, at most `limit`.
    ///
    /// # Errors
    /// The database's error.
    pub async fn dead_letters(
        &self,
        event_type: Option<&str>,
        limit: u64,
    ) -> Result<Vec<OutboxRecord>, DbErr> {
        self.rows_with_status(OutboxStatus::Dead, event_type, limit)
            .await
    }

    /// Failed rows (non-retryable jobs that failed, see [`crate::job`]) in `seq` order, of
    /// one event type or all, at most `limit`.
    ///
    /// # Errors
    /// The database's error.
    pub async fn failed_jobs(
        &self,
        event_type: Option<&str>,
        limit: u64,
    ) -> Result<Vec<OutboxRecord>, DbErr> {
        self.rows_with_status(OutboxStatus::Failed, event_type, limit)
            .await
    }

    async fn rows_with_status(
        &self,
        status: OutboxStatus,
        event_type: Option<&str>,
        limit: u64,
    ) -> Result<Vec<OutboxRecord>, DbErr> {
        self.store
            .rows_with_status(&self.db, status, event_type, limit)
            .await
    }

    /// The outbox row with this message id, whatever its status.
    ///
    /// # Errors
    /// The database's error.
    pub async fn find(&self, message_id: Uuid) -> Result<Option<OutboxRecord>, DbErr> {
        self.store.find(&self.db, message_id).await
    }

    /// Puts a `dead`, `failed` or `skipped` row back to `pending` (attempts 0, due now),
    /// recorded in the operator log. For a `failed` row this runs a non-retryable job again:
    /// an operator's decision.
    ///
    /// # Errors
    /// [`OpsError::NotFound`], [`OpsError::WrongStatus`] (e.g. a published row), or the
    /// database's error.
    pub async fn requeue(
        &self,
        message_id: Uuid,
        actor: &str,
        reason: Option<&str>,
    ) -> Result<OperatorAction, OpsError> {
        self.act(
            message_id,
            OperatorActionKind::Requeue,
            actor,
            reason,
            &[
                OutboxStatus::Dead,
                OutboxStatus::Failed,
                OutboxStatus::Skipped,
            ],
        )
        .await
    }

    /// Requeues every dead row (of one event type, or all), each recorded in the operator
    /// log. Returns the actions, in `seq` order. `failed` rows are left alone: each is
    /// requeued on its own, after a person checked it.
    ///
    /// # Errors
    /// The database's error; rows requeued before it stay requeued.
    pub async fn requeue_dead(
        &self,
        event_type: Option<&str>,
        actor: &str,
        reason: Option<&str>,
    ) -> Result<Vec<OperatorAction>, OpsError> {
        let mut actions = Vec::new();
        loop {
            let rows = self.dead_letters(event_type, 500).await?;
            if rows.is_empty() {
                return Ok(actions);
            }
            for row in rows {
                match self.requeue(row.envelope.message_id, actor, reason).await {
                    Ok(action) => actions.push(action),
                    // Changed meanwhile (another operator): not ours to requeue.
                    Err(OpsError::WrongStatus { .. } | OpsError::NotFound { .. }) => {}
                    Err(error) => return Err(error),
                }
            }
        }
    }

    /// Marks a `dead`, `failed` or `pending` row `skipped`: never published (a job never
    /// run again), no longer blocking its aggregate. Recorded in the operator log with
    /// `actor` and `reason`.
    ///
    /// # Errors
    /// [`OpsError::MissingReason`], [`OpsError::NotFound`], [`OpsError::WrongStatus`], or
    /// the database's error.
    pub async fn skip(
        &self,
        message_id: Uuid,
        actor: &str,
        reason: &str,
    ) -> Result<OperatorAction, OpsError> {
        if reason.trim().is_empty() {
            return Err(OpsError::MissingReason);
        }
        self.act(
            message_id,
            OperatorActionKind::Skip,
            actor,
            Some(reason),
            &[
                OutboxStatus::Dead,
                OutboxStatus::Failed,
                OutboxStatus::Pending,
            ],
        )
        .await
    }

    async fn act(
        &self,
        message_id: Uuid,
        action: OperatorActionKind,
        actor: &str,
        reason: Option<&str>,
        from: &[OutboxStatus],
    ) -> Result<OperatorAction, OpsError> {
        check_input(actor, reason)?;
        // The transaction's connection counts in a budget, if any.
        let _seat = self.db.enter().await;
        let txn = crate::transaction::begin_whole_at(&self.db, None).await?;
        let Some(row) = self.store.row_for_action(&txn, message_id).await? else {
            return Err(OpsError::NotFound { message_id });
        };
        let ActionRow {
            seq,
            event_type,
            status: previous,
            last_error,
        } = row;
        let status = OutboxStatus::parse(&previous)
            .ok_or_else(|| DbErr::Type(format!("unknown outbox status {previous:?}")))?;
        if !from.contains(&status) {
            return Err(OpsError::WrongStatus {
                message_id,
                status,
                action,
                expected: match action {
                    OperatorActionKind::Requeue => "dead, failed or skipped",
                    _ => "dead, failed or pending",
                },
            });
        }
        let now = self.outbox.clock().now();
        self.store.apply_action(&txn, seq, action, now).await?;
        let entry = OperatorAction {
            seq,
            message_id,
            event_type,
            action,
            previous_status: previous,
            actor: actor.to_owned(),
            reason: reason.map(str::to_owned),
            last_error,
            at: now,
            detail: None,
        };
        self.store.log_action(&txn, &entry).await?;
        txn.commit().await?;
        let mut labels = self.labels.clone();
        labels.push(metrics::Label::new("action", action.as_str()));
        metrics::counter!(metric::OPERATOR_ACTIONS, labels).increment(1);
        tracing::info!(
            %message_id,
            seq,
            action = action.as_str(),
            actor,
            reason = reason.unwrap_or(""),
            "outbox operator action"
        );
        Ok(entry)
    }

    /// The operator log, oldest first: every entry, or those of one message.
    ///
    /// # Errors
    /// The database's error.
    pub async fn operator_log(
        &self,
        message_id: Option<Uuid>,
    ) -> Result<Vec<OperatorAction>, DbErr> {
        self.store.operator_log(&self.db, message_id, None).await
    }

    /// The latest `limit` entries of the operator log, oldest first: what a page of the log
    /// shows without reading all of it.
    ///
    /// # Errors
    /// The database's error.
    pub async fn latest_operator_actions(&self, limit: u64) -> Result<Vec<OperatorAction>, DbErr> {
        self.store.operator_log(&self.db, None, Some(limit)).await
    }
}
