//! Pipelined batches on PostgreSQL and MariaDB (see
//! [`RelayBuilder::pipeline`](super::RelayBuilder::pipeline)).
//!
//! ```text
//! broker:    publish 1 | publish 2        | publish 3        | …
//! database:  claim 1   | mark 0, claim 2  | mark 1, claim 3  | …
//! ```
//!
//! Each batch keeps its own transaction (row locks, lease share locks) from its claim to its
//! mark, as without pipelining. The claim of batch *n + 1* runs while batch *n* is in
//! flight, so `SKIP LOCKED` leaves batch *n*'s rows alone. With a third connection in the
//! pool, the mark of batch *n − 1* and the claim of batch *n + 1* run side by side (three
//! transactions open), so the database work of a step takes about as long as the longer of
//! the two, not their sum; with two connections they run one after the other.
//!
//! A claim may return later rows of an aggregate whose earlier row is in a batch not marked
//! yet when the claim looks: batch *n* (in flight) and, side by side, batch *n − 1* (being
//! marked). Batch *n + 1* is published only once both outcomes are known, and its rows whose
//! aggregate did not get through in either (a retry, a row held back, a dead row under
//! `Block`) are held back in turn, as the claim itself would have done had those batches
//! been marked already.
//!
//! On PostgreSQL the claim ahead starts past the batches in flight rather than trying each
//! of their locked rows (about 1 000 of them with batches of 500; the claim's execution went
//! from a median of 8.3 ms to 3.9 ms in the server log), when it counts no other claimable
//! row below them in the same statement; otherwise it claims from the start (see
//! `PastInFlight`).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use outbox_core::policy::{DeadLetterPolicy, Ordering};
use outbox_core::publish::Publisher;
use sea_orm::DbBackend;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use super::batch::LockedBatch;
use super::config::RelayConfig;
use super::core::Core;
use super::decide::{Mark, decide};
use super::leases::Leases;
use super::outage::PublishHealth;
use super::report::{BatchReport, RelayError, RelayReport};
use crate::sql::{ClaimedRow, PastInFlight};

/// Publishes `rows` (see [`decide`]) and hands them back with their marks and how long the
/// publishing took.
async fn publish_owned<P: Publisher + 'static>(
    publisher: Arc<P>,
    config: RelayConfig,
    health: Arc<PublishHealth>,
    now: DateTime<Utc>,
    mut rows: Vec<ClaimedRow>,
    held: HashSet<i64>,
) -> (Vec<ClaimedRow>, Vec<Mark>, Duration) {
    let started = Instant::now();
    let marks = decide(&mut rows, &held, &config, now, &*publisher, Some(&health)).await;
    (rows, marks, started.elapsed())
}

/// Whether claiming ahead pays: only when publishing a batch takes a noticeable share of
/// the database work of a batch (its mark and the next claim). Claiming ahead costs a
/// second open transaction and a claim that runs beside the batch in flight (measured on
/// PostgreSQL with a no-op publisher: about 5–8 % of the drain throughput), and it gains
/// the overlap of the publishing with the database work. So a relay whose broker answers
/// within an eighth of the database time of a batch runs its batches one after the other;
/// it goes back to claiming ahead as soon as a batch's publishing takes longer.
#[derive(Debug, Clone, Copy)]
struct Overlap {
    publish: Duration,
    database: Duration,
}

impl Overlap {
    /// Before anything is measured: claim ahead.
    const UNKNOWN: Self = Self {
        publish: Duration::MAX,
        database: Duration::ZERO,
    };

    fn claim_ahead(self) -> bool {
        self.publish.saturating_mul(8) >= self.database
    }
}

/// When a pipelined run stops claiming further batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Until {
    /// [`Relay::drain`]: until a claim finds nothing or a batch changes no row.
    Drained,
    /// [`Relay::run`]: also after a batch that was not full (the relay then waits for the
    /// next poll or wake-up).
    NotFull,
}

