//! What the relay says while its broker fails: the first transient failure at WARN (with the
//! publisher and the error), then at most one WARN every [`REPEAT`] with the count of failed
//! attempts while the outage lasts, and the recovery at INFO.
//!
//! Each failed row is also counted in `outbox_publish_failures_total{class="transient"}` and
//! logged at DEBUG; this module only keeps an operator's log readable during an outage.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use outbox_core::PublishError;

/// How often a lasting outage is logged again.
pub(crate) const REPEAT: Duration = Duration::from_secs(30);

/// The outage state of one relay's publisher, shared by its batches (pipelined ones too).
#[derive(Debug)]
pub(crate) struct PublishHealth {
    publisher: &'static str,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// When the current outage began; `None` while publishing works.
    since: Option<Instant>,
    /// Failed attempts (rows) since it began.
    failed: u64,
    /// When it was last logged.
    logged: Option<Instant>,
}

/// What to log after a batch.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Report {
    /// Nothing new.
    Quiet,
    /// The first failure of an outage.
    Began,
    /// The outage lasts: `failed` attempts in all, over `lasting`.
    Lasts { failed: u64, lasting: Duration },
    /// Publishing works again after `failed` attempts over `lasted`.
    Recovered { failed: u64, lasted: Duration },
}

impl PublishHealth {
    /// The health of a relay publishing through `P` (named after its type).
    pub(crate) fn of<P: ?Sized>() -> Self {
        let full = std::any::type_name::<P>();
        // `outbox_brokers::nats::NatsPublisher<…>` → `NatsPublisher<…>`.
        let head = full.split('<').next().unwrap_or(full);
        let start = head.rfind("::").map_or(0, |at| at + 2);
        Self {
            publisher: &full[start..],
            state: Mutex::new(State::default()),
        }
    }

    /// Records a batch (`published` rows went out, `failed` rows failed transiently, the
    /// first failure being `error`) and logs what an operator needs to know.
    pub(crate) fn observe(&self, published: usize, failed: usize, error: Option<&PublishError>) {
        let report = self.record(Instant::now(), published, failed);
        let publisher = self.publisher;
        match report {
            Report::Quiet => {}
            Report::Began => {
                let error = error.map(ToString::to_string).unwrap_or_default();
                tracing::warn!(
                    publisher,
                    %error,
                    failed_rows = failed,
                    "publishing failed: the broker is unavailable or refuses messages; rows are \
                     retried with backoff (outbox_publish_failures_total{{class=\"transient\"}})"
                );
            }
            Report::Lasts { failed, lasting } => {
                let error = error.map(ToString::to_string).unwrap_or_default();
                tracing::warn!(
                    publisher,
                    %error,
                    failed_attempts = failed,
                    outage_seconds = lasting.as_secs(),
                    "publishing still failing"
                );
            }
            Report::Recovered { failed, lasted } => {
                tracing::info!(
                    publisher,
                    failed_attempts = failed,
                    outage_seconds = lasted.as_secs_f64(),
                    "publishing recovered"
                );
            }
        }
    }

    /// The state machine of [`observe`](Self::observe), at `now`.
    fn record(&self, now: Instant, published: usize, failed: usize) -> Report {
        if published == 0 && failed == 0 {
            return Report::Quiet;
        }
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let failed = u64::try_from(failed).unwrap_or(u64::MAX);
        match state.since {
            None if failed > 0 => {
                *state = State {
                    since: Some(now),
                    failed,
                    logged: Some(now),
                };
                Report::Began
            }
            None => Report::Quiet,
            Some(since) if failed == 0 && published > 0 => {
                let report = Report::Recovered {
                    failed: state.failed,
                    lasted: now.saturating_duration_since(since),
                };
                *state = State::default();
                report
            }
            // Here `failed > 0`: a batch with neither returned above, one with successes
            // only is the recovery.
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
}

#[cfg(test)]
mod tests {
    use super::*;

    struct NatsPublisher;

    #[test]
    fn an_outage_is_logged_once_then_every_30_seconds_then_its_recovery() {
        let health = PublishHealth::of::<NatsPublisher>();
        assert_eq!(health.publisher, "NatsPublisher");
        let t0 = Instant::now();
        let at = |seconds: u64| t0 + Duration::from_secs(seconds);
        assert_eq!(health.record(at(0), 5, 0), Report::Quiet);
        assert_eq!(health.record(at(1), 0, 3), Report::Began);
        assert_eq!(health.record(at(2), 0, 3), Report::Quiet);
        assert_eq!(health.record(at(20), 0, 3), Report::Quiet);
        assert_eq!(
            health.record(at(31), 0, 1),
            Report::Lasts {
                failed: 10,
                lasting: Duration::from_secs(30)
            }
        );
        assert_eq!(health.record(at(40), 0, 2), Report::Quiet);
        // A batch with both is not a recovery yet.
        assert_eq!(health.record(at(45), 1, 1), Report::Quiet);
        assert_eq!(
            health.record(at(50), 4, 0),
            Report::Recovered {
                failed: 13,
                lasted: Duration::from_secs(49)
            }
        );
        assert_eq!(health.record(at(51), 4, 0), Report::Quiet);
        assert_eq!(health.record(at(52), 0, 1), Report::Began);
    }

    #[test]
    fn the_publisher_is_named_without_its_path_and_parameters() {
        let health = PublishHealth::of::<std::sync::Arc<String>>();
        assert_eq!(health.publisher, "Arc<alloc::string::String>");
    }
}
