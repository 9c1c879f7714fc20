//! What a loop of the framework does while its database keeps failing: it **backs off**
//! and it **says so once**.
//!
//! Every long-running loop — the polling relay, the log relay, the consumers (and the
//! broker runners around them), the partitioned consumer's supervisor, the retention
//! cleanup, the relay service's supervisor — reports each database step it runs (the
//! claim, a lease refresh, a heartbeat, the status gauges, …) to a [`DatabaseOutage`]:
//!
//! - **Backoff.** A step that fails again waits longer before its next attempt:
//!   exponential with jitter, from 1 s, doubling, at most 2 s before jitter (so at most
//!   [`MAX_PAUSE`], 4 s, with it), and back to nothing once the step works. A database
//!   without the outbox tables gets one attempt (a statement or three) every 1–4 s, never
//!   a busy loop.
//! - **The log rule** of a broker outage: the first failure of a step at WARN with the
//!   error, then at most one WARN every 30 s with the count of failed attempts while it
//!   lasts, and the recovery at INFO. A missing table is named with the fix (run the
//!   migration, or `schema::install`).
//! - **A metric**: `outbox_database_failures_total{loop, step}` (plus the loop's own
//!   labels: `outbox` or `consumer`) counts every failed attempt.
//! - **Readiness**: [`DatabaseOutage::failing`] says what fails now; the relay service's
//!   `/readyz` shows the relay as not ready with that error while it lasts.
//!
//! ```
//! use outbox_seaorm::outage::DatabaseOutage;
//!
//! let outage = DatabaseOutage::new("relay", "relay-1", Vec::new());
//! assert!(outage.failing().is_none());
//! let pause = outage.failed_with("claim", "connection refused", None);
//! assert!(pause <= outbox_seaorm::outage::MAX_PAUSE);
//! assert_eq!(outage.failing().map(|failure| failure.step), Some("claim"));
//! outage.succeeded("claim");
//! assert!(outage.failing().is_none());
//! ```

pub(crate) mod log;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use outbox_core::policy::Backoff;
use sea_orm::DbErr;

use self::log::{OutageLog, Report};
use crate::sql::dialect;

/// The longest pause between two attempts of a failing step, jitter included.
pub const MAX_PAUSE: Duration = Duration::from_secs(4);

/// The backoff between the attempts of a failing step: 1 s doubling to 2 s, with jitter
/// below the base (so at most [`MAX_PAUSE`]).
fn backoff() -> Backoff {
    Backoff::new()
        .with_min_delay(Duration::from_secs(1))
        .with_max_delay(MAX_PAUSE / 2)
}

/// One step that fails now, as [`DatabaseOutage::failing`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DatabaseFailure {
    /// The step (`claim`, `lease refresh`, `heartbeat`, …).
    pub step: &'static str,
    /// The last error, with the fix when a table is missing.
    pub error: String,
    /// The table the database says does not exist, if that is the error.
    pub missing_table: Option<String>,
    /// Failed attempts in a row.
    pub failures: u64,
    /// When the first of them failed.
    pub since: SystemTime,
}

/// The database health of one loop; see the [module documentation](self). Cheap to
/// clone: clones share their state (a loop keeps one, a readiness check another).
#[derive(Clone)]
pub struct DatabaseOutage {
    inner: Arc<Inner>,
}

struct Inner {
    /// The loop (`relay`, `log relay`, `consumer`, …): the metric's `loop` label.
    work: &'static str,
    /// Which one (a relay instance, a consumer's name), for the log lines.
    subject: String,
    /// The loop's own metric labels.
    labels: Vec<metrics::Label>,
    backoff: Backoff,
    steps: Mutex<BTreeMap<&'static str, Step>>,
}

#[derive(Default)]
struct Step {
    log: OutageLog,
    last: Option<DatabaseFailure>,
}

impl fmt::Debug for DatabaseOutage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DatabaseOutage")
            .field("loop", &self.inner.work)
            .field("subject", &self.inner.subject)
            .field("failing", &self.failing())
            .finish()
    }
}

