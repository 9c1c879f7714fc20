//! One batch: claim, publish, mark — in one transaction holding the row locks on
//! PostgreSQL and MariaDB, or read / publish / mark on SQLite — and its span and metrics.

use std::collections::HashSet;
use std::time::Instant;

use outbox_core::metric;
use outbox_core::policy::Ordering;
use outbox_core::publish::Publisher;
use sea_orm::{ConnectionTrait, DbBackend, DbErr, IsolationLevel};

use super::core::Core;
use super::decide::{Mark, PublishedRows, apply_marks, count_marks, decide, to_delta};
use super::report::{BatchReport, RelayError};
use crate::lease::{RELAY_LEASE, lease_partition};
use crate::sql::{Claim, ClaimedRow, LeaseLock, PastInFlight};

/// A claimed batch on PostgreSQL / MariaDB: the transaction that holds its row locks.
pub(crate) struct LockedBatch {
    pub(super) txn: sea_orm::DatabaseTransaction,
    pub(super) rows: Vec<ClaimedRow>,
}

impl<P: Publisher + 'static> Core<P> {
    /// One batch, on the backend's way (see the [relay documentation](super)).
    pub(super) async fn batch(&self) -> Result<BatchReport, RelayError> {
        if self.store.backend() == DbBackend::Sqlite {
            self.batch_sqlite().await
        } else {
            self.batch_locked().await
        }
    }

    /// The span of one batch; its counts are recorded by [`record_batch`](Self::record_batch).
    pub(super) fn batch_span(&self) -> tracing::Span {
        tracing::info_span!(
            "outbox.relay.batch",
            outbox = %self.outbox.outbox_table(),
            relay = %self.config.instance_id,
            claimed = tracing::field::Empty,
            published = tracing::field::Empty,
            retried = tracing::field::Empty,
            dead_lettered = tracing::field::Empty,
        )
    }

    /// Records a finished batch in its span and in the batch metrics.
    pub(super) fn record_batch(
        &self,
        span: &tracing::Span,
        report: &BatchReport,
        started: Instant,
    ) {
        span.record("claimed", report.claimed);
        span.record("published", report.published);
        span.record("retried", report.retried);
        span.record("dead_lettered", report.dead_lettered);
        if report.claimed > 0 {
            metrics::histogram!(metric::BATCH_DURATION, self.labels.clone())
                .record(started.elapsed().as_secs_f64());
            metrics::histogram!(metric::BATCH_SIZE, self.labels.clone())
                .record(report.claimed as f64);
        }
    }

    /// A batch on PostgreSQL / MariaDB: one transaction holding the row locks (and the
    /// lease share locks) while publishing.
    pub(super) async fn batch_locked(&self) -> Result<BatchReport, RelayError> {
        let Some(mut batch) = self.claim_locked(false, None).await? else {
            return Ok(BatchReport::default());
        };
        let held = self.held_rows(&batch.txn, &batch.rows).await?;
        let marks = self.publish(&mut batch.rows, &held).await;
        self.finish_locked(batch, &marks).await
    }

    /// Opens a batch's transaction, share-locks the leases and claims; `None` (and the
    /// transaction committed) when there is nothing to claim.
    ///
    /// `ahead`: the claim of a pipelined relay while its previous batch is in flight. The
    /// lease share lock is then taken with `NOWAIT` (see [`LeaseLock::ShareNoWait`]), and
    /// when another relay is taking a lease over meanwhile the claim gives way: `None`,
    /// the transaction rolled back; the relay marks its batch in flight, which lets the
    /// takeover through, and claims again afterwards.
    ///
    /// `past`: on PostgreSQL, for a relay that holds leases (partitions or worker keys of
    /// its own), the claim starts past the batches in flight (see
    /// [`PastInFlight`]). When it finds less than a full batch (nothing left past them, or
    /// a row below them that it must not pass over), the same transaction claims again
    /// from the start: rows the first claim locked and the second does not return stay
    /// pending, and are released with the transaction.
    pub(super) async fn claim_locked(
        &self,
        ahead: bool,
        past: Option<PastInFlight>,
    ) -> Result<Option<LockedBatch>, RelayError> {
        // Unordered relays hold no leases and share every row: the batches of the others
        // would count below `last`, and the claim would nearly always start over.
        let past = past.filter(|_| self.store.backend() == DbBackend::Postgres && self.leased());
        let isolation =
            (self.store.backend() == DbBackend::MySql).then_some(IsolationLevel::ReadCommitted);
        let txn = crate::transaction::begin_whole_at(&self.db, isolation).await?;
        // PostgreSQL: plan the claim and the mark once per connection (see the statement).
        self.store.plan_generically(&txn).await?;
        let now = self.now();
        let owned = if self.leased() {
            let lock = if ahead {
                LeaseLock::ShareNoWait
            } else {
                LeaseLock::Share
            };
            match self
                .store
                .owned(&txn, &self.config.instance_id, now, lock)
                .await
            {
                Ok(owned) => owned,
                Err(error) if ahead && crate::sql::is_lock_not_available(&error) => {
                    tracing::debug!(
                        relay = %self.config.instance_id,
                        "a lease is being taken over: no claim ahead of the batch in flight"
                    );
                    txn.rollback().await?;
                    return Ok(None);
                }
                Err(error) => return Err(error.into()),
            }
        } else {
            Vec::new()
        };
        let keys = self.claimable_keys(&owned);
        let partitions = if self.leased() && !self.keyed() {
            let partitions: Vec<i32> = owned.iter().filter_map(|n| lease_partition(n)).collect();
            Some(partitions)
        } else {
            None
        };
        if partitions.as_ref().is_some_and(Vec::is_empty)
            || keys.as_ref().is_some_and(Vec::is_empty)
        {
            txn.commit().await?;
            return Ok(None);
        }
        let claim = self.claim(now, partitions.as_deref(), keys.as_deref());
        let rows = self.claim_rows(&txn, claim, past).await?;
        if rows.is_empty() {
            txn.commit().await?;
            return Ok(None);
        }
        Ok(Some(LockedBatch { txn, rows }))
    }

    /// The batch's rows: key by key when the claim needs it ([`by_key`](Self::by_key)),
    /// otherwise in one claim, first past the batches in flight when `past` is given and
    /// the claim is in `seq` order (a claim by priority is not), then from the start when
    /// that found less than a full batch.
    async fn claim_rows<C: ConnectionTrait>(
        &self,
        conn: &C,
        claim: Claim<'_>,
        past: Option<PastInFlight>,
    ) -> Result<Vec<ClaimedRow>, DbErr> {
        if self.by_key(claim) {
            return self.claim_by_key(conn, claim).await;
        }
        let past = past.filter(|_| !self.store.by_priority(claim));
        let rows = self.store.claim(conn, Claim { past, ..claim }).await?;
        if past.is_some() && rows.len() < claim.limit {
            return self.store.claim(conn, claim).await;
        }
        Ok(rows)
    }

    /// Marks a published batch and commits its transaction.
    pub(super) async fn finish_locked(
        &self,
        batch: LockedBatch,
        marks: &[Mark],
    ) -> Result<BatchReport, RelayError> {
        let report = self.apply(&batch.txn, &batch.rows, marks).await?;
        batch.txn.commit().await?;
        self.count(&batch.rows, marks);
        if report.failed > 0 {
            self.raise_alerts(&batch.rows, marks).await;
        }
        Ok(report)
    }

    /// A batch on SQLite: read, publish outside any transaction, mark in a short one.
    pub(super) async fn batch_sqlite(&self) -> Result<BatchReport, RelayError> {
        let now = self.now();
        // Only with enough lease left to finish the batch before anyone could take over.
        let margin = to_delta(self.config.publish_timeout);
        let owned = self
            .store
            .owned(
                &self.db,
                &self.config.instance_id,
                now + margin,
                LeaseLock::None,
            )
            .await?;
        let keys = self.claimable_keys(&owned);
        let may_claim = match &keys {
            Some(keys) => !keys.is_empty(),
            None => owned.iter().any(|name| name == RELAY_LEASE),
        };
        if !may_claim {
            return Ok(BatchReport::default());
        }
        let claim = self.claim(now, None, keys.as_deref());
        let mut rows = self.claim_rows(&self.db, claim, None).await?;
        if rows.is_empty() {
            return Ok(BatchReport::default());
        }
        let held = self.held_rows(&self.db, &rows).await?;
        let marks = self.publish(&mut rows, &held).await;
        let txn = crate::transaction::begin_whole_at(&self.db, None).await?;
        let report = self.apply(&txn, &rows, &marks).await?;
        txn.commit().await?;
        self.count(&rows, &marks);
        if report.failed > 0 {
            self.raise_alerts(&rows, &marks).await;
        }
        Ok(report)
    }

    pub(super) async fn held_rows<C: ConnectionTrait>(
        &self,
        conn: &C,
        rows: &[ClaimedRow],
    ) -> Result<HashSet<i64>, DbErr> {
        if !self.config.check_head || self.config.ordering != Ordering::PerAggregate {
            return Ok(HashSet::new());
        }
        let seqs: Vec<i64> = rows.iter().map(|row| row.seq).collect();
        Ok(self
            .store
            .not_at_head(conn, &seqs, self.config.dead_letter_policy, self.keyed())
            .await?
            .into_iter()
            .collect())
    }

    /// Publishes the rows that may go and decides the mark of every claimed row.
    pub(super) async fn publish(&self, rows: &mut [ClaimedRow], held: &HashSet<i64>) -> Vec<Mark> {
        decide(
            rows,
            held,
            &self.config,
            self.now(),
            &*self.publisher,
            Some(&self.health),
        )
        .await
    }

    async fn apply<C: ConnectionTrait>(
        &self,
        conn: &C,
        rows: &[ClaimedRow],
        marks: &[Mark],
    ) -> Result<BatchReport, DbErr> {
        apply_marks(
            &self.store,
            conn,
            rows,
            marks,
            self.now(),
            PublishedRows::of(&self.config),
        )
        .await
    }

    fn count(&self, rows: &[ClaimedRow], marks: &[Mark]) {
        count_marks(&self.labels, rows, marks);
    }
}
