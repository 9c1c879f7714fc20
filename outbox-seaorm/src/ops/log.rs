//! The log relay, as operators see it (feature `log-relay`, PostgreSQL): its slots (who
//! streams, lag, `wal_status`, backfill), and its dead letters and parked events — list,
//! show, requeue, skip. Requeue and skip are recorded on the entry (who, when, why) and in
//! the operator log (`seq` = the entry's id, `previous_status` = `log-dead`), in one
//! transaction.

use outbox_core::metric;
use sea_orm::{DbErr, TransactionTrait as _};

use super::error::{OpsError, check_input};
use super::operations::Operations;
use crate::record::log_dead_letter::{LogDeadLetter, LogDeadLetterStatus};
use crate::record::log_slot::LogSlotStatus;
use crate::record::operator_action::{OperatorAction, OperatorActionKind};

impl Operations {
    /// The log relay slots of this outbox.
    ///
    /// # Errors
    /// The database's error.
    pub async fn log_slots(&self) -> Result<Vec<LogSlotStatus>, DbErr> {
        crate::status_report::log_slots(&self.db, &self.store).await
    }

    /// MariaDB's recovery after the binlogs lost the log relay's position
    /// ([`LogRelayError::PositionPurged`](crate::relay::log::LogRelayError::PositionPurged)):
    /// forgets `slot`'s stored position and backfill, so that the next start publishes the
    /// pending rows from a new consistent snapshot and streams on from its position. Rows
    /// published before and still in the table (within the retention) go out again, with
    /// their message ids; the consumers' inbox applies them once. `Ok(false)`: no such slot,
    /// or a relay holds its lease now (stop it first). On PostgreSQL the server holds the
    /// position in the slot: drop an invalidated slot instead (book: The log relay).
    ///
    /// # Errors
    /// The database's error.
    pub async fn reset_log_position(&self, slot: &str) -> Result<bool, OpsError> {
        check_input(slot, None)?;
        let reset = self.store.reset_log_position(&self.db, slot).await?;
        if reset {
            tracing::warn!(%slot, "log relay position reset: the next start backfills the pending rows");
        }
        Ok(reset)
    }

    /// Log relay dead letters and parked events, oldest first, filtered by slot, event type
    /// and state.
    ///
    /// # Errors
    /// The database's error.
    pub async fn log_dead_letters(
        &self,
        slot: Option<&str>,
        event_type: Option<&str>,
        status: Option<LogDeadLetterStatus>,
        limit: u64,
    ) -> Result<Vec<LogDeadLetter>, DbErr> {
        self.store
            .list_log_dead_letters(&self.db, slot, event_type, status, limit)
            .await
    }

    /// One log relay dead letter by id.
    ///
    /// # Errors
    /// The database's error.
    pub async fn log_dead_letter(&self, id: i64) -> Result<Option<LogDeadLetter>, DbErr> {
        self.store.find_log_dead_letter(&self.db, id).await
    }

    /// Counts of log relay dead letters by state (`dead`, `parked`, …).
    ///
    /// # Errors
    /// The database's error.
    pub async fn log_dead_letter_counts(&self) -> Result<Vec<(String, i64)>, DbErr> {
        self.store.count_log_dead_letters(&self.db).await
    }

    /// `dead` → `requeued`: the active log relay publishes it at its next heartbeat, then
    /// the events parked behind it, in order. `Ok(false)`: it is not `dead`.
    ///
    /// # Errors
    /// [`OpsError::DeadLetterNotFound`], [`OpsError::InputTooLong`], the database's error.
    pub async fn requeue_log_dead_letter(&self, id: i64, actor: &str) -> Result<bool, OpsError> {
        check_input(actor, None)?;
        self.act_on_log_dead_letter(id, OperatorActionKind::Requeue, actor, None)
            .await
    }

    /// `dead` → `skipped`, with a reason: it is never published, and no longer holds its
    /// aggregate — the events parked behind it go out at the relay's next heartbeat.
    /// `Ok(false)`: it is not `dead`.
    ///
    /// # Errors
    /// [`OpsError::MissingReason`], [`OpsError::DeadLetterNotFound`],
    /// [`OpsError::InputTooLong`], the database's error.
    pub async fn skip_log_dead_letter(
        &self,
        id: i64,
        actor: &str,
        reason: &str,
    ) -> Result<bool, OpsError> {
        if reason.trim().is_empty() {
            return Err(OpsError::MissingReason);
        }
        check_input(actor, Some(reason))?;
        self.act_on_log_dead_letter(id, OperatorActionKind::Skip, actor, Some(reason))
            .await
    }

    async fn act_on_log_dead_letter(
        &self,
        id: i64,
        action: OperatorActionKind,
        actor: &str,
        reason: Option<&str>,
    ) -> Result<bool, OpsError> {
        let Some(entry) = self.store.find_log_dead_letter(&self.db, id).await? else {
            return Err(OpsError::DeadLetterNotFound { id });
        };
        let to = match action {
            OperatorActionKind::Requeue => LogDeadLetterStatus::Requeued,
            _ => LogDeadLetterStatus::Skipped,
        };
        // The transaction's connection counts in a budget, if any.
        let _seat = self.db.enter().await;
        let txn = self
            .db
            .connection()
            .begin()
            .await
            .map_err(OpsError::Database)?;
        let changed = self
            .store
            .transition_log_dead_letter(
                &txn,
                id,
                LogDeadLetterStatus::Dead,
                to,
                None,
                Some(actor),
                reason,
            )
            .await?;
        if changed {
            let log = OperatorAction {
                seq: id,
                message_id: entry.message_id.unwrap_or_default(),
                event_type: entry.event_type.clone(),
                action,
                previous_status: "log-dead".to_owned(),
                actor: actor.to_owned(),
                reason: reason.map(str::to_owned),
                last_error: Some(entry.error.clone()),
                at: self.outbox.clock().now(),
                detail: None,
            };
            self.store.log_action(&txn, &log).await?;
        }
        txn.commit().await?;
        if changed {
            let mut labels = self.labels.clone();
            labels.push(metrics::Label::new(
                "action",
                format!("{}-log", action.as_str()),
            ));
            metrics::counter!(metric::OPERATOR_ACTIONS, labels).increment(1);
            tracing::info!(dead_letter = id, actor, ?reason, %action, "log relay dead letter");
        }
        Ok(changed)
    }
}