/// A batch in flight: its transaction, its span and when it was claimed.
struct InFlight {
    batch: LockedBatch,
    span: tracing::Span,
    started: Instant,
    /// Claimed while the batch before the one in flight was being marked (side by side):
    /// that batch's outcomes were not visible to the claim either.
    beside_mark: bool,
}

/// A published batch waiting for its marks to be written.
struct Published {
    flight: InFlight,
    marks: Vec<Mark>,
}

/// What a pipelined run did.
pub(super) struct PipelineReport {
    /// The batches marked.
    pub(super) total: RelayReport,
    /// Whether the last batch was full and changed rows: there is probably more to do now.
    pub(super) more: bool,
}

/// `(aggregate_type, aggregate_id)`.
type Key = (String, String);

impl<P: Publisher + 'static> Core<P> {
    /// Whether batches are pipelined: configured, on PostgreSQL or MariaDB, without the
    /// head-of-aggregate check (which would see the batch in flight as earlier rows), and
    /// with a pool that has a second connection for it.
    pub(super) fn pipelined(&self) -> bool {
        let backend = self.store.backend();
        if !self.config.pipeline
            || backend == DbBackend::Sqlite
            || (self.config.check_head && self.config.ordering == Ordering::PerAggregate)
        {
            return false;
        }
        self.spare_connections() >= 2
    }

    /// Connections of the pool beyond the one the `LISTEN` task keeps.
    fn spare_connections(&self) -> u32 {
        let backend = self.store.backend();
        let listener = backend == DbBackend::Postgres
            && self.config.listen
            && !self.db.transaction_pooling()
            && self.outbox.notify_channel().is_some();
        let available: u32 = match backend {
            #[cfg(feature = "postgres")]
            DbBackend::Postgres => self
                .db
                .connection()
                .get_postgres_connection_pool()
                .options()
                .get_max_connections(),
            #[cfg(feature = "mysql")]
            DbBackend::MySql => self
                .db
                .connection()
                .get_mysql_connection_pool()
                .options()
                .get_max_connections(),
            _ => 0,
        };
        available.saturating_sub(u32::from(listener))
    }

    /// Runs pipelined batches until `until` says stop, `shutdown` is cancelled or a lease
    /// heartbeat is due. Every transaction is closed on return: the batch in flight is
    /// marked, a batch claimed but not published yet is rolled back (its rows stay
    /// pending, untouched).
    ///
    /// # Errors
    /// The first [`RelayError`]; the batches marked before it stay marked.
    pub(super) async fn run_pipelined(
        &self,
        leases: &mut Leases,
        until: Until,
        shutdown: Option<&CancellationToken>,
    ) -> Result<PipelineReport, RelayError> {
        if leases.refresh_due(self) {
            leases.refresh(self).await?;
        }
        let this = self;
        let leases = &*leases;
        // A third connection: the mark of the batch before runs beside the claim ahead.
        let side_by_side = this.spare_connections() >= 3;
        let mut total = RelayReport::default();
        let mut more = false;
        let mut failure: Option<RelayError> = None;
        let mut previous: Option<Published> = None;
        // Aggregates whose rows did not all get through in the previous batch, and in the
        // one before it.
        let mut stopped: HashSet<Key> = HashSet::new();
        let mut stopped_before: HashSet<Key> = HashSet::new();
        let mut overlap = Overlap::UNKNOWN;
        let mut current = this.claim_in_flight(false, false, None).await?;
        while let Some(mut flight) = current.take() {
            if !flight.beside_mark {
                stopped_before.clear();
            }
            let held = behind([&stopped, &stopped_before], &flight.batch.rows);
            let full = flight.batch.rows.len() >= this.config.batch_size;
            let go_on = (full || until == Until::Drained)
                && !leases.refresh_due(this)
                && !shutdown.is_some_and(CancellationToken::is_cancelled);
            let ahead = overlap.claim_ahead();
            // Past what the claim ahead may start: the batch about to be published, and the
            // batch before it when its mark runs beside the claim.
            let publishing = Batch::of(&flight.batch.rows);
            let marking = previous.as_ref().and_then(Batch::settled);
            // The publishing runs as a task of its own, so that its CPU work (encoding,
            // the client) and the database side's (decoding the next claim) can use two
            // cores.
            let publish = tokio::spawn(
                publish_owned(
                    Arc::clone(&this.publisher),
                    this.config.clone(),
                    Arc::clone(&this.health),
                    this.now(),
                    std::mem::take(&mut flight.batch.rows),
                    held,
                )
                .instrument(flight.span.clone()),
            );
            let database = async {
                let started = Instant::now();
                let claim_next = ahead && go_on;
                let (finished, next) = match previous.take() {
                    Some(published) if claim_next && side_by_side => {
                        // A batch being marked that leaves rows pending: from the start.
                        let past = marking.and_then(|m| Batch::past(publishing, Some(m)));
                        let (finished, next) = tokio::join!(
                            this.finish_in_flight(published),
                            this.claim_in_flight(true, true, past)
                        );
                        // A batch that changed nothing ends the run (as below): the batch
                        // claimed beside it is dropped, which rolls its transaction back.
                        let progress = finished.as_ref().is_ok_and(BatchReport::made_progress);
                        (Some(finished), progress.then_some(next))
                    }
                    Some(published) => {
                        let finished = this.finish_in_flight(published).await;
                        let progress = finished.as_ref().is_ok_and(BatchReport::made_progress);
                        // Its mark is committed by then: only the batch being published
                        // is in flight (from the start when the mark left rows pending).
                        let past = marking.and_then(|_| Batch::past(publishing, None));
                        let next = if claim_next && progress {
                            Some(this.claim_in_flight(true, false, past).await)
                        } else {
                            None
                        };
                        (Some(finished), next)
                    }
                    None if claim_next => (
                        None,
                        Some(
                            this.claim_in_flight(true, false, Batch::past(publishing, None))
                                .await,
                        ),
                    ),
                    None => (None, None),
                };
                (finished, next, started.elapsed())
            };
            let (published, (finished, next, database_time)) = tokio::join!(publish, database);
            let marks = match published {
                Ok((rows, marks, publish_time)) => {
                    flight.batch.rows = rows;
                    overlap.publish = publish_time;
                    if ahead {
                        overlap.database = database_time;
                    }
                    marks
                }
                // A publisher that panics takes the relay down as it would without
                // pipelining; the open transactions roll back.
                Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
                Err(error) => {
                    return Err(RelayError::Database(sea_orm::DbErr::Custom(format!(
                        "the publishing task was cancelled: {error}"
                    ))));
                }
            };
            match finished {
                Some(Ok(report)) => total.add(&report),
                Some(Err(error)) => failure = Some(error),
                None => {}
            }
            stopped_before =
                std::mem::replace(&mut stopped, this.not_through(&flight.batch.rows, &marks));
            more = full
                && marks
                    .iter()
                    .any(|mark| !matches!(mark, Mark::Untouched | Mark::Snoozed { .. }));
            previous = Some(Published { flight, marks });
            match next {
                Some(Ok(next)) => current = next,
                Some(Err(error)) => {
                    failure.get_or_insert(error);
                }
                None if !ahead && go_on && failure.is_none() => {
                    // One batch after the other: mark this one, then claim the next.
                    let started = Instant::now();
                    if let Some(published) = previous.take() {
                        match this.mark_then_claim(published, &mut total).await {
                            Ok(next) => current = next,
                            Err(error) => failure = Some(error),
                        }
                    }
                    overlap.database = started.elapsed();
                    // Nothing of this batch (or the one before) waits for the next one any
                    // more.
                    stopped.clear();
                    stopped_before.clear();
                }
                None => {}
            }
            if failure.is_some() {
                // A batch claimed but not published: dropping its transaction rolls it back.
                current = None;
            }
        }
        if let Some(published) = previous.take() {
            match this.finish_in_flight(published).await {
                Ok(report) => total.add(&report),
                Err(error) => {
                    failure.get_or_insert(error);
                }
            }
        }
        match failure {
            Some(error) => Err(error),
            None => Ok(PipelineReport { total, more }),
        }
    }

    /// Claims a batch (`ahead`: while another is in flight, see [`Relay::claim_locked`];
    /// `beside_mark`: while the batch before the one in flight is being marked; `past`:
    /// starting past the batches in flight).
    async fn claim_in_flight(
        &self,
        ahead: bool,
        beside_mark: bool,
        past: Option<PastInFlight>,
    ) -> Result<Option<InFlight>, RelayError> {
        let span = self.batch_span();
        let started = Instant::now();
        let batch = self
            .claim_locked(ahead, past)
            .instrument(span.clone())
            .await?;
        Ok(batch.map(|batch| InFlight {
            batch,
            span,
            started,
            beside_mark,
        }))
    }

    /// Marks `published` (adding its report to `total`) and, when it changed rows, claims
    /// the next batch: a batch of a pipelined run without the claim ahead.
    async fn mark_then_claim(
        &self,
        published: Published,
        total: &mut RelayReport,
    ) -> Result<Option<InFlight>, RelayError> {
        let report = self.finish_in_flight(published).await?;
        total.add(&report);
        if !report.made_progress() {
            return Ok(None);
        }
        self.claim_in_flight(false, false, None).await
    }

    async fn finish_in_flight(&self, published: Published) -> Result<BatchReport, RelayError> {
        let Published { flight, marks } = published;
        let InFlight {
            batch,
            span,
            started,
            ..
        } = flight;
        let report = self
            .finish_locked(batch, &marks)
            .instrument(span.clone())
            .await?;
        self.record_batch(&span, &report, started);
        Ok(report)
    }

    /// The aggregates of `rows` that did not all get through: a row left pending (retry,
    /// held back) or dead under [`DeadLetterPolicy::Block`]. Empty when order does not
    /// matter.
    fn not_through(&self, rows: &[ClaimedRow], marks: &[Mark]) -> HashSet<Key> {
        if self.config.ordering != Ordering::PerAggregate {
            return HashSet::new();
        }
        let block = self.config.dead_letter_policy == DeadLetterPolicy::Block;
        rows.iter()
            .zip(marks)
            .filter(|(_, mark)| match mark {
                Mark::Published => false,
                Mark::Dead { .. } | Mark::Failed { .. } => block,
                Mark::Retry { .. } | Mark::Snoozed { .. } | Mark::Untouched => true,
            })
            .map(|(row, _)| {
                let (aggregate_type, aggregate_id) = row.key();
                (aggregate_type.to_owned(), aggregate_id.to_owned())
            })
            .collect()
    }
}