impl DatabaseOutage {
    /// The health of loop `work` (the metric's `loop` label: `relay`, `consumer`, …) run
    /// for `subject` (named in the log lines), whose metrics carry `labels`.
    pub fn new(
        work: &'static str,
        subject: impl Into<String>,
        labels: Vec<metrics::Label>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                work,
                subject: subject.into(),
                labels,
                backoff: backoff(),
                steps: Mutex::default(),
            }),
        }
    }

    /// Records that `step` failed with `error`, logs what the rule says, counts it, and
    /// returns how long to wait before the step's next attempt.
    pub fn failed(&self, step: &'static str, error: &DbErr) -> Duration {
        self.failed_with(step, error, dialect::missing_table(error))
    }

    /// [`failed`](Self::failed) for an error that is not a [`DbErr`] (a connection that
    /// could not be opened, a stream that broke), with the table it says is missing.
    pub fn failed_with(
        &self,
        step: &'static str,
        error: impl fmt::Display,
        missing_table: Option<String>,
    ) -> Duration {
        let inner = &self.inner;
        let error = match &missing_table {
            Some(table) => format!(
                "table {table} does not exist: the outbox tables are not installed on this \
                 database; run the migration (outbox_seaorm::migration::Migrator) or \
                 schema::install ({error})"
            ),
            None => error.to_string(),
        };
        let mut labels = inner.labels.clone();
        labels.push(metrics::Label::new("loop", inner.work));
        labels.push(metrics::Label::new("step", step));
        metrics::counter!(outbox_core::metric::DATABASE_FAILURES, labels).increment(1);
        let (report, failures) = {
            let mut steps = self.lock();
            let state = steps.entry(step).or_default();
            let report = state.log.record(Instant::now(), 0, 1);
            let failures = state.log.failed();
            let since = state
                .log
                .since()
                .and_then(|since| SystemTime::now().checked_sub(since.elapsed()))
                .unwrap_or_else(SystemTime::now);
            state.last = Some(DatabaseFailure {
                step,
                error: error.clone(),
                missing_table,
                failures,
                since,
            });
            (report, failures)
        };
        let attempts = u32::try_from(failures).unwrap_or(u32::MAX);
        let pause = inner.backoff.delay(attempts).min(MAX_PAUSE);
        let work = inner.work;
        let subject = inner.subject.as_str();
        match report {
            Report::Began => tracing::warn!(
                %work,
                %subject,
                step,
                %error,
                "database step failing: retried with backoff (at most 4 s apart); logged again \
                 every 30 s while it lasts (outbox_database_failures_total)"
            ),
            Report::Lasts { failed, lasting } => tracing::warn!(
                %work,
                %subject,
                step,
                %error,
                failed_attempts = failed,
                outage_seconds = lasting.as_secs(),
                "database step still failing"
            ),
            Report::Quiet | Report::Recovered { .. } => {
                tracing::debug!(%work, %subject, step, %error, failures, "database step failed");
            }
        }
        pause
    }

    /// Records that `step` worked: a step that was failing has recovered (logged at INFO).
    pub fn succeeded(&self, step: &'static str) {
        let report = {
            let mut steps = self.lock();
            let Some(state) = steps.get_mut(step) else {
                return;
            };
            let report = state.log.record(Instant::now(), 1, 0);
            steps.remove(step);
            report
        };
        if let Report::Recovered { failed, lasted } = report {
            tracing::info!(
                work = %self.inner.work,
                subject = %self.inner.subject,
                step,
                failed_attempts = failed,
                outage_seconds = lasted.as_secs_f64(),
                "database step recovered"
            );
        }
    }

    /// How long to wait before the next attempt of whatever fails now: the backoff of the
    /// step failing most often (with jitter), or zero while nothing fails. For a loop that
    /// does not see the error itself (a broker runner handing back a message its consumer
    /// could not settle).
    pub fn pause(&self) -> Duration {
        let failures = self
            .lock()
            .values()
            .map(|step| step.log.failed())
            .max()
            .unwrap_or(0);
        if failures == 0 {
            return Duration::ZERO;
        }
        let attempts = u32::try_from(failures).unwrap_or(u32::MAX);
        self.inner.backoff.delay(attempts).min(MAX_PAUSE)
    }

    /// The step that has failed longest among those failing now, if any.
    pub fn failing(&self) -> Option<DatabaseFailure> {
        self.lock()
            .values()
            .filter_map(|step| step.last.clone())
            .min_by_key(|failure| failure.since)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<&'static str, Step>> {
        self.inner
            .steps
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pause_grows_to_its_cap_and_resets_on_success() {
        let outage = DatabaseOutage::new("relay", "r", Vec::new());
        let pauses: Vec<Duration> = (0..12)
            .map(|_| outage.failed_with("claim", "down", None))
            .collect();
        assert!(pauses[0] >= Duration::from_secs(1), "{pauses:?}");
        assert!(pauses[0] < Duration::from_secs(2), "{pauses:?}");
        assert!(pauses.iter().all(|pause| *pause <= MAX_PAUSE), "{pauses:?}");
        assert!(pauses[11] >= Duration::from_secs(2), "{pauses:?}");
        assert_eq!(outage.failing().map(|failure| failure.failures), Some(12));
        assert!(outage.pause() >= Duration::from_secs(2));
        outage.succeeded("claim");
        assert_eq!(outage.failing(), None);
        assert_eq!(outage.pause(), Duration::ZERO);
        let again = outage.failed_with("claim", "down", None);
        assert!(again < Duration::from_secs(2), "reset: {again:?}");
    }

    #[test]
    fn steps_fail_and_recover_on_their_own() {
        let outage = DatabaseOutage::new("relay", "r", Vec::new());
        outage.failed_with("status gauges", "permission denied", None);
        std::thread::sleep(Duration::from_millis(5));
        outage.failed_with("claim", "down", None);
        // The claim working says nothing of the gauges.
        outage.succeeded("claim");
        let failing = outage.failing().expect("the gauges still fail");
        assert_eq!(failing.step, "status gauges");
        assert_eq!(failing.error, "permission denied");
    }

    #[test]
    fn a_missing_table_is_named_with_the_fix() {
        let outage = DatabaseOutage::new("relay", "r", Vec::new());
        outage.failed_with(
            "claim",
            "relation \"outbox\" does not exist",
            Some("outbox".to_owned()),
        );
        let failing = outage.failing().expect("failing");
        assert_eq!(failing.missing_table.as_deref(), Some("outbox"));
        assert!(
            failing.error.starts_with("table outbox does not exist"),
            "{}",
            failing.error
        );
        assert!(
            failing.error.contains("schema::install"),
            "{}",
            failing.error
        );
    }
}
