//! [`Unique`]: at most one job of a kind and key at a time (River's unique jobs), as
//! configuration data. Set on a [`Job`](super::Job); enforced by the commit (see
//! [`Unique`](crate::job::Unique)).

use std::time::Duration;

/// What makes two jobs of one event type the same job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum UniqueBy {
    /// The same aggregate id (the contract's key field): one job per order, per customer.
    Aggregate,
    /// The same arguments: the payload, byte for byte as the contract serializes it (its
    /// SHA-256 is the key).
    Args,
}

/// How long a job keeps others of its key out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum UniqueScope {
    /// While the job waits or runs: `pending` in the outbox table, or in the scheduled
    /// table. Once it is published (done), dead, failed or skipped, the key is free.
    WhilePending,
    /// For this long after it was enqueued, whatever became of it ("at most one reminder an
    /// hour").
    Within(Duration),
}

/// At most one job of an event type per key: a commit that raises a second one writes no
/// row for it and reports it as already enqueued
/// ([`CommitReport::already_enqueued`](crate::CommitReport::already_enqueued)) — not an
/// error, also when two commits race.
///
/// ```
/// use std::time::Duration;
/// use outbox_seaorm::job::{Unique, UniqueBy, UniqueScope};
///
/// let one_per_order = Unique::by_aggregate();
/// assert_eq!(one_per_order.by(), UniqueBy::Aggregate);
/// assert_eq!(one_per_order.scope(), UniqueScope::WhilePending);
///
/// let hourly = Unique::by_args().within(Duration::from_secs(3600));
/// assert_eq!(hourly.scope(), UniqueScope::Within(Duration::from_secs(3600)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[must_use]
pub struct Unique {
    by: UniqueBy,
    scope: UniqueScope,
}

impl Unique {
    /// One job per aggregate id, while it is pending.
    pub fn by_aggregate() -> Self {
        Self {
            by: UniqueBy::Aggregate,
            scope: UniqueScope::WhilePending,
        }
    }

    /// One job per identical arguments, while it is pending.
    pub fn by_args() -> Self {
        Self {
            by: UniqueBy::Args,
            scope: UniqueScope::WhilePending,
        }
    }

    /// The key holds for `window` after the job was enqueued, done or not (above zero:
    /// checked by the outbox's build).
    pub fn within(mut self, window: Duration) -> Self {
        self.scope = UniqueScope::Within(window);
        self
    }

    /// The key holds while the job is pending (the default).
    pub fn while_pending(mut self) -> Self {
        self.scope = UniqueScope::WhilePending;
        self
    }

    /// What the key is made of.
    pub fn by(&self) -> UniqueBy {
        self.by
    }

    /// How long the key holds.
    pub fn scope(&self) -> UniqueScope {
        self.scope
    }
}
