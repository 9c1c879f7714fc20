//! The plain types of the operator log: an [`OperatorAction`] and its kind (re-exported by
//! [`crate::ops`]).

use chrono::{DateTime, Utc};
use uuid::Uuid;

/// An operator action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum OperatorActionKind {
    /// Back to `pending`.
    Requeue,
    /// To `skipped`.
    Skip,
}

impl OperatorActionKind {
    /// `requeue` or `skip`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Requeue => "requeue",
            Self::Skip => "skip",
        }
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
    /// When.
    pub at: DateTime<Utc>,
}
