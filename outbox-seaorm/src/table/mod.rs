//! Table names and column names of the outbox and inbox tables.
//!
//! Table names are configurable and end up in SQL, so they are validated as plain SQL
//! identifiers before they get anywhere near a statement: `[A-Za-z_][A-Za-z0-9_]*`, at most
//! 63 characters (PostgreSQL's limit; MariaDB allows 64), optionally qualified by a schema
//! written the same way (`schema.table`). Everything else — quotes, backticks, semicolons,
//! whitespace, non-ASCII letters, empty parts — is rejected with [`InvalidTableName`]. The
//! statements then quote every identifier anyway (sea-query's `Alias`), so a valid name is
//! used verbatim, case included.
//!
//! ```
//! use outbox_seaorm::table::{IdentifierProblem, TableName};
//!
//! let name = TableName::new("billing.outbox")?;
//! assert_eq!(name.schema(), Some("billing"));
//! assert_eq!(name.table(), "outbox");
//!
//! let error = TableName::new("outbox; DROP TABLE orders").unwrap_err();
//! assert!(matches!(error.reason, IdentifierProblem::InvalidCharacter { character: ';', .. }));
//! # Ok::<(), outbox_seaorm::table::InvalidTableName>(())
//! ```
//!
//! # Column names
//!
//! [`ColumnNaming::Standard`] names the outbox columns after the envelope fields
//! (`message_id`, `event_type`, `aggregate_type`, `aggregate_id`, `payload`, …).
//! [`ColumnNaming::Debezium`] renames the five columns Debezium's *Outbox Event Router* reads
//! by default, so a team can move from the relay to change data capture with Kafka Connect
//! without migrating data:
//!
//! | envelope field | `Standard` | `Debezium` |
//! |---|---|---|
//! | message id | `message_id` | `id` |
//! | event type | `event_type` | `type` |
//! | aggregate type | `aggregate_type` | `aggregatetype` |
//! | aggregate id | `aggregate_id` | `aggregateid` |
//! | payload | `payload` | `payload` |
//!
//! Every other column keeps its standard name (`worker_key`, `retryable` and `priority`, the
//! job-queue columns, included: the Outbox Event Router ignores them). The connector
//! configuration for the Debezium naming (PostgreSQL, table `public.outbox`) is then:
//!
//! ```properties
//! table.include.list=public.outbox
//! transforms=outbox
//! transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
//! # the defaults, spelled out: id, aggregateid (message key), payload, aggregatetype (topic)
//! transforms.outbox.table.field.event.id=id
//! transforms.outbox.table.field.event.key=aggregateid
//! transforms.outbox.table.field.event.payload=payload
//! transforms.outbox.route.by.field=aggregatetype
//! transforms.outbox.route.topic.replacement=outbox.event.${routedByValue}
//! # the payload column holds JSON: emit it as a JSON document, not a string
//! transforms.outbox.table.expand.json.payload=true
//! # carry the envelope metadata as Kafka headers
//! transforms.outbox.table.fields.additional.placement=type:header:eventType,version:header,correlation_id:header,causation_id:header,traceparent:header,tracestate:header,occurred_at:header
//! ```
//!
//! With change data capture the relay of this crate must not run on that table (Debezium
//! publishes every insert from the write-ahead log); rows then stay `pending` and only need
//! periodic deletion.

use std::fmt;

mod derived;
mod periodic;
mod unique;
mod worker_slots;

pub use derived::RelayTables;
pub(crate) use derived::{TableNames, index_name};
pub(crate) use periodic::PeriodicColumn;
pub(crate) use unique::UniqueColumn;
pub(crate) use worker_slots::WorkerSlotColumn;

/// The scheduled table's own column: the user's key of a scheduled row (see
/// [`crate::schedule`]).
pub const SCHEDULE_KEY_COLUMN: &str = "schedule_key";

/// Longest identifier accepted, in characters: PostgreSQL's `NAMEDATALEN - 1`.
pub const MAX_IDENTIFIER_LEN: usize = 63;

/// A validated, optionally schema-qualified table name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TableName {
    schema: Option<String>,
    table: String,
}

/// A table name was rejected. Nothing was executed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid table name {name:?}: {reason}")]
#[non_exhaustive]
pub struct InvalidTableName {
    /// The rejected name, as given.
    pub name: String,
    /// What is wrong with it.
    pub reason: IdentifierProblem,
}