/// A batch in flight, for a claim that starts past it (see [`PastInFlight`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Batch {
    /// Its highest `seq`.
    last: i64,
    /// Its row with the lowest `seq` (its probe when it is being marked).
    first: i64,
    rows: i64,
}

impl Batch {
    fn of(rows: &[ClaimedRow]) -> Option<Self> {
        Some(Self {
            last: rows.iter().map(|row| row.seq).max()?,
            first: rows.iter().map(|row| row.seq).min()?,
            rows: i64::try_from(rows.len()).ok()?,
        })
    }

    /// A published batch whose every row leaves `pending` when its mark commits
    /// (published, dead or failed): the claim beside its mark can tell from any one row
    /// whether it sees the mark. `None` when a row stays pending (a retry, a row held
    /// back): the claim then starts from the beginning.
    fn settled(published: &Published) -> Option<Self> {
        let settled = published.marks.iter().all(|mark| {
            matches!(
                mark,
                Mark::Published | Mark::Dead { .. } | Mark::Failed { .. }
            )
        });
        if !settled || published.marks.len() != published.flight.batch.rows.len() {
            return None;
        }
        Self::of(&published.flight.batch.rows)
    }

    /// Where a claim ahead of `publishing` (`self`), beside the mark of `marking`, starts.
    fn past(publishing: Option<Self>, marking: Option<Self>) -> Option<PastInFlight> {
        let publishing = publishing?;
        Some(PastInFlight {
            last: marking.map_or(publishing.last, |m| m.last.max(publishing.last)),
            publishing: publishing.rows,
            marking: marking.map(|m| (m.first, m.rows)),
        })
    }
}

