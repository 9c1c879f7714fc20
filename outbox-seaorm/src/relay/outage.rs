//! What the relay says while its broker fails: the first transient failure at WARN (with the
//! publisher and the error), then at most one WARN every 30 s with the count of failed
//! attempts while the outage lasts, and the recovery at INFO (the rule of
//! [`crate::outage`], counted in rows here).
//!
//! Each failed row is also counted in `outbox_publish_failures_total{class="transient"}` and
//! logged at DEBUG; this module only keeps an operator's log readable during an outage.

use std::sync::Mutex;
use std::time::Instant;

use outbox_core::PublishError;

use crate::outage::log::{OutageLog, Report};

/// The outage state of one relay's publisher, shared by its batches (pipelined ones too).
#[derive(Debug)]
pub(crate) struct PublishHealth {
    publisher: &'static str,
    log: Mutex<OutageLog>,
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
            log: Mutex::default(),
        }
    }

    /// Records a batch (`published` rows went out, `failed` rows failed transiently, the
    /// first failure being `error`) and logs what an operator needs to know.
    pub(crate) fn observe(&self, published: usize, failed: usize, error: Option<&PublishError>) {
        let count = |rows: usize| u64::try_from(rows).unwrap_or(u64::MAX);
        let report = self
            .log
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .record(Instant::now(), count(published), count(failed));
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_publisher_is_named_without_its_path_and_parameters() {
        let health = PublishHealth::of::<std::sync::Arc<String>>();
        assert_eq!(health.publisher, "Arc<alloc::string::String>");
    }
}
