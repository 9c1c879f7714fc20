//! The fast path (off by default): the producing process publishes its rows right after the
//! commit and marks them in the same code path; the relay only picks up what it missed.
//!
//! ```no_run
//! # use outbox_seaorm::relay::Relay;
//! # use outbox_core::in_process::InProcessBroker;
//! # async fn handler(db: sea_orm::DatabaseConnection, outbox: outbox_seaorm::Outbox,
//! #     relay: &Relay<InProcessBroker>, uow: outbox_seaorm::UnitOfWork<()>) -> Result<(), Box<dyn std::error::Error>> {
//! let fast_path = relay.fast_path(); // shares the relay's publisher and settings
//! let report = uow.commit().await?;  // the business change and its outbox rows
//! // Best effort: whatever fails here stays pending for the relay.
//! let published = fast_path.publish_committed(&report.message_ids).await?;
//! # let _ = published; Ok(()) }
//! ```
//!
//! # What it does
//!
//! 1. reads the committed rows by message id that are still `pending` — on PostgreSQL and
//!    MariaDB `FOR UPDATE SKIP LOCKED` in a transaction, so a row a relay is publishing is
//!    left to that relay;
//! 2. leaves to the relay every row that is not at the head of its aggregate (an earlier row
//!    is pending, or dead under `Block`): order per aggregate is kept;
//! 3. publishes the others in one batch and marks those the broker accepted `published`,
//!    in the same transaction; a failed row is left untouched (no attempt counted) for the
//!    relay, which retries it with its backoff.
//!
//! Rows whose `retryable` flag is off (job-queue mode, [`crate::job`]) are never published
//! here: a failure of theirs must mark them `failed` and raise the relay's alert hook, which
//! only the relay does. Neither are rows outside the relay's worker keys, when it has some.
//!
//! Run the relays with [`RelayBuilder::check_head`](super::RelayBuilder::check_head) on:
//! a relay then also leaves a row whose earlier row the fast path holds.
//!
//! # Trade-off
//!
//! - **Latency**: the event leaves right after the commit, without waiting for a poll or a
//!   `NOTIFY` round trip — useful on MariaDB and SQLite, which have no `NOTIFY`.
//! - **Cost in the request**: the caller waits for the broker (bounded by the publish
//!   timeout) and one more short transaction; a slow broker slows requests down unless the
//!   call is spawned.
//! - **Duplicates**: none more than the relay makes on PostgreSQL and MariaDB (row locks).
//!   On SQLite there are no row locks: a relay and the fast path may both publish a row
//!   (same message id; the consumer's inbox drops the second).
//! - **Nothing is lost**: the row was committed before the fast path runs; whatever the fast
//!   path does not mark, the relay publishes.

use std::collections::HashSet;
use std::sync::Arc;

use outbox_core::publish::Publisher;
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, IsolationLevel};
use uuid::Uuid;

use super::config::RelayConfig;
use super::decide::{Mark, PublishedRows, apply_marks, count_marks, decide};
use super::report::RelayError;
use crate::config::Outbox;
use crate::sql::{ClaimedRow, Store};
use crate::transaction::Pool;

/// What the fast path did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FastPathReport {
    /// Rows published and marked.
    pub published: usize,
    /// Rows left to the relay (already taken, not at the head of their aggregate, or
    /// failed).
    pub left_to_relay: usize,
}

/// Publishes committed rows right away; see the [module documentation](self).
pub struct FastPath<P> {
    db: Pool,
    outbox: Outbox,
    publisher: Arc<P>,
    config: RelayConfig,
    store: Store,
    labels: Vec<metrics::Label>,
}

impl<P> std::fmt::Debug for FastPath<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FastPath")
            .field("outbox", &self.outbox.outbox_table().to_string())
            .finish_non_exhaustive()
    }
}

