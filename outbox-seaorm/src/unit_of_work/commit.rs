//! Committing a unit of work: the before-commit hook that maps the raised events to
//! contracts and writes them as outbox rows on the same transaction, then `COMMIT` and the
//! wake-up of listening relays.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use chrono::{DateTime, Utc};
use outbox_core::Envelope;
use outbox_core::mapping::{ContractMapper, ContractSink};
use outbox_core::schedule::Schedule;
use sea_orm::{ConnectionTrait, DatabaseTransaction, DbBackend};
use tracing::Instrument as _;
use uuid::Uuid;

use super::unique::{self, AlreadyEnqueued, Claim};
use super::{Raised, RaisedAt, UnitOfWork};
use crate::config::{Outbox, WriteMode};
use crate::error::{CommitError, ScheduleProblem};
use crate::limits::MAX_DUE;
use crate::sql::{dialect, emit, insert, scheduled};
use crate::status::MAX_KEY_CHARS;
use crate::trace::TraceContext;
use crate::wakeup::Target;

/// What a successful [`UnitOfWork::commit`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CommitReport {
    /// Domain events raised.
    pub events: usize,
    /// Envelopes written (contracts emitted by the mapper): outbox rows, or logical
    /// messages in [`WriteMode::Message`].
    pub rows: usize,
    /// Statements that wrote them (multi-row `INSERT`s, or message chunks).
    pub chunks: usize,
    /// The wake-up of listening relays this commit requested (PostgreSQL).
    pub wakeup: CommitWakeup,
    /// The message ids of the rows due now, in insert order (what a
    /// [`FastPath`](crate::relay::FastPath) publishes).
    pub message_ids: Vec<Uuid>,
    /// The message ids of the rows due later, written to the scheduled table (see
    /// [`crate::schedule`]), in raise order: cancel or reschedule them by these.
    pub scheduled: Vec<Uuid>,
    /// Rows of unique jobs ([`Unique`](crate::job::Unique)) not written because another job
    /// of their key still waits (or its window has not passed): not an error.
    pub already_enqueued: Vec<AlreadyEnqueued>,
}

/// The wake-up of listening relays a commit requested: [`CommitReport::wakeup`]. See
/// [`crate::wakeup`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CommitWakeup {
    /// None: no outbox row was written (by this unit of work or one nested in it), the
    /// backend is not PostgreSQL, notifications are off
    /// ([`PostgresWakeup::Off`](crate::PostgresWakeup::Off) or no channel), or the unit of
    /// work began on a plain transaction.
    None,
    /// `pg_notify` ran inside the transaction
    /// ([`PostgresWakeup::InTransaction`](crate::PostgresWakeup::InTransaction)): delivered
    /// with the commit.
    InTransaction,
    /// The after-commit notifier was signalled
    /// ([`PostgresWakeup::AfterCommit`](crate::PostgresWakeup::AfterCommit)): a coalesced
    /// `NOTIFY` follows within `min_interval` plus a round trip, best effort.
    AfterCommit,
    /// A unit of work nested in another one: the enclosing unit of work requests the wake-up
    /// after its own `COMMIT`.
    Enclosing,
}

impl CommitWakeup {
    /// Whether a wake-up was requested (anything but [`None`](Self::None)).
    pub fn is_requested(self) -> bool {
        self != Self::None
    }
}

