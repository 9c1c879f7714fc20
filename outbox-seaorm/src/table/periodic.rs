//! The columns of the periodic jobs' table (`<outbox>_periodic`, see [`crate::periodic`]).

/// A column of the periodic table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PeriodicColumn {
    /// The periodic job's name (primary key).
    Name,
    /// Its cron expression when its next run was computed.
    Schedule,
    /// When its next run is due.
    NextRunAt,
    /// The time of its last run enqueued.
    LastRunAt,
    /// The message id of its last run enqueued.
    LastMessageId,
    /// When a relay last wrote the row.
    UpdatedAt,
}

impl PeriodicColumn {
    /// The column's name.
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Self::Name => "name",
            Self::Schedule => "schedule",
            Self::NextRunAt => "next_run_at",
            Self::LastRunAt => "last_run_at",
            Self::LastMessageId => "last_message_id",
            Self::UpdatedAt => "updated_at",
        }
    }
}