/// Why a string is not a valid SQL identifier (or `schema.table` pair of identifiers).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum IdentifierProblem {
    /// The name, or one part of `schema.table`, is empty.
    Empty,
    /// More than [`MAX_IDENTIFIER_LEN`] characters in one part.
    TooLong {
        /// Characters in the offending part.
        length: usize,
        /// The limit.
        max: usize,
    },
    /// The first character is not an ASCII letter or `_`.
    InvalidStart {
        /// The character found.
        character: char,
    },
    /// A character other than an ASCII letter, digit or `_`.
    InvalidCharacter {
        /// The character found.
        character: char,
        /// Its position (in characters) in the whole name.
        position: usize,
    },
    /// More than one `.`: only `table` and `schema.table` are accepted.
    TooManyParts,
}

impl fmt::Display for IdentifierProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const RULE: &str = "a table name is `[A-Za-z_][A-Za-z0-9_]*` (at most 63 characters), \
                            optionally prefixed by a schema written the same way and a dot";
        match self {
            Self::Empty => write!(f, "it (or one of its parts) is empty; {RULE}"),
            Self::TooLong { length, max } => {
                write!(f, "a part is {length} characters long, over {max}; {RULE}")
            }
            Self::InvalidStart { character } => {
                write!(f, "a part starts with {character:?}; {RULE}")
            }
            Self::InvalidCharacter {
                character,
                position,
            } => write!(f, "character {character:?} at position {position}; {RULE}"),
            Self::TooManyParts => write!(f, "it has more than one `.`; {RULE}"),
        }
    }
}

fn check_identifier(part: &str, offset: usize) -> Result<(), IdentifierProblem> {
    let mut chars = part.chars();
    let Some(first) = chars.next() else {
        return Err(IdentifierProblem::Empty);
    };
    if !(first.is_ascii_alphabetic() || first == '_') {
        return Err(IdentifierProblem::InvalidStart { character: first });
    }
    for (index, character) in part.chars().enumerate().skip(1) {
        if !(character.is_ascii_alphanumeric() || character == '_') {
            return Err(IdentifierProblem::InvalidCharacter {
                character,
                position: offset + index,
            });
        }
    }
    // All ASCII from here on, so bytes are characters.
    if part.len() > MAX_IDENTIFIER_LEN {
        return Err(IdentifierProblem::TooLong {
            length: part.len(),
            max: MAX_IDENTIFIER_LEN,
        });
    }
    Ok(())
}

/// Validates a plain identifier (no schema), e.g. a PostgreSQL `NOTIFY` channel.
pub(crate) fn validate_identifier(name: &str) -> Result<(), IdentifierProblem> {
    check_identifier(name, 0)
}

impl TableName {
    /// Validates `name` (`table` or `schema.table`).
    ///
    /// # Errors
    /// [`InvalidTableName`] naming the rule that `name` breaks.
    pub fn new(name: &str) -> Result<Self, InvalidTableName> {
        let fail = |reason| InvalidTableName {
            name: name.to_owned(),
            reason,
        };
        let mut parts = name.split('.');
        let first = parts.next().unwrap_or_default();
        let second = parts.next();
        if parts.next().is_some() {
            return Err(fail(IdentifierProblem::TooManyParts));
        }
        match second {
            None => {
                check_identifier(first, 0).map_err(fail)?;
                Ok(Self {
                    schema: None,
                    table: first.to_owned(),
                })
            }
            Some(table) => {
                check_identifier(first, 0).map_err(fail)?;
                check_identifier(table, first.chars().count() + 1).map_err(fail)?;
                Ok(Self {
                    schema: Some(first.to_owned()),
                    table: table.to_owned(),
                })
            }
        }
    }

    /// The schema (PostgreSQL schema, MariaDB database, SQLite attached database), if
    /// qualified.
    pub fn schema(&self) -> Option<&str> {
        self.schema.as_deref()
    }

    /// The table name without schema.
    pub fn table(&self) -> &str {
        &self.table
    }
}

impl fmt::Display for TableName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.schema {
            Some(schema) => write!(f, "{schema}.{}", self.table),
            None => f.write_str(&self.table),
        }
    }
}

impl std::str::FromStr for TableName {
    type Err = InvalidTableName;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Self::new(name)
    }
}

/// How the outbox columns that Debezium's Outbox Event Router reads are named. See the
/// [module documentation](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ColumnNaming {
    /// Columns named after the envelope fields (the default).
    #[default]
    Standard,
    /// `id`, `type`, `aggregatetype`, `aggregateid`, `payload`: the Outbox Event Router's
    /// defaults.
    Debezium,
}