impl<E: 'static> UnitOfWork<E> {
    /// Maps the raised events to contracts, writes them to the outbox, commits, and requests
    /// a wake-up of listening relays on PostgreSQL ([`crate::wakeup`];
    /// [`CommitReport::wakeup`] says which). See the [module documentation](crate::unit_of_work).
    ///
    /// A failed after-commit `NOTIFY` is never returned: it is logged, counted in
    /// [`Outbox::wakeup_stats`], and relays find the rows at their next poll.
    ///
    /// # Errors
    /// A [`CommitError`]; except for [`CommitError::Commit`], the transaction was rolled back
    /// and nothing was written. [`CommitError::StatementFailed`] when a statement run through
    /// the unit of work failed, even if the caller caught that error.
    pub async fn commit(self) -> Result<CommitReport, CommitError> {
        let UnitOfWork {
            txn,
            outbox,
            mapper,
            events,
            correlation_id,
            causation_id,
            trace,
            headers,
            wakeup: wakeup_target,
            nested_wrote,
            failed,
        } = self;
        let failed = failed
            .into_inner()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(error) = failed {
            tracing::warn!(%error, "unit of work not committed: a statement run through it failed");
            if let Err(rollback) = txn.rollback().await {
                tracing::warn!(error = %rollback, "rollback after a failed statement failed");
            }
            return Err(CommitError::StatementFailed { error });
        }
        let events = events
            .into_inner()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let span = tracing::info_span!(
            "outbox.commit",
            outbox.table = %outbox.outbox_table(),
            outbox.events = events.len(),
            outbox.rows = tracing::field::Empty,
            outbox.chunks = tracing::field::Empty,
            outbox.correlation_id = %correlation_id,
        );
        async move {
            let stamp = Stamp {
                correlation_id,
                causation_id,
                trace,
                headers,
            };
            let backend = ConnectionTrait::get_database_backend(txn.get());
            let prepared = match prepare_rows(backend, &outbox, mapper.get(), &events, stamp) {
                Ok(prepared) => prepared,
                Err(error) => {
                    tracing::debug!(%error, "unit of work rolled back before commit");
                    if let Err(rollback) = txn.rollback().await {
                        tracing::warn!(error = %rollback, "rollback after a failed commit failed");
                    }
                    return Err(error);
                }
            };
            let mut report = CommitReport {
                events: events.len(),
                rows: prepared.message_ids.len() + prepared.scheduled_ids.len(),
                chunks: 0,
                wakeup: CommitWakeup::None,
                message_ids: prepared.message_ids,
                scheduled: prepared.scheduled_ids,
                already_enqueued: Vec::new(),
            };
            // The rows and the COMMIT go out on a task of their own: a caller dropped here
            // leaves the transaction committed or rolled back, never half-way.
            let in_task = tracing::Span::current();
            let task_outbox = outbox.clone();
            let rows = Rows {
                write: prepared.write,
                message_ids: report.message_ids.clone(),
                later: prepared.scheduled,
                later_ids: report.scheduled.clone(),
                claims: prepared.claims,
                created_at: prepared.created_at,
            };
            let written = txn
                .finish(move |txn| {
                    write_and_commit(txn, task_outbox, backend, rows).instrument(in_task)
                })
                .await
                .map_err(CommitError::Commit)??;
            report.chunks = written.chunks;
            report.wakeup = written.wakeup;
            if !written.refused.is_empty() {
                let refused: std::collections::HashSet<Uuid> =
                    written.refused.iter().map(|row| row.message_id).collect();
                report.message_ids.retain(|id| !refused.contains(id));
                report.scheduled.retain(|id| !refused.contains(id));
                report.rows -= refused.len();
                report.already_enqueued = written.refused;
            }
            // Rows due later wake no relay: they are not claimable yet.
            let wrote = !report.message_ids.is_empty()
                || nested_wrote.is_some_and(|flag| flag.load(Ordering::Acquire));
            // Only a polling relay listens; the other modes leave it nothing to poll.
            if wrote && outbox.write_mode().keeps_rows() {
                match wakeup_target {
                    Target::None => {}
                    Target::Pool(db) => {
                        outbox.notifier().signal(db);
                        report.wakeup = CommitWakeup::AfterCommit;
                    }
                    Target::Enclosing(flag) => {
                        flag.store(true, Ordering::Release);
                        report.wakeup = CommitWakeup::Enclosing;
                    }
                }
            }
            let span = tracing::Span::current();
            span.record("outbox.rows", report.rows);
            span.record("outbox.chunks", report.chunks);
            tracing::debug!(
                rows = report.rows,
                chunks = report.chunks,
                "unit of work committed"
            );
            Ok(report)
        }
        .instrument(span)
        .await
    }
}

/// The metadata a unit of work puts on every envelope.
struct Stamp {
    correlation_id: Uuid,
    causation_id: Option<Uuid>,
    trace: Option<TraceContext>,
    headers: BTreeMap<String, String>,
}

impl Stamp {
    fn apply(&self, envelope: &mut Envelope) {
        envelope.correlation_id = Some(self.correlation_id);
        envelope.causation_id = self.causation_id;
        if let Some(trace) = &self.trace {
            envelope.traceparent = Some(trace.traceparent().to_owned());
            envelope.tracestate = trace.tracestate().map(str::to_owned);
        }
        for (name, value) in &self.headers {
            envelope
                .headers
                .entry(name.clone())
                .or_insert_with(|| value.clone());
        }
    }
}

/// What a commit writes, in its outbox's [`WriteMode`].
enum PreparedWrite {
    /// Outbox rows (table mode).
    Rows(Vec<insert::PreparedRow>),
    /// Logical messages (message mode).
    Messages(Vec<emit::PreparedMessage>),
}

impl PreparedWrite {
    fn is_empty(&self) -> bool {
        match self {
            Self::Rows(rows) => rows.is_empty(),
            Self::Messages(messages) => messages.is_empty(),
        }
    }
}

