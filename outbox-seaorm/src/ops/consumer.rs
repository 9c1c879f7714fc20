//! The consumers' dead letters and parked messages, as operators see them: list, show,
//! requeue, skip.

use outbox_core::metric;
use sea_orm::DbErr;

use super::error::{OpsError, check_input};
use super::operations::Operations;
use crate::inbox::dead_letter::{self, ConsumerDeadLetter, DeadLetterStatus};

impl Operations {
    /// Consumer dead letters ([`crate::inbox::dead_letter`]), oldest first, of one consumer
    /// or all, in one state or all.
    ///
    /// # Errors
    /// The database's error.
    pub async fn consumer_dead_letters(
        &self,
        consumer: Option<&str>,
        status: Option<DeadLetterStatus>,
        limit: u64,
    ) -> Result<Vec<ConsumerDeadLetter>, DbErr> {
        dead_letter::list(&self.db, &self.outbox, consumer, status, limit).await
    }

    /// One consumer dead letter by id.
    ///
    /// # Errors
    /// The database's error.
    pub async fn consumer_dead_letter(&self, id: i64) -> Result<Option<ConsumerDeadLetter>, DbErr> {
        dead_letter::find(&self.db, &self.outbox, id).await
    }

    /// Marks a consumer dead letter `requeued` (recording who and when); the running
    /// [`Consumer`](crate::inbox::Consumer) of its consumer name redelivers it to its
    /// handler. Returns `false` when the dead letter does not exist or is not `dead`.
    ///
    /// # Errors
    /// [`OpsError::InputTooLong`] for an actor over
    /// [`MAX_ACTOR_CHARS`](crate::limits::MAX_ACTOR_CHARS); the database's error.
    pub async fn requeue_consumer_dead_letter(
        &self,
        id: i64,
        actor: &str,
    ) -> Result<bool, OpsError> {
        check_input(actor, None)?;
        let requeued = dead_letter::transition(
            &self.db,
            &self.outbox,
            id,
            DeadLetterStatus::Dead,
            DeadLetterStatus::Requeued,
            dead_letter::Actor {
                name: Some(actor),
                reason: None,
            },
        )
        .await?;
        if requeued {
            let mut labels = self.labels.clone();
            labels.push(metrics::Label::new("action", "requeue-consumer"));
            metrics::counter!(metric::OPERATOR_ACTIONS, labels).increment(1);
            tracing::info!(dead_letter = id, actor, "consumer dead letter requeued");
        }
        Ok(requeued)
    }

    /// Messages a consumer parked ([`crate::inbox::parked`]): waiting for their next
    /// attempt, or behind an earlier message of their aggregate. Oldest first, of one
    /// consumer or all, at most `limit`.
    ///
    /// # Errors
    /// The database's error.
    pub async fn consumer_parked(
        &self,
        consumer: Option<&str>,
        limit: u64,
    ) -> Result<Vec<crate::inbox::parked::ParkedMessage>, DbErr> {
        crate::inbox::parked::list(&self.db, &self.outbox, consumer, limit).await
    }

    /// Gives a consumer dead letter up: `dead` → `skipped`, recording who, when and why. A
    /// skipped letter no longer holds its aggregate: the consumer applies the messages parked
    /// behind it ([`crate::inbox::parked`]). Returns `false` when the dead letter is not
    /// `dead` (a `requeued` one is being redelivered).
    ///
    /// # Errors
    /// [`OpsError::MissingReason`] for an empty reason, [`OpsError::InputTooLong`],
    /// [`OpsError::DeadLetterNotFound`], or the database's error.
    pub async fn skip_consumer_dead_letter(
        &self,
        id: i64,
        actor: &str,
        reason: &str,
    ) -> Result<bool, OpsError> {
        if reason.trim().is_empty() {
            return Err(OpsError::MissingReason);
        }
        check_input(actor, Some(reason))?;
        if dead_letter::find(&self.db, &self.outbox, id)
            .await?
            .is_none()
        {
            return Err(OpsError::DeadLetterNotFound { id });
        }
        let skipped = dead_letter::transition(
            &self.db,
            &self.outbox,
            id,
            DeadLetterStatus::Dead,
            DeadLetterStatus::Skipped,
            dead_letter::Actor {
                name: Some(actor),
                reason: Some(reason),
            },
        )
        .await?;
        if skipped {
            let mut labels = self.labels.clone();
            labels.push(metrics::Label::new("action", "skip-consumer"));
            metrics::counter!(metric::OPERATOR_ACTIONS, labels).increment(1);
            tracing::info!(
                dead_letter = id,
                actor,
                reason,
                "consumer dead letter skipped"
            );
        }
        Ok(skipped)
    }
}
