//! Periodic jobs: a job enqueued on a cron schedule ([`Periodic`]), **once per period**
//! across every relay of the outbox and across restarts (book: The job queue, Periodic
//! jobs).
//!
//! Each periodic job has a row in `<outbox>_periodic` (its schedule, next run, last run).
//! Every [schedule interval](crate::relay::RelayBuilder::schedule_interval), each relay —
//! the polling relay and the log relay alike — looks at each job in a transaction of its
//! own:
//!
//! 1. it locks the job's row (`FOR UPDATE`; SQLite: the transaction began `IMMEDIATE`);
//! 2. no row yet: it writes one due at the schedule's next time after now — a new job's
//!    first run is its first time after the relay saw it, never at once;
//! 3. the schedule changed: the next run is computed again from now;
//! 4. the next run is due: it inserts the run's outbox row (its contract built by the job's
//!    function from the run's time, `occurred_at` that time) and moves the row to the
//!    schedule's next time after now, in the same transaction.
//!
//! A second relay waits for the first's lock and then finds the row moved on: one run per
//! period. A relay that crashes before its commit wrote nothing: the next one enqueues the
//! run. **No catch-up storm**: after downtime that missed several periods, one run is
//! enqueued, for the latest missed time, unless the job asks for more with
//! [`Periodic::catch_up`] (then up to that many more of the latest missed times, oldest
//! first).
//!
//! Periodic jobs need the outbox table: message mode refuses them at build
//! ([`ConfigError::PeriodicInMessageMode`](crate::ConfigError::PeriodicInMessageMode)). A run
//! whose contract cannot be written (over the payload limit) fails the look as a database
//! error would: logged, retried at the next interval, nothing advanced.

use chrono::{DateTime, Utc};
use sea_orm::{DbBackend, DbErr, SqliteTransactionMode, TransactionOptions};

pub use crate::config::Periodic;
use crate::config::WriteMode;
use crate::limits::MAX_DUE;
use crate::sql::Store;
use crate::sql::insert;
use crate::sql::periodic::LastRun;
use crate::transaction::Pool;

