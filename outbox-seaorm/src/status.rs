//! The plain facts of an outbox row: its publication states ([`OutboxStatus`]) and the
//! longest key it may carry ([`MAX_KEY_CHARS`]). Re-exported by [`crate::schema`].

/// Longest `event_type`, `aggregate_type`, `aggregate_id` and inbox `consumer`, in
/// characters (`varchar(255)`). A commit checks it before writing.
pub const MAX_KEY_CHARS: usize = 255;

/// The publication state of an outbox row (the `status` column).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OutboxStatus {
    /// Written, not yet published: the relay's work.
    Pending,
    /// Published to the broker.
    Published,
    /// Given up on by the relay: too many transient failures, or a permanent one.
    /// Waits for an operator (requeue or skip).
    Dead,
    /// Given up on by an operator (`skip`, recorded in the operator log): never published,
    /// never blocks its aggregate.
    Skipped,
    /// A row whose `retryable` flag is off failed once (job-queue mode, see
    /// [`crate::job`]): never retried, never claimed again, never purged; the relay raised
    /// its alert hook. Waits for a person (requeue or skip, both recorded). Holds back its
    /// aggregate under [`DeadLetterPolicy::Block`](outbox_core::policy::DeadLetterPolicy::Block)
    /// like a dead row.
    Failed,
    /// Raised for later ([`RaiseLater`](outbox_core::RaiseLater)) and not yet due: the row
    /// waits in the scheduled table beside the outbox table, where neither the relay's
    /// claim nor the log relay sees it, until its time comes and a relay moves it into the
    /// outbox table as `pending` (see [`crate::schedule`]).
    Scheduled,
}

impl OutboxStatus {
    /// The value stored in the `status` column.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Published => "published",
            Self::Dead => "dead",
            Self::Skipped => "skipped",
            Self::Failed => "failed",
            Self::Scheduled => "scheduled",
        }
    }

    /// The stored value as an SQL string literal (`'pending'`).
    pub(crate) const fn as_sql_literal(self) -> &'static str {
        match self {
            Self::Pending => "'pending'",
            Self::Published => "'published'",
            Self::Dead => "'dead'",
            Self::Skipped => "'skipped'",
            Self::Failed => "'failed'",
            Self::Scheduled => "'scheduled'",
        }
    }

    /// Parses a `status` column value.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "pending" => Some(Self::Pending),
            "published" => Some(Self::Published),
            "dead" => Some(Self::Dead),
            "skipped" => Some(Self::Skipped),
            "failed" => Some(Self::Failed),
            "scheduled" => Some(Self::Scheduled),
            _ => None,
        }
    }
}

impl std::fmt::Display for OutboxStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Statuses that hold back the later rows of their aggregate under
/// [`DeadLetterPolicy::Block`](outbox_core::policy::DeadLetterPolicy::Block): rows the relay
/// gave up on.
pub(crate) const HOLDING: &[OutboxStatus] = &[OutboxStatus::Dead, OutboxStatus::Failed];
