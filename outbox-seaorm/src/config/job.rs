//! [`Job`]: how the rows of one event type are written in job-queue mode (see
//! [`crate::job`]), as configuration data with its validation.

use outbox_core::IntegrationEvent;
use outbox_core::name::{EventType, check_worker_key};

use super::error::ConfigError;
use super::unique::{Unique, UniqueScope};
#[cfg(doc)]
use outbox_core::name::MAX_WORKER_KEY_CHARS;

/// How the rows of one event type are written: their worker key and whether a failed
/// attempt may be retried. Added to an outbox with
/// [`OutboxBuilder::job`](crate::OutboxBuilder::job); validated by
/// [`OutboxBuilder::build`](crate::OutboxBuilder::build).
///
/// Defaults: no worker key (`NULL`: only relays without worker keys claim the rows),
/// retryable, not unique, priority `0`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct Job {
    event_type: String,
    worker_key: Option<String>,
    retryable: bool,
    unique: Option<Unique>,
    priority: u8,
}

/// The lowest priority a [`Job`] may have ([`Job::priority`]): `0` is claimed first, `9`
/// last.
pub const MAX_PRIORITY: u8 = 9;

impl Job {
    /// The job entry of event type `event_type` (a versioned contract name, e.g.
    /// `bookstore.payments.payout-requested.v1`).
    pub fn new(event_type: impl Into<String>) -> Self {
        Self {
            event_type: event_type.into(),
            worker_key: None,
            retryable: true,
            unique: None,
            priority: 0,
        }
    }

    /// The job entry of contract `C`.
    pub fn of<C: IntegrationEvent>() -> Self {
        Self::new(C::EVENT_TYPE)
    }

    /// The worker key stored on the rows (default none): `[a-z0-9][a-z0-9._-]*`, at most
    /// [`MAX_WORKER_KEY_CHARS`] characters.
    pub fn worker_key(mut self, key: impl Into<String>) -> Self {
        self.worker_key = Some(key.into());
        self
    }

    /// Whether a failed attempt may be retried (default `true`). `false`: the first failure
    /// marks the row `failed` and raises the relay's alert hook (see the
    /// [job-queue documentation](crate::job)).
    pub fn retryable(mut self, retryable: bool) -> Self {
        self.retryable = retryable;
        self
    }

    /// At most one job of this event type per key at a time (default: none): see
    /// [`Unique`].
    pub fn unique(mut self, unique: Unique) -> Self {
        self.unique = Some(unique);
        self
    }

    /// The claim order of this job among the pending jobs of its worker key: `0` (the
    /// default) first, [`MAX_PRIORITY`] last; jobs of one priority in commit (`seq`) order.
    /// A relay's claim takes the due rows of its worker keys by `(priority, seq)`, so a
    /// priority-0 job committed after ten thousand priority-5 ones runs in the next batch.
    /// Per-aggregate order still comes first: with
    /// [`Ordering::PerAggregate`](outbox_core::policy::Ordering) a job never passes an
    /// earlier pending job of its aggregate, whatever their priorities. Needs a worker key
    /// (priorities order a keyed relay's claim).
    pub fn priority(mut self, priority: u8) -> Self {
        self.priority = priority;
        self
    }

    /// The priority (`0` first).
    pub fn priority_value(&self) -> u8 {
        self.priority
    }

    /// The uniqueness, if any.
    pub fn unique_ref(&self) -> Option<&Unique> {
        self.unique.as_ref()
    }

    /// The event type.
    pub fn event_type(&self) -> &str {
        &self.event_type
    }

    /// The worker key, if any.
    pub fn worker_key_ref(&self) -> Option<&str> {
        self.worker_key.as_deref()
    }

    /// Whether a failed attempt may be retried.
    pub fn is_retryable(&self) -> bool {
        self.retryable
    }

    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        let zero = UniqueScope::Within(std::time::Duration::ZERO);
        if self.unique.is_some_and(|unique| unique.scope() == zero) {
            return Err(ConfigError::UniqueWindow {
                event_type: self.event_type.clone(),
            });
        }
        EventType::parse(&self.event_type).map_err(|reason| ConfigError::JobEventType {
            event_type: self.event_type.clone(),
            reason,
        })?;
        if let Some(key) = &self.worker_key {
            check_worker_key(key).map_err(|reason| ConfigError::WorkerKey {
                event_type: self.event_type.clone(),
                key: key.clone(),
                reason,
            })?;
        }
        if self.priority > MAX_PRIORITY {
            return Err(ConfigError::Priority {
                event_type: self.event_type.clone(),
                priority: self.priority,
            });
        }
        if self.priority != 0 && self.worker_key.is_none() {
            return Err(ConfigError::PriorityWithoutWorkerKey {
                event_type: self.event_type.clone(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Outbox;

    #[test]
    fn builder_validates_jobs() {
        let outbox = Outbox::builder()
            .job(
                Job::new("shop.payments.payout-requested.v1")
                    .worker_key("payments")
                    .retryable(false),
            )
            .job(Job::new("shop.notifications.mail-requested.v1").worker_key("notifications.mail"))
            .build()
            .unwrap();
        let payout = outbox.job("shop.payments.payout-requested.v1").unwrap();
        assert_eq!(payout.worker_key_ref(), Some("payments"));
        assert!(!payout.is_retryable());
        assert!(
            outbox
                .job("shop.notifications.mail-requested.v1")
                .unwrap()
                .is_retryable()
        );
        assert!(outbox.job("shop.ordering.order-placed.v1").is_none());
        assert_eq!(outbox.jobs().count(), 2);

        assert!(matches!(
            Outbox::builder().job(Job::new("Payout")).build(),
            Err(ConfigError::JobEventType { event_type, .. }) if event_type == "Payout"
        ));
        for bad in [
            "Payments",
            "",
            "pay ments",
            "pay'; DROP TABLE outbox; --",
            &"k".repeat(101),
        ] {
            let error = Outbox::builder()
                .job(Job::new("shop.payments.payout-requested.v1").worker_key(bad))
                .build()
                .unwrap_err();
            assert!(
                matches!(&error, ConfigError::WorkerKey { key, .. } if key == bad),
                "{bad:?}: {error:?}"
            );
            assert!(error.to_string().contains("worker key"), "{error}");
        }
        assert_eq!(
            Outbox::builder()
                .job(Job::new("shop.payments.payout-requested.v1"))
                .job(Job::new("shop.payments.payout-requested.v1").retryable(false))
                .build()
                .unwrap_err(),
            ConfigError::DuplicateJob {
                event_type: "shop.payments.payout-requested.v1".into()
            }
        );
    }
}