/// The times of the runs due at `now` for a job whose next run was `next_run_at`: the
/// latest time the schedule names at or before `now`, and before it up to
/// [`catch_up`](Periodic::catch_up) more not before `next_run_at`; oldest first. Empty when
/// nothing is due.
pub(crate) fn runs_due(
    job: &Periodic,
    next_run_at: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Vec<DateTime<Utc>> {
    if next_run_at > now {
        return Vec::new();
    }
    let mut runs = Vec::new();
    let mut at = job
        .previous_at_or_before(now)
        .filter(|at| *at >= next_run_at);
    while let Some(run) = at {
        runs.push(run);
        if runs.len() > job.catch_up_runs() as usize {
            break;
        }
        at = job
            .previous_before(run)
            .filter(|earlier| *earlier >= next_run_at);
    }
    if runs.is_empty() {
        // The schedule names nothing between its stored next run and now (it changed under
        // us, or the stored time is not one of its times): that stored time is the run.
        runs.push(next_run_at);
    }
    runs.reverse();
    runs
}

/// Looks at every periodic job of `store`'s outbox at `now` (see the
/// [module documentation](self)). Returns the number of runs enqueued.
pub(crate) async fn enqueue_due(
    db: &Pool,
    store: &Store,
    now: DateTime<Utc>,
) -> Result<u64, DbErr> {
    let mut enqueued = 0;
    for job in store.outbox().periodic_jobs() {
        enqueued += enqueue_one(db, store, job, now).await?;
    }
    if enqueued > 0 {
        tracing::debug!(runs = enqueued, "periodic jobs enqueued");
    }
    Ok(enqueued)
}

/// One job's look, in one transaction.
async fn enqueue_one(
    db: &Pool,
    store: &Store,
    job: &Periodic,
    now: DateTime<Utc>,
) -> Result<u64, DbErr> {
    let backend = store.backend();
    // SQLite: take the write lock first (one writer at a time, no upgrade deadlock).
    let options = TransactionOptions {
        sqlite_transaction_mode: (backend == DbBackend::Sqlite)
            .then_some(SqliteTransactionMode::Immediate),
        ..TransactionOptions::default()
    };
    let txn = crate::transaction::begin_whole(db, options).await?;
    let next = job.next_after(now).unwrap_or(MAX_DUE);
    if backend == DbBackend::MySql {
        // The row first, exclusively locked (see `sql/periodic/start.rs`).
        store
            .start_periodic(&txn, job.name(), job.schedule(), next, now)
            .await?;
    }
    let state = store.lock_periodic(&txn, job.name()).await?;
    let Some(state) = state else {
        store
            .start_periodic(&txn, job.name(), job.schedule(), next, now)
            .await?;
        txn.commit().await?;
        return Ok(0);
    };
    if state.schedule != job.schedule() {
        store
            .advance_periodic(&txn, job.name(), job.schedule(), next, None, now)
            .await?;
        txn.commit().await?;
        return Ok(0);
    }
    let runs = runs_due(job, state.next_run_at, now);
    let Some(&last_at) = runs.last() else {
        txn.commit().await?;
        return Ok(0);
    };
    let outbox = store.outbox();
    let mut rows = Vec::with_capacity(runs.len());
    let mut message_ids = Vec::with_capacity(runs.len());
    for at in &runs {
        let unwritable = |error: &dyn std::fmt::Display| {
            DbErr::Custom(format!(
                "periodic job `{}`: its run at {at} cannot be written: {error}",
                job.name()
            ))
        };
        let envelope = job
            .envelope(outbox.envelope_config(), *at)
            .map_err(|error| unwritable(&error))?;
        message_ids.push(envelope.message_id);
        rows.push(
            insert::prepare(backend, outbox, envelope, now).map_err(|error| unwritable(&error))?,
        );
    }
    insert::insert(&txn, outbox, rows, None).await?;
    if let WriteMode::Table {
        remove_after_insert: true,
    } = outbox.write_mode()
    {
        insert::remove(&txn, outbox, backend, &message_ids).await?;
    }
    let last = message_ids.last().map(|&message_id| LastRun {
        at: last_at,
        message_id,
    });
    store
        .advance_periodic(&txn, job.name(), job.schedule(), next, last, now)
        .await?;
    txn.commit().await?;
    Ok(runs.len() as u64)
}

#[cfg(test)]
mod tests {
    use outbox_core::IntegrationEvent;
    use serde::{Deserialize, Serialize};

    use super::*;
    use crate::config::{ConfigError, Outbox};

    #[derive(IntegrationEvent, Serialize, Deserialize, schemars::JsonSchema)]
    #[integration_event(name = "tests.reports.report-requested.v1", key = day)]
    struct ReportRequestedV1 {
        day: String,
    }

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().expect("a time")
    }

    fn every_five(catch_up: u32) -> Periodic {
        Periodic::new("report", "*/5 * * * *", |at: DateTime<Utc>| {
            ReportRequestedV1 {
                day: at.to_rfc3339(),
            }
        })
        .catch_up(catch_up)
        .validate(at("2026-12-07T09:00:00Z"))
        .expect("valid")
    }

    #[test]
    fn the_run_due_is_the_latest_time_not_every_missed_one() {
        let job = every_five(0);
        assert_eq!(
            job.next_after(at("2026-12-07T09:00:00Z")),
            Some(at("2026-12-07T09:05:00Z"))
        );
        let next = at("2026-12-07T09:05:00Z");
        assert!(runs_due(&job, next, at("2026-12-07T09:04:59Z")).is_empty());
        assert_eq!(runs_due(&job, next, next), [next]);
        // An hour down: one run, for the latest missed time.
        assert_eq!(
            runs_due(&job, next, at("2026-12-07T10:02:00Z")),
            [at("2026-12-07T10:00:00Z")]
        );
    }

    #[test]
    fn catch_up_enqueues_the_latest_missed_times_oldest_first() {
        let job = every_five(2);
        let next = at("2026-12-07T09:05:00Z");
        assert_eq!(
            runs_due(&job, next, at("2026-12-07T10:02:00Z")),
            [
                at("2026-12-07T09:50:00Z"),
                at("2026-12-07T09:55:00Z"),
                at("2026-12-07T10:00:00Z"),
            ]
        );
        // Never before the stored next run.
        assert_eq!(
            runs_due(&job, next, at("2026-12-07T09:11:00Z")),
            [at("2026-12-07T09:05:00Z"), at("2026-12-07T09:10:00Z")]
        );
    }

    #[test]
    fn bad_schedules_are_refused_at_build() {
        let job = |name: &str, schedule: &str| {
            Periodic::new(name, schedule, |_| ReportRequestedV1 { day: String::new() })
        };
        let error = Outbox::builder()
            .periodic(job("report", "every day at nine"))
            .build()
            .unwrap_err();
        assert!(
            matches!(&error, ConfigError::Cron { name, .. } if name == "report"),
            "{error}"
        );
        assert_eq!(
            Outbox::builder()
                .periodic(job("feb-30", "0 0 30 2 *"))
                .build()
                .unwrap_err(),
            ConfigError::CronNeverRuns {
                name: "feb-30".into(),
                schedule: "0 0 30 2 *".into()
            }
        );
        assert!(matches!(
            Outbox::builder()
                .periodic(job("Report!", "* * * * *"))
                .build()
                .unwrap_err(),
            ConfigError::PeriodicName { .. }
        ));
        assert_eq!(
            Outbox::builder()
                .periodic(job("report", "* * * * *"))
                .periodic(job("report", "0 * * * *"))
                .build()
                .unwrap_err(),
            ConfigError::DuplicatePeriodic {
                name: "report".into()
            }
        );
        assert_eq!(
            Outbox::builder()
                .write_mode(WriteMode::message())
                .periodic(job("report", "* * * * *"))
                .build()
                .unwrap_err(),
            ConfigError::PeriodicInMessageMode {
                name: "report".into()
            }
        );
        let outbox = Outbox::builder()
            .periodic(job("report", "0 3 * * *"))
            .build()
            .expect("valid");
        assert_eq!(outbox.periodic_jobs()[0].schedule(), "0 3 * * *");
        assert_eq!(outbox.periodic_table().to_string(), "outbox_periodic");
    }
}
