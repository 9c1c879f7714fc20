//! [`WriteMode`]: how a commit hands its envelopes to the relay — rows in the outbox table
//! (every backend, every relay), or logical messages in PostgreSQL's write-ahead log (the
//! log relay only).

/// Default prefix of message mode's logical messages.
pub const DEFAULT_MESSAGE_PREFIX: &str = "outbox";

/// Longest message prefix accepted.
pub const MAX_MESSAGE_PREFIX_LEN: usize = 128;

/// How [`UnitOfWork::commit`](crate::UnitOfWork::commit) writes its envelopes, chosen with
/// [`OutboxBuilder::write_mode`](super::OutboxBuilder::write_mode).
///
/// | mode | what a commit writes | relays | backends |
/// |---|---|---|---|
/// | [`Table`](Self::Table) (default) | one outbox row per envelope | polling [`Relay`](crate::relay::Relay) (marks rows) or log relay (leaves them `pending`; retention deletes them) | all |
/// | [`Table`](Self::Table) with `remove_after_insert` | the row, deleted again in the same transaction: the table stays empty, the log keeps the insert | log relay only | PostgreSQL, MariaDB |
/// | [`Message`](Self::Message) | `pg_logical_emit_message(true, <prefix>, <envelope JSON>)`: no outbox row at all, transactional | log relay only | PostgreSQL |
///
/// Message mode is the cheapest write PostgreSQL has (one WAL record, no heap tuple, no
/// index entries, nothing to vacuum); its price is that the events exist only in the log:
/// an operator cannot list pending events, and a slot lost to `max_slot_wal_keep_size`
/// loses them (`BENCHMARKS.md` has the measured difference). A polling relay refuses an
/// outbox whose rows do not stay in the table.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum WriteMode {
    /// Rows in the outbox table.
    Table {
        /// Delete each row again in the same transaction (log relay only): the insert
        /// reaches the log, the table stays empty.
        remove_after_insert: bool,
    },
    /// Transactional logical messages, no table.
    Message {
        /// The prefix of the messages (a log relay takes only its own).
        prefix: String,
    },
}

impl Default for WriteMode {
    fn default() -> Self {
        Self::table()
    }
}

impl WriteMode {
    /// Rows in the outbox table (the default).
    pub fn table() -> Self {
        Self::Table {
            remove_after_insert: false,
        }
    }

    /// Rows in the outbox table, deleted again in the same transaction (log relay only).
    pub fn table_removed_after_insert() -> Self {
        Self::Table {
            remove_after_insert: true,
        }
    }

    /// Logical messages with the prefix [`DEFAULT_MESSAGE_PREFIX`] (log relay only).
    pub fn message() -> Self {
        Self::Message {
            prefix: DEFAULT_MESSAGE_PREFIX.to_owned(),
        }
    }

    /// Logical messages with `prefix` (log relay only): one prefix per outbox when several
    /// share a database.
    pub fn message_with_prefix(prefix: impl Into<String>) -> Self {
        Self::Message {
            prefix: prefix.into(),
        }
    }

    /// `table`, `table+remove_after_insert` or `message` (status output, metrics).
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Table {
                remove_after_insert: false,
            } => "table",
            Self::Table {
                remove_after_insert: true,
            } => "table+remove_after_insert",
            Self::Message { .. } => "message",
        }
    }

    /// Whether committed envelopes stay in the outbox table (what a polling relay needs).
    pub fn keeps_rows(&self) -> bool {
        matches!(
            self,
            Self::Table {
                remove_after_insert: false
            }
        )
    }

    /// Whether a commit on a `backend` database can write this mode: the table everywhere;
    /// `remove_after_insert` where a log relay reads the inserts (PostgreSQL, MariaDB);
    /// message mode on PostgreSQL only (logical messages are PostgreSQL's).
    pub fn runs_on(&self, backend: sea_orm::DbBackend) -> bool {
        use sea_orm::DbBackend;
        match self {
            Self::Table {
                remove_after_insert: false,
            } => true,
            Self::Table {
                remove_after_insert: true,
            } => matches!(backend, DbBackend::Postgres | DbBackend::MySql),
            Self::Message { .. } => backend == DbBackend::Postgres,
        }
    }

    /// The message prefix (message mode).
    pub fn message_prefix(&self) -> Option<&str> {
        match self {
            Self::Message { prefix } => Some(prefix),
            Self::Table { .. } => None,
        }
    }

    /// Why the mode's settings are invalid: a message prefix must be 1 to 128 printable
    /// ASCII characters.
    pub(crate) fn problem(&self) -> Option<String> {
        let prefix = self.message_prefix()?;
        if prefix.is_empty() || prefix.len() > MAX_MESSAGE_PREFIX_LEN {
            return Some(format!(
                "message prefix {prefix:?} must have 1 to {MAX_MESSAGE_PREFIX_LEN} characters"
            ));
        }
        prefix
            .chars()
            .find(|c| !c.is_ascii_graphic())
            .map(|c| format!("message prefix {prefix:?} has {c:?}: printable ASCII only"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_and_their_names() {
        assert_eq!(WriteMode::default(), WriteMode::table());
        assert_eq!(WriteMode::table().as_str(), "table");
        assert!(WriteMode::table().keeps_rows());
        assert!(!WriteMode::table_removed_after_insert().keeps_rows());
        assert_eq!(WriteMode::message().message_prefix(), Some("outbox"));
        assert_eq!(WriteMode::message().problem(), None);
        assert!(WriteMode::message_with_prefix("").problem().is_some());
        assert!(WriteMode::message_with_prefix("a b").problem().is_some());
        assert!(
            WriteMode::message_with_prefix("x".repeat(129))
                .problem()
                .is_some()
        );
    }
}
