//! The columns of the unique jobs' table (`<outbox>_unique`, see [`Unique`](crate::job::Unique)).

/// A column of the unique table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UniqueColumn {
    /// The job's event type (with the key, the primary key).
    EventType,
    /// The key: the aggregate id, or the SHA-256 of the arguments.
    UniqueKey,
    /// The message id of the job holding the key.
    MessageId,
    /// Until when the key holds; `NULL`: while the job is pending.
    ExpiresAt,
    /// When the job took the key.
    CreatedAt,
}

impl UniqueColumn {
    /// The column's name.
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Self::EventType => "event_type",
            Self::UniqueKey => "unique_key",
            Self::MessageId => "message_id",
            Self::ExpiresAt => "expires_at",
            Self::CreatedAt => "created_at",
        }
    }
}