/// The column names of an outbox table, as given by a [`ColumnNaming`].
///
/// For writing queries by hand (dashboards, other languages). Quote them: `partition` and
/// `type` are reserved words in some databases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct OutboxColumns {
    /// Insert order, `bigint` identity / autoincrement primary key.
    pub seq: &'static str,
    /// The message id (UUIDv7, unique).
    pub message_id: &'static str,
    /// The versioned contract name.
    pub event_type: &'static str,
    /// The contract version.
    pub version: &'static str,
    /// The aggregate type.
    pub aggregate_type: &'static str,
    /// The aggregate id (the key).
    pub aggregate_id: &'static str,
    /// `fnv1a_64(aggregate_id) % partitions`, see [`crate::partition`].
    pub partition: &'static str,
    /// Correlation id.
    pub correlation_id: &'static str,
    /// Causation id.
    pub causation_id: &'static str,
    /// W3C `traceparent`.
    pub traceparent: &'static str,
    /// W3C `tracestate`.
    pub tracestate: &'static str,
    /// Headers, a JSON object of strings.
    pub headers: &'static str,
    /// When the event occurred.
    pub occurred_at: &'static str,
    /// The contract as JSON.
    pub payload: &'static str,
    /// `pending`, `published`, `dead`, `skipped` or `failed`.
    pub status: &'static str,
    /// Failed publication attempts so far.
    pub attempts: &'static str,
    /// Earliest time of the next publication attempt.
    pub next_attempt_at: &'static str,
    /// Error of the last failed attempt.
    pub last_error: &'static str,
    /// When the row was published.
    pub published_at: &'static str,
    /// When the row was written (the unit of work's clock at commit).
    pub created_at: &'static str,
    /// Which keyed relays may claim the row (job-queue mode, see [`crate::job`]); `NULL`
    /// for event types without a job entry.
    pub worker_key: &'static str,
    /// Whether a failed attempt may be retried; `false` sends the row to `failed` on its
    /// first failure (see [`crate::job`]).
    pub retryable: &'static str,
    /// The claim order of a worker key's jobs: lower first, `0` (the default) before `9`
    /// (see [`Job::priority`](crate::job::Job::priority)).
    pub priority: &'static str,
}

impl OutboxColumns {
    pub(crate) const STANDARD: Self = Self {
        seq: "seq",
        message_id: "message_id",
        event_type: "event_type",
        version: "version",
        aggregate_type: "aggregate_type",
        aggregate_id: "aggregate_id",
        partition: "partition",
        correlation_id: "correlation_id",
        causation_id: "causation_id",
        traceparent: "traceparent",
        tracestate: "tracestate",
        headers: "headers",
        occurred_at: "occurred_at",
        payload: "payload",
        status: "status",
        attempts: "attempts",
        next_attempt_at: "next_attempt_at",
        last_error: "last_error",
        published_at: "published_at",
        created_at: "created_at",
        worker_key: "worker_key",
        retryable: "retryable",
        priority: "priority",
    };

    /// The column names of `naming`.
    pub const fn of(naming: ColumnNaming) -> Self {
        match naming {
            ColumnNaming::Standard => Self::STANDARD,
            ColumnNaming::Debezium => Self {
                message_id: "id",
                event_type: "type",
                aggregate_type: "aggregatetype",
                aggregate_id: "aggregateid",
                payload: "payload",
                ..Self::STANDARD
            },
        }
    }
}

/// The column names of an inbox table (fixed).
pub mod inbox_columns {
    /// The incoming message id; primary key with [`CONSUMER`].
    pub const MESSAGE_ID: &str = "message_id";
    /// The consumer (handler) name; primary key with [`MESSAGE_ID`].
    pub const CONSUMER: &str = "consumer";
    /// The incoming message's event type.
    pub const EVENT_TYPE: &str = "event_type";
    /// When the message was received.
    pub const RECEIVED_AT: &str = "received_at";
    /// When the handler's transaction processed it.
    pub const PROCESSED_AT: &str = "processed_at";
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(name: &str) -> IdentifierProblem {
        match TableName::new(name) {
            Ok(ok) => panic!("{name:?} was accepted as {ok:?}"),
            Err(error) => {
                assert_eq!(error.name, name);
                error.reason
            }
        }
    }

