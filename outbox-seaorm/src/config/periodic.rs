//! [`Periodic`]: a job enqueued on a cron schedule (see [`crate::periodic`]), as
//! configuration data with its validation.

use std::fmt;
use std::str::FromStr as _;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use outbox_core::name::check_worker_key;
use outbox_core::{EncodeError, Envelope, EnvelopeConfig, IntegrationEvent};

use super::error::ConfigError;

/// Builds the envelope of one run, for the run's time.
type MakeEnvelope =
    Arc<dyn Fn(&EnvelopeConfig, DateTime<Utc>) -> Result<Envelope, EncodeError> + Send + Sync>;

/// A job enqueued on a cron schedule: at each time the schedule names, one outbox row of
/// contract `C` — exactly one per period across every relay of the outbox and across
/// restarts (see [`crate::periodic`]). Added with
/// [`OutboxBuilder::periodic`](crate::OutboxBuilder::periodic), validated by
/// [`OutboxBuilder::build`](crate::OutboxBuilder::build).
///
/// The schedule is a cron expression in UTC: five fields (`minute hour day-of-month month
/// day-of-week`) or six with seconds first, with `L`, `W`, `#` and names (`MON`, `JAN`)
/// as the [`croner`](https://docs.rs/croner) crate reads them.
///
/// ```
/// use outbox_core::IntegrationEvent;
/// use outbox_seaorm::Periodic;
/// # use schemars::JsonSchema;
/// # use serde::{Deserialize, Serialize};
///
/// #[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
/// #[integration_event(name = "bookstore.reporting.nightly-report-requested.v1", key = day)]
/// pub struct NightlyReportRequestedV1 {
///     pub day: String,
/// }
///
/// let nightly = Periodic::new("nightly-report", "0 3 * * *", |at| NightlyReportRequestedV1 {
///     day: at.date_naive().to_string(),
/// })
/// .catch_up(2);
/// assert_eq!(nightly.name(), "nightly-report");
/// assert_eq!(nightly.schedule(), "0 3 * * *");
/// ```
#[derive(Clone)]
#[must_use]
pub struct Periodic {
    name: String,
    schedule: String,
    cron: Option<croner::Cron>,
    event_type: &'static str,
    make: MakeEnvelope,
    catch_up: u32,
}

impl fmt::Debug for Periodic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Periodic")
            .field("name", &self.name)
            .field("schedule", &self.schedule)
            .field("event_type", &self.event_type)
            .field("catch_up", &self.catch_up)
            .finish_non_exhaustive()
    }
}

impl PartialEq for Periodic {
    fn eq(&self, other: &Self) -> bool {
        (&self.name, &self.schedule, self.event_type, self.catch_up)
            == (
                &other.name,
                &other.schedule,
                other.event_type,
                other.catch_up,
            )
    }
}

impl Periodic {
    /// The periodic job `name` (`[a-z0-9][a-z0-9._-]*`, at most 100 characters: its key in
    /// the periodic table), on the cron `schedule`; `make` builds each run's contract from
    /// the run's time (the time the schedule named, not the moment it was enqueued).
    pub fn new<C, F>(name: impl Into<String>, schedule: impl Into<String>, make: F) -> Self
    where
        C: IntegrationEvent,
        F: Fn(DateTime<Utc>) -> C + Send + Sync + 'static,
    {
        Self {
            name: name.into(),
            schedule: schedule.into(),
            cron: None,
            event_type: C::EVENT_TYPE,
            make: Arc::new(move |config: &EnvelopeConfig, at| config.encode_at(&make(at), at)),
            catch_up: 0,
        }
    }

    /// After downtime, enqueue up to `runs` of the periods that were missed (the latest
    /// ones, oldest first) instead of only the latest one (default 0: after an outage, one
    /// run for the latest missed time, and the schedule goes on from now — no storm).
    pub fn catch_up(mut self, runs: u32) -> Self {
        self.catch_up = runs;
        self
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The cron expression, as given.
    pub fn schedule(&self) -> &str {
        &self.schedule
    }

    /// The event type of its contract.
    pub fn event_type(&self) -> &'static str {
        self.event_type
    }

    /// How many missed periods a late enqueue catches up at most (besides the latest).
    pub fn catch_up_runs(&self) -> u32 {
        self.catch_up
    }

    /// The first time after `after` (exclusive) that the schedule names; `None` when there
    /// is none (checked at build: a schedule that never runs is refused).
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.cron.as_ref()?.find_next_occurrence(&after, false).ok()
    }

    /// The latest time the schedule names at or before `at`.
    pub(crate) fn previous_at_or_before(&self, at: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.cron.as_ref()?.find_previous_occurrence(&at, true).ok()
    }

    /// The latest time the schedule names before `at` (exclusive).
    pub(crate) fn previous_before(&self, at: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.cron
            .as_ref()?
            .find_previous_occurrence(&at, false)
            .ok()
    }

    /// The envelope of the run at `at`.
    pub(crate) fn envelope(
        &self,
        config: &EnvelopeConfig,
        at: DateTime<Utc>,
    ) -> Result<Envelope, EncodeError> {
        (self.make)(config, at)
    }

    /// Checks the name and parses the schedule; one that never runs after `now` is refused.
    pub(crate) fn validate(mut self, now: DateTime<Utc>) -> Result<Self, ConfigError> {
        check_worker_key(&self.name).map_err(|reason| ConfigError::PeriodicName {
            name: self.name.clone(),
            reason,
        })?;
        let cron = croner::Cron::from_str(&self.schedule).map_err(|error| ConfigError::Cron {
            name: self.name.clone(),
            schedule: self.schedule.clone(),
            reason: error.to_string(),
        })?;
        if cron.find_next_occurrence(&now, false).is_err() {
            return Err(ConfigError::CronNeverRuns {
                name: self.name.clone(),
                schedule: self.schedule.clone(),
            });
        }
        self.cron = Some(cron);
        Ok(self)
    }
}