/// The rows of `rows` whose aggregate is in one of the `stopped` sets: they wait for a
/// later batch.
fn behind(stopped: [&HashSet<Key>; 2], rows: &[ClaimedRow]) -> HashSet<i64> {
    if stopped.iter().all(|set| set.is_empty()) {
        return HashSet::new();
    }
    rows.iter()
        .filter(|row| {
            let (aggregate_type, aggregate_id) = row.key();
            let key = (aggregate_type.to_owned(), aggregate_id.to_owned());
            stopped.iter().any(|set| set.contains(&key))
        })
        .map(|row| row.seq)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_behind_an_aggregate_stopped_in_either_batch_before_are_held() {
        use crate::sql::Unreadable;
        let row = |seq: i64, aggregate_id: &str| ClaimedRow {
            seq,
            attempts: 0,
            worker_key: None,
            retryable: true,
            envelope: Err(Unreadable {
                aggregate_type: "order".to_owned(),
                aggregate_id: aggregate_id.to_owned(),
                ..Unreadable::lent()
            }),
        };
        let rows = [row(10, "a"), row(11, "b"), row(12, "c"), row(13, "a")];
        let key = |id: &str| ("order".to_owned(), id.to_owned());
        let none = HashSet::new();
        assert!(behind([&none, &none], &rows).is_empty());
        // `a` stopped in the batch in flight, `c` in the one marked beside the claim.
        let in_flight = HashSet::from([key("a")]);
        let marked = HashSet::from([key("c")]);
        assert_eq!(
            behind([&in_flight, &marked], &rows),
            HashSet::from([10, 12, 13])
        );
        assert_eq!(behind([&none, &marked], &rows), HashSet::from([12]));
    }

    #[test]
    fn a_claim_ahead_starts_past_both_batches_in_flight() {
        let batch = |first, last, rows| Some(Batch { last, first, rows });
        assert_eq!(
            Batch::past(None, batch(1, 10, 10)),
            None,
            "nothing published"
        );
        assert_eq!(
            Batch::past(batch(11, 20, 10), None),
            Some(PastInFlight {
                last: 20,
                publishing: 10,
                marking: None
            })
        );
        // The batch being marked may reach higher than the one published (a claim from the
        // start after a straggler): the claim starts past both.
        assert_eq!(
            Batch::past(batch(3, 20, 10), batch(21, 30, 9)),
            Some(PastInFlight {
                last: 30,
                publishing: 10,
                marking: Some((21, 9))
            })
        );
    }

    #[test]
    fn claims_ahead_only_while_publishing_takes_an_eighth_of_the_database_work() {
        assert!(Overlap::UNKNOWN.claim_ahead(), "before any measurement");
        let overlap = |publish_ms: u64, database_ms: u64| Overlap {
            publish: Duration::from_millis(publish_ms),
            database: Duration::from_millis(database_ms),
        };
        assert!(!overlap(0, 10).claim_ahead(), "a no-op publisher");
        assert!(!overlap(1, 10).claim_ahead(), "1/10 of the database work");
        assert!(overlap(2, 16).claim_ahead(), "exactly 1/8");
        assert!(overlap(40, 10).claim_ahead(), "a slow broker");
    }
}