/// The envelopes of a commit, ready to write, and their message ids.
struct PreparedRows {
    write: PreparedWrite,
    message_ids: Vec<Uuid>,
    /// Rows due later, for the scheduled table.
    scheduled: Vec<insert::PreparedRow>,
    scheduled_ids: Vec<Uuid>,
    /// The keys of the unique jobs' rows.
    claims: Vec<Claim>,
    /// When the rows were prepared (the unique keys' time).
    created_at: DateTime<Utc>,
}

/// An envelope of the commit, with when it is due and the raise time of its event.
struct Emitted {
    envelope: Envelope,
    schedule: Option<Schedule>,
    raised_at: DateTime<Utc>,
}

/// A row due later: when, and its key.
struct Later {
    due: DateTime<Utc>,
    key: Option<String>,
}

/// When `envelope` is due under `schedule`, and its key: `None` when due at once (a time
/// not after `created_at`, the commit's time). Checks the key even then.
fn due_later(
    envelope: &Envelope,
    schedule: Schedule,
    raised_at: DateTime<Utc>,
    created_at: DateTime<Utc>,
) -> Result<Option<Later>, CommitError> {
    let refuse = |problem| CommitError::Schedule {
        event_type: envelope.event_type.clone(),
        message_id: envelope.message_id,
        problem,
    };
    if let Some(key) = schedule.key_str() {
        if key.is_empty() {
            return Err(refuse(ScheduleProblem::EmptyKey));
        }
        let length = key.chars().count();
        if length > MAX_KEY_CHARS {
            return Err(refuse(ScheduleProblem::KeyTooLong {
                length,
                max: MAX_KEY_CHARS,
            }));
        }
    }
    let due = schedule
        .due()
        .resolve(raised_at)
        .filter(|due| *due <= MAX_DUE)
        .ok_or_else(|| refuse(ScheduleProblem::DueOutOfRange { max: MAX_DUE }))?;
    if due <= created_at {
        return Ok(None);
    }
    Ok(Some(Later {
        due,
        key: schedule.key_str().map(str::to_owned),
    }))
}

/// Maps the raised events to envelopes, stamps them, and prepares their rows: those due
/// now for the outbox (rows or messages), those due later for the scheduled table.
fn prepare_rows<E>(
    backend: DbBackend,
    outbox: &Outbox,
    mapper: &dyn ContractMapper<E>,
    events: &[Raised<E>],
    stamp: Stamp,
) -> Result<PreparedRows, CommitError> {
    let mut emitted = Vec::with_capacity(events.len());
    for (index, raised) in events.iter().enumerate() {
        let clock = RaisedAt(raised.at);
        let mut sink = ContractSink::new(outbox.envelope_config(), &clock);
        mapper
            .map(&raised.event, &mut sink)
            .map_err(|source| CommitError::Map {
                index,
                event_type: std::any::type_name::<E>(),
                source,
            })?;
        for (envelope, own) in sink.into_scheduled_envelopes() {
            emitted.push(Emitted {
                envelope,
                schedule: own.or_else(|| raised.schedule.clone()),
                raised_at: raised.at,
            });
        }
    }
    let created_at = outbox.clock().now();
    let message_mode = matches!(outbox.write_mode(), WriteMode::Message { .. });
    let mut message_ids = Vec::with_capacity(emitted.len());
    let mut rows = Vec::new();
    let mut messages = Vec::new();
    let mut scheduled = Vec::new();
    let mut scheduled_ids = Vec::new();
    let mut claims = Vec::new();
    for Emitted {
        mut envelope,
        schedule,
        raised_at,
    } in emitted
    {
        stamp.apply(&mut envelope);
        claims.extend(unique::claim_of(outbox, &envelope, created_at));
        let later = match schedule {
            Some(schedule) => due_later(&envelope, schedule, raised_at, created_at)?,
            None => None,
        };
        if let Some(Later { due, key }) = later {
            if message_mode {
                return Err(CommitError::Schedule {
                    event_type: envelope.event_type.clone(),
                    message_id: envelope.message_id,
                    problem: ScheduleProblem::MessageMode,
                });
            }
            scheduled_ids.push(envelope.message_id);
            scheduled.push(scheduled::prepare_scheduled(
                backend, outbox, envelope, created_at, due, key,
            )?);
        } else if message_mode {
            message_ids.push(envelope.message_id);
            messages.push(emit::prepare(&envelope)?);
        } else {
            message_ids.push(envelope.message_id);
            rows.push(insert::prepare(backend, outbox, envelope, created_at)?);
        }
    }
    let write = if message_mode {
        PreparedWrite::Messages(messages)
    } else {
        PreparedWrite::Rows(rows)
    };
    let writes_nothing = write.is_empty() && scheduled.is_empty();
    if !outbox.write_mode().runs_on(backend) && !writes_nothing {
        return Err(CommitError::WriteModeUnsupported {
            mode: outbox.write_mode().as_str(),
            backend: dialect::name(backend),
        });
    }
    Ok(PreparedRows {
        write,
        message_ids,
        scheduled,
        scheduled_ids,
        claims,
        created_at,
    })
}

