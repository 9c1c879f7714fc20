//! The plain types of the operator log: an [`OperatorAction`] and its kind (re-exported by
//! [`crate::ops`]).

use chrono::{DateTime, Utc};
use uuid::Uuid;

/// An operator action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum OperatorActionKind {
    /// Back to `pending`.
    Requeue,
    /// To `skipped`.
    Skip,
    /// A scheduled row deleted before it was due (see [`crate::schedule`]).
    Cancel,
    /// A scheduled row given another due time.
    Reschedule,
    /// A scheduled row made due now.
    RunNow,
}

impl OperatorActionKind {
    /// `requeue`, `skip`, `cancel`, `reschedule` or `run-now`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Requeue => "requeue",
            Self::Skip => "skip",
            Self::Cancel => "cancel",
            Self::Reschedule => "reschedule",
            Self::RunNow => "run-now",
        }
    }

    /// Parses a stored `action` value.
    pub fn parse(value: &str) -> Option<Self> {
        [
            Self::Requeue,
            Self::Skip,
            Self::Cancel,
            Self::Reschedule,
            Self::RunNow,
        ]
        .into_iter()
        .find(|kind| kind.as_str() == value)
    }
}

impl std::fmt::Display for OperatorActionKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One entry of the operator log.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct OperatorAction {
    /// The row's `seq`.
    pub seq: i64,
    /// The row's message id.
    pub message_id: Uuid,
    /// The row's event type.
    pub event_type: String,
    /// What was done.
    pub action: OperatorActionKind,
    /// The row's status before.
    pub previous_status: String,
    /// Who did it.
    pub actor: String,
    /// Why.
    pub reason: Option<String>,
    /// The row's `last_error` at that time.
    pub last_error: Option<String>,
    /// What changed besides the status, when something did: a scheduled row's due time
    /// (`due 2026-12-08T09:00:00Z → 2026-12-09T09:00:00Z`).
    pub detail: Option<String>,
    /// When.
    pub at: DateTime<Utc>,
}