    #[test]
    fn accepts_identifiers_and_schema_pairs() {
        for name in ["outbox", "_x", "Outbox_2", "a", &"x".repeat(63)] {
            let parsed = TableName::new(name).unwrap();
            assert_eq!(parsed.to_string(), name);
            assert_eq!(parsed.schema(), None);
        }
        let parsed: TableName = "billing.outbox_v2".parse().unwrap();
        assert_eq!(parsed.schema(), Some("billing"));
        assert_eq!(parsed.table(), "outbox_v2");
        assert_eq!(parsed.to_string(), "billing.outbox_v2");
    }

    #[test]
    fn rejects_injection_attempts_and_malformed_names() {
        assert!(matches!(
            reason("outbox; DROP TABLE x"),
            IdentifierProblem::InvalidCharacter {
                character: ';',
                position: 6
            }
        ));
        assert!(matches!(
            reason("outbox\"; DROP TABLE x; --"),
            IdentifierProblem::InvalidCharacter { character: '"', .. }
        ));
        assert!(matches!(
            reason("`outbox`"),
            IdentifierProblem::InvalidStart { character: '`' }
        ));
        assert!(matches!(
            reason("out`box"),
            IdentifierProblem::InvalidCharacter { character: '`', .. }
        ));
        assert!(matches!(
            reason("o'box"),
            IdentifierProblem::InvalidCharacter {
                character: '\'',
                ..
            }
        ));
        assert!(matches!(reason(""), IdentifierProblem::Empty));
        assert!(matches!(reason("."), IdentifierProblem::Empty));
        assert!(matches!(reason("schema."), IdentifierProblem::Empty));
        assert!(matches!(reason(".outbox"), IdentifierProblem::Empty));
        assert!(matches!(reason("a.b.c"), IdentifierProblem::TooManyParts));
        assert!(matches!(
            reason(&"x".repeat(64)),
            IdentifierProblem::TooLong {
                length: 64,
                max: 63
            }
        ));
        assert!(matches!(
            reason(&format!("s.{}", "x".repeat(64))),
            IdentifierProblem::TooLong { length: 64, .. }
        ));
        assert!(matches!(
            reason("outbøx"),
            IdentifierProblem::InvalidCharacter {
                character: 'ø',
                position: 4
            }
        ));
        assert!(matches!(
            reason("ünicode"),
            IdentifierProblem::InvalidStart { character: 'ü' }
        ));
        assert!(matches!(
            reason("out box"),
            IdentifierProblem::InvalidCharacter { character: ' ', .. }
        ));
        assert!(matches!(
            reason(" outbox"),
            IdentifierProblem::InvalidStart { character: ' ' }
        ));
        assert!(matches!(
            reason("outbox\n"),
            IdentifierProblem::InvalidCharacter {
                character: '\n',
                ..
            }
        ));
        assert!(matches!(
            reason("outbox\t"),
            IdentifierProblem::InvalidCharacter {
                character: '\t',
                ..
            }
        ));
        assert!(matches!(
            reason("outbox\0"),
            IdentifierProblem::InvalidCharacter {
                character: '\0',
                ..
            }
        ));
        assert!(matches!(
            reason("1outbox"),
            IdentifierProblem::InvalidStart { character: '1' }
        ));
        assert!(matches!(
            reason("out-box"),
            IdentifierProblem::InvalidCharacter { character: '-', .. }
        ));
        assert!(matches!(
            reason("s.out box"),
            IdentifierProblem::InvalidCharacter {
                character: ' ',
                position: 5
            }
        ));
    }

    #[test]
    fn error_message_names_the_rule() {
        let error = TableName::new("a;b").unwrap_err();
        let message = error.to_string();
        assert!(message.contains("\"a;b\""), "{message}");
        assert!(message.contains("[A-Za-z_][A-Za-z0-9_]*"), "{message}");
    }

    #[test]
    fn debezium_naming_renames_the_router_columns_only() {
        let columns = OutboxColumns::of(ColumnNaming::Debezium);
        assert_eq!(columns.message_id, "id");
        assert_eq!(columns.event_type, "type");
        assert_eq!(columns.aggregate_type, "aggregatetype");
        assert_eq!(columns.aggregate_id, "aggregateid");
        assert_eq!(columns.payload, "payload");
        assert_eq!(columns.seq, "seq");
        assert_eq!(
            OutboxColumns::of(ColumnNaming::Standard).message_id,
            "message_id"
        );
    }
}