impl<P: Publisher + 'static> FastPath<P> {
    /// A fast path for `outbox` in `db` publishing to `publisher` with `config`'s ordering,
    /// dead-letter policy and publish timeout. [`Relay::fast_path`](super::Relay::fast_path)
    /// builds one from a relay.
    pub fn new(
        db: DatabaseConnection,
        outbox: Outbox,
        publisher: Arc<P>,
        config: RelayConfig,
    ) -> Self {
        let store = Store::new(&outbox, db.get_database_backend());
        let labels = outbox.metric_labels().to_vec();
        Self {
            db: Pool::new(db, outbox.transaction_pooling()),
            outbox,
            publisher,
            config,
            store,
            labels,
        }
    }

    /// Publishes the committed rows with these message ids (a
    /// [`CommitReport::message_ids`](crate::CommitReport::message_ids)) and marks them.
    ///
    /// # Errors
    /// [`RelayError::Database`]: nothing was marked; the relay publishes the rows.
    pub async fn publish_committed(
        &self,
        message_ids: &[Uuid],
    ) -> Result<FastPathReport, RelayError> {
        if message_ids.is_empty() {
            return Ok(FastPathReport::default());
        }
        let backend = self.store.backend();
        if backend == DbBackend::Sqlite {
            let mut rows = self
                .store
                .pending_by_message_id(&self.db, message_ids, false)
                .await?;
            let held = self.held(&self.db, &rows).await?;
            let marks = self.decide(&mut rows, &held).await;
            let txn = crate::transaction::begin_whole_at(&self.db, None).await?;
            return self
                .mark_and_commit(txn, &rows, &marks, message_ids.len())
                .await;
        }
        let isolation = (backend == DbBackend::MySql).then_some(IsolationLevel::ReadCommitted);
        let txn = crate::transaction::begin_whole_at(&self.db, isolation).await?;
        let mut rows = self
            .store
            .pending_by_message_id(&txn, message_ids, true)
            .await?;
        let held = self.held(&txn, &rows).await?;
        let marks = self.decide(&mut rows, &held).await;
        self.mark_and_commit(txn, &rows, &marks, message_ids.len())
            .await
    }

    /// Writes the marks in `txn`, commits, counts them in the metrics.
    async fn mark_and_commit(
        &self,
        txn: sea_orm::DatabaseTransaction,
        rows: &[ClaimedRow],
        marks: &[Mark],
        requested: usize,
    ) -> Result<FastPathReport, RelayError> {
        let report = apply_marks(
            &self.store,
            &txn,
            rows,
            marks,
            self.outbox.clock().now(),
            PublishedRows::of(&self.config),
        )
        .await?;
        txn.commit().await?;
        count_marks(&self.labels, rows, marks);
        Ok(self.report(requested, report.published))
    }

    fn report(&self, requested: usize, published: usize) -> FastPathReport {
        FastPathReport {
            published,
            left_to_relay: requested.saturating_sub(published),
        }
    }

    async fn held<C: ConnectionTrait>(
        &self,
        conn: &C,
        rows: &[crate::sql::ClaimedRow],
    ) -> Result<HashSet<i64>, RelayError> {
        // Left to the relay: non-retryable rows, rows of a worker key with a concurrency
        // limit (only the relay's claim takes its slots), and rows of other worker keys.
        let mut held: HashSet<i64> = rows
            .iter()
            .filter(|row| {
                !row.retryable
                    || row
                        .worker_key
                        .as_ref()
                        .is_some_and(|key| self.outbox.worker_key_limit(key).is_some())
                    || self.config.worker_keys.as_ref().is_some_and(|keys| {
                        row.worker_key
                            .as_ref()
                            .is_none_or(|key| !keys.contains(key))
                    })
            })
            .map(|row| row.seq)
            .collect();
        if self.config.ordering != outbox_core::policy::Ordering::PerAggregate {
            return Ok(held);
        }
        let seqs: Vec<i64> = rows.iter().map(|row| row.seq).collect();
        held.extend(
            self.store
                .not_at_head(
                    conn,
                    &seqs,
                    self.config.dead_letter_policy,
                    self.config.worker_keys.is_some(),
                )
                .await?,
        );
        Ok(held)
    }

    /// The relay's decisions, keeping only the successes: failures stay for the relay.
    async fn decide(&self, rows: &mut [crate::sql::ClaimedRow], held: &HashSet<i64>) -> Vec<Mark> {
        decide(
            rows,
            held,
            &self.config,
            self.outbox.clock().now(),
            &*self.publisher,
            None,
        )
        .await
        .into_iter()
        .map(|mark| match mark {
            Mark::Published => Mark::Published,
            _ => Mark::Untouched,
        })
        .collect()
    }
}
