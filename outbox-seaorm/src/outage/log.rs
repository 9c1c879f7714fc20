//! The log rule every loop of the framework follows while something it depends on keeps
//! failing (the broker for the relay's publishing, the database for every loop): the first
//! failure at WARN, then at most one WARN every [`REPEAT`] with the count of failed
//! attempts while the outage lasts, and the recovery at INFO. This module is the state
//! machine that decides which of them is due; its users write the lines.

use std::time::{Duration, Instant};

/// How often a lasting outage is logged again.
pub(crate) const REPEAT: Duration = Duration::from_secs(30);

/// The outage state of one loop (or one step of a loop).
#[derive(Debug, Default)]
pub(crate) struct OutageLog {
    /// When the current outage began; `None` while things work.
    since: Option<Instant>,
    /// Failed attempts since it began.
    failed: u64,
    /// When it was last logged.
    logged: Option<Instant>,
}

/// What to log after an observation.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Report {
    /// Nothing new.
    Quiet,
    /// The first failure of an outage.
    Began,
    /// The outage lasts: `failed` attempts in all, over `lasting`.
    Lasts { failed: u64, lasting: Duration },
    /// Things work again after `failed` attempts over `lasted`.
    Recovered { failed: u64, lasted: Duration },
}

impl OutageLog {
    /// Records, at `now`, that `succeeded` attempts worked and `failed` attempts failed,
    /// and says what to log. An observation with both is not a recovery yet.
    pub(crate) fn record(&mut self, now: Instant, succeeded: u64, failed: u64) -> Report {
        if succeeded == 0 && failed == 0 {
            return Report::Quiet;
        }
        let state = self;
        match state.since {
            None if failed > 0 => {
                *state = Self {
                    since: Some(now),
                    failed,
                    logged: Some(now),
                };
                Report::Began
            }
            None => Report::Quiet,
            Some(since) if failed == 0 => {
                let report = Report::Recovered {
                    failed: state.failed,
                    lasted: now.saturating_duration_since(since),
                };
                *state = Self::default();
                report
            }
            Some(since) => {
                state.failed = state.failed.saturating_add(failed);
                let due = state
                    .logged
                    .is_none_or(|at| now.saturating_duration_since(at) >= REPEAT);
                if due {
                    state.logged = Some(now);
                    Report::Lasts {
                        failed: state.failed,
                        lasting: now.saturating_duration_since(since),
                    }
                } else {
                    Report::Quiet
                }
            }
        }
    }

    /// Failed attempts in the current outage (0 while things work).
    pub(crate) fn failed(&self) -> u64 {
        self.failed
    }

    /// When the current outage began; `None` while things work.
    pub(crate) fn since(&self) -> Option<Instant> {
        self.since
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outage_is_logged_once_then_every_30_seconds_then_its_recovery() {
        let mut log = OutageLog::default();
        let t0 = Instant::now();
        let at = |seconds: u64| t0 + Duration::from_secs(seconds);
        assert_eq!(log.record(at(0), 5, 0), Report::Quiet);
        assert_eq!(log.record(at(1), 0, 3), Report::Began);
        assert_eq!(log.record(at(2), 0, 3), Report::Quiet);
        assert_eq!(log.record(at(20), 0, 3), Report::Quiet);
        assert_eq!(
            log.record(at(31), 0, 1),
            Report::Lasts {
                failed: 10,
                lasting: Duration::from_secs(30)
            }
        );
        assert_eq!(log.record(at(40), 0, 2), Report::Quiet);
        // An observation with both is not a recovery yet.
        assert_eq!(log.record(at(45), 1, 1), Report::Quiet);
        assert_eq!(log.failed(), 13);
        assert_eq!(
            log.record(at(50), 4, 0),
            Report::Recovered {
                failed: 13,
                lasted: Duration::from_secs(49)
            }
        );
        assert_eq!(log.failed(), 0);
        assert_eq!(log.record(at(51), 4, 0), Report::Quiet);
        assert_eq!(log.record(at(52), 0, 1), Report::Began);
    }
}