/// What a commit writes on its transaction.
struct Rows {
    write: PreparedWrite,
    /// The message ids of `write`, in order.
    message_ids: Vec<Uuid>,
    /// Rows due later, and their message ids.
    later: Vec<insert::PreparedRow>,
    later_ids: Vec<Uuid>,
    /// The unique jobs' keys.
    claims: Vec<Claim>,
    created_at: DateTime<Utc>,
}

/// What [`write_and_commit`] did.
struct Written {
    /// Statements that wrote the rows.
    chunks: usize,
    /// The wake-up that ran inside the transaction.
    wakeup: CommitWakeup,
    /// Rows of unique jobs kept out.
    refused: Vec<AlreadyEnqueued>,
}

/// Takes the unique jobs' keys, writes the envelopes (rows in chunks, or messages) and
/// commits; rolls back when a write fails.
async fn write_and_commit(
    txn: DatabaseTransaction,
    outbox: Outbox,
    backend: DbBackend,
    rows: Rows,
) -> Result<Written, CommitError> {
    let Rows {
        mut write,
        mut message_ids,
        mut later,
        later_ids,
        claims,
        created_at,
    } = rows;
    let refused = if claims.is_empty() {
        Vec::new()
    } else {
        match unique::take_keys(&txn, &outbox, claims, created_at).await {
            Ok(refused) => refused,
            Err(error) => {
                if let Err(rollback) = txn.rollback().await {
                    tracing::warn!(error = %rollback, "rollback after a failed commit failed");
                }
                return Err(CommitError::Database(error));
            }
        }
    };
    if !refused.is_empty() {
        let out: std::collections::HashSet<Uuid> =
            refused.iter().map(|row| row.message_id).collect();
        if let PreparedWrite::Rows(rows) = &mut write {
            let kept: Vec<bool> = message_ids.iter().map(|id| !out.contains(id)).collect();
            let mut keep = kept.iter();
            rows.retain(|_| keep.next().copied().unwrap_or(true));
            message_ids.retain(|id| !out.contains(id));
        }
        let mut keep = later_ids.iter().map(|id| !out.contains(id));
        later.retain(|_| keep.next().unwrap_or(true));
    }
    let notify_channel = outbox
        .in_transaction_channel()
        .filter(|_| backend == DbBackend::Postgres && outbox.write_mode().keeps_rows());
    let written = match write {
        _ if write.is_empty() => Ok((0, CommitWakeup::None)),
        PreparedWrite::Rows(rows) => {
            let inserted = insert::insert(&txn, &outbox, rows, notify_channel).await;
            let removed = match (&inserted, outbox.write_mode()) {
                (
                    Ok(_),
                    WriteMode::Table {
                        remove_after_insert: true,
                    },
                ) => insert::remove(&txn, &outbox, backend, &message_ids).await,
                _ => Ok(()),
            };
            inserted.and_then(|chunks| {
                removed?;
                let wakeup = match notify_channel {
                    Some(_) => CommitWakeup::InTransaction,
                    None => CommitWakeup::None,
                };
                Ok((chunks, wakeup))
            })
        }
        PreparedWrite::Messages(messages) => {
            let prefix = outbox.write_mode().message_prefix().unwrap_or_default();
            emit::emit(&txn, prefix, messages, outbox.chunk_bytes())
                .await
                .map(|statements| (statements, CommitWakeup::None))
        }
    };
    let written = match written {
        Ok((chunks, wakeup)) if !later.is_empty() => {
            scheduled::insert_scheduled(&txn, &outbox, later)
                .await
                .map(|more| (chunks + more, wakeup))
        }
        other => other,
    };
    match written {
        Ok((chunks, wakeup)) => {
            txn.commit().await.map_err(CommitError::Commit)?;
            Ok(Written {
                chunks,
                wakeup,
                refused,
            })
        }
        Err(error) => {
            tracing::debug!(%error, "unit of work rolled back before commit");
            if let Err(rollback) = txn.rollback().await {
                tracing::warn!(error = %rollback, "rollback after a failed commit failed");
            }
            Err(CommitError::Database(error))
        }
    }
}
