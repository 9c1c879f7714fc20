//! Events due later: [`RaiseLater`](outbox_core::RaiseLater) on the unit of work, the
//! scheduled table, and the promotion that moves a row into the outbox table when its time
//! comes.
//!
//! ```text
//!  commit ──► <outbox>_scheduled  (status 'scheduled', next_attempt_at = due time)
//!                   │  relay, every schedule interval: rows due now, earliest first
//!                   ▼  one transaction: INSERT … SELECT into the outbox, DELETE here
//!             <outbox>            (status 'pending', a new seq) ──► relay / log relay ──► broker
//! ```
//!
//! # Where a future row waits
//!
//! A row due later is written, in the business transaction, to a table of its own beside the
//! outbox table (`<outbox>_scheduled`, [`Outbox::scheduled_table`](crate::Outbox::scheduled_table)),
//! not to the outbox table. Neither the polling relay's claim nor the log relay ever sees it
//! there: a million rows waiting for next month cost the claim nothing (its partial indexes
//! cover `pending` rows of the outbox table only), and the log relay, which reads inserts
//! into the outbox table from the write-ahead log or the binlog, cannot publish one early.
//!
//! When a row is due, a relay moves it: in one transaction it takes the due rows (earliest
//! first, `FOR UPDATE` on PostgreSQL and MariaDB: several relays take turns, so that the
//! moved rows' new `seq`s follow due order), inserts them into the outbox table as new `pending` rows, and deletes them from the
//! scheduled table. The move is atomic: a crash before its commit leaves the rows waiting, a
//! crash after leaves them pending in the outbox; nothing is lost and nothing is published
//! twice by it. The polling relay then claims them like any row; the log relay reads their
//! insert from the log, at the due time, like any insert. With
//! [`WriteMode::table_removed_after_insert`](crate::WriteMode::table_removed_after_insert)
//! the move deletes the outbox row again in the same transaction, as a commit does.
//! [`WriteMode::Message`](crate::WriteMode::Message) has no table for a row to wait in: an
//! event due later is refused at commit
//! ([`ScheduleProblem::MessageMode`](crate::ScheduleProblem::MessageMode)).
//!
//! Relays look every [`RelayConfig::schedule_interval`](crate::relay::RelayConfig::schedule_interval)
//! (1 s by default): a row goes out between its due time and one interval later, plus the
//! relay's usual latency. [`Relay::drain`](crate::relay::Relay::drain) moves what is due
//! before it drains.
//!
//! A look that moves [`ANALYZE_AFTER_ROWS`] rows or more analyzes the outbox table on
//! PostgreSQL: a burst of rows into a table the planner believes empty otherwise makes every
//! claim walk every pending row until autovacuum catches up.
//!
//! # Order
//!
//! **A scheduled event stands outside its aggregate's order while it waits, and joins it at
//! its due time.** It holds nothing back: the aggregate's later events go out at once, in
//! order, as if it were not there. When it is due, it gets a new `seq` and takes its place
//! behind every row of its aggregate already in the outbox table, as if it had been raised at
//! its due time: under [`Ordering::PerAggregate`](outbox_core::policy::Ordering::PerAggregate)
//! an earlier row of its aggregate in backoff holds it back, and it holds back the rows
//! raised after its move. Events due at the same instant go out in raise order.
//!
//! The other rule — hold every later event of the aggregate until the scheduled one is
//! published — would make "cancel the unpaid order in 30 minutes" stop the order's events
//! for 30 minutes; no peer does that.
//!
//! # Bad input
//!
//! Checked at commit, each a [`CommitError::Schedule`](crate::CommitError::Schedule) that
//! rolls back the unit of work: a due time after [`MAX_DUE`](crate::limits::MAX_DUE) (or a
//! delay that overflows a timestamp), an empty key, a key over 255 characters, an event due
//! later in message mode. A time in the past (or now) is not an error: the row is due at once
//! and goes to the outbox table directly ([`CommitReport::message_ids`](crate::CommitReport::message_ids)
//! lists it, not [`CommitReport::scheduled`](crate::CommitReport::scheduled)).

use chrono::{DateTime, Utc};
use outbox_core::schedule::Due;
use sea_orm::DbErr;

use crate::sql::Store;
use crate::transaction::Pool;

/// Rows moved in one look after which the outbox table is analyzed (PostgreSQL; see the
/// `sql/scheduled/analyze.rs` notes: a burst into a table the planner believes empty makes
/// every claim walk every pending row).
pub const ANALYZE_AFTER_ROWS: u64 = 10_000;

/// When a job snoozed at `now` until `due` waits until: at once for a time not in the
/// future; `None` beyond what a row holds ([`MAX_DUE`](crate::limits::MAX_DUE)). Both relays
/// read a snooze this way.
pub(crate) fn snoozed_until(due: Due, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let at = due.resolve(now)?;
    (at <= crate::limits::MAX_DUE).then_some(at.max(now))
}

/// Moves every row of `store`'s scheduled table due at `now` into the outbox table, `batch`
/// rows per transaction; analyzes the outbox table after [`ANALYZE_AFTER_ROWS`] or more.
/// Returns how many moved.
pub(crate) async fn promote_due(
    db: &Pool,
    store: &Store,
    now: DateTime<Utc>,
    batch: usize,
) -> Result<u64, DbErr> {
    let batch = batch.max(1) as u64;
    let mut moved = 0;
    loop {
        let rows = store.promote(db, now, batch).await?;
        moved += rows;
        if rows < batch {
            break;
        }
    }
    if moved > 0 {
        tracing::debug!(
            rows = moved,
            "scheduled rows due: moved into the outbox table"
        );
    }
    if moved >= ANALYZE_AFTER_ROWS {
        // Best effort: the rows are moved; statistics only speed up their publishing.
        if let Err(error) = store.analyze_outbox(db).await {
            tracing::warn!(%error, "ANALYZE of the outbox table after a large move failed");
        }
    }
    Ok(moved)
}
