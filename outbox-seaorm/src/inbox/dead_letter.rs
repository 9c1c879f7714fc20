//! The consumer dead-letter table: messages a consumer could not handle, with why.
//!
//! `<inbox>_dead_letters` (created by [`schema::install`](crate::schema::install) and the
//! migration [`CreateInboxDeadLetters`](crate::migration::CreateInboxDeadLetters)):
//!
//! | column | meaning |
//! |---|---|
//! | `id` | identity |
//! | `message_id` | the message's id, `NULL` when it could not be read |
//! | `consumer` | the consumer name |
//! | `event_type` | the message's event type, `NULL` when it could not be read |
//! | `aggregate_type`, `aggregate_id` | the message's aggregate, `NULL` when it could not be read: under [`DeadLetterPolicy::Block`](outbox_core::policy::DeadLetterPolicy::Block) a `dead` or `requeued` letter holds the later messages of its aggregate ([`super::parked`]) |
//! | `reason` | `malformed`, `unsupported_version`, `unknown_event_type`, `handler_failed` |
//! | `error` | the last error, as text (at most [`MAX_ERROR_CHARS`](crate::limits::MAX_ERROR_CHARS) characters) |
//! | `attempts` | handler attempts made (0 when the message was never handled) |
//! | `format` | `envelope` (`message` is the envelope's JSON) or `binary` (`message` is a [`RawMessage`]: the transport headers and body as received, bounded) |
//! | `message` | the message, to requeue or inspect |
//! | `status` | `dead`, `requeued` (an operator asked for a new attempt), `resolved` (a requeued message was applied or found a duplicate), `skipped` (an operator gave it up, with a reason) |
//! | `dead_at`, `requeued_at`, `requeued_by`, `resolved_at` | when and by whom |
//! | `skipped_at`, `skipped_by`, `skip_reason` | when, by whom and why it was skipped |
//!
//! # Bounded
//!
//! A dead letter must always be writable, whatever came in. A message that could not be
//! decoded is stored as a [`RawMessage`]: at most [`MAX_STORED_HEADERS`] headers of at most
//! [`MAX_STORED_HEADER_BYTES`] each, and a body of at most [`MAX_STORED_BODY_BYTES`] (a
//! larger body keeps its first [`MAX_STORED_BODY_BYTES`] bytes), always with the body's full
//! size and SHA-256 digest, so that the original can be found and compared. A message over
//! the payload or metadata limit is stored that way too. Such a cut message cannot be
//! redelivered (requeueing it fails again, saying so): skip it once it is understood.
//!
//! Operators list, show, requeue and skip dead letters with
//! [`Operations`](crate::ops::Operations) (`consumer_dead_letters`,
//! `requeue_consumer_dead_letter`, `skip_consumer_dead_letter`) or the CLI
//! (`outbox inbox-dead …`); a running [`Consumer`](super::Consumer) redelivers requeued ones to
//! its handlers.
//!
//! [`MAX_STORED_HEADERS`]: crate::limits::MAX_STORED_HEADERS
//! [`MAX_STORED_HEADER_BYTES`]: crate::limits::MAX_STORED_HEADER_BYTES
//! [`MAX_STORED_BODY_BYTES`]: crate::limits::MAX_STORED_BODY_BYTES

use chrono::{DateTime, Utc};
use outbox_core::{Envelope, cloudevents};
use sea_orm::{ConnectionTrait, DbBackend, DbErr, QueryResult};
use uuid::Uuid;

use crate::config::Outbox;
use crate::limits::{self, MAX_STORED_BODY_BYTES, MAX_STORED_HEADER_BYTES, MAX_STORED_HEADERS};
use crate::sql::dialect::{self as sql, quote};
use crate::sql::statement::Sql;
use crate::table::TableName;

/// The dead-letter table of `outbox`'s inbox: `<inbox>_dead_letters`.
pub fn table(outbox: &Outbox) -> TableName {
    outbox.tables().dead_letters.clone()
}

/// The state of a dead letter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DeadLetterStatus {
    /// Waiting for an operator.
    Dead,
    /// An operator asked for a new attempt; the consumer picks it up.
    Requeued,
    /// A requeued message was handled (applied, or found already applied).
    Resolved,
    /// An operator gave it up, with a reason: it no longer holds its aggregate.
    Skipped,
}

impl DeadLetterStatus {
    /// The stored value.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Dead => "dead",
            Self::Requeued => "requeued",
            Self::Resolved => "resolved",
            Self::Skipped => "skipped",
        }
    }

    /// Whether a letter in this state holds the later messages of its aggregate (under
    /// [`DeadLetterPolicy::Block`](outbox_core::policy::DeadLetterPolicy::Block)): `dead` and
    /// `requeued`.
    pub const fn holds_aggregate(self) -> bool {
        matches!(self, Self::Dead | Self::Requeued)
    }

    /// Parses a stored value.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "dead" => Some(Self::Dead),
            "requeued" => Some(Self::Requeued),
            "resolved" => Some(Self::Resolved),
            "skipped" => Some(Self::Skipped),
            _ => None,
        }
    }
}

/// How a dead letter's `message` column is stored.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum StoredMessage {
    /// A decoded envelope.
    Envelope(Box<Envelope>),
    /// Transport headers and body that could not be decoded, bounded.
    Binary(RawMessage),
}

/// The transport headers and body of a message that could not be decoded, as a dead letter
/// stores them: bounded (see the [module documentation](self#bounded)), with the body's
/// full size and SHA-256 digest.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct RawMessage {
    /// Header names and values, in the order received (at most
    /// [`MAX_STORED_HEADERS`], each name and value cut to
    /// [`MAX_STORED_HEADER_BYTES`] with `…`).
    pub headers: Vec<(String, String)>,
    /// Headers received beyond those stored.
    #[serde(default)]
    pub headers_dropped: usize,
    /// The body as lossy UTF-8; when the body was larger than
    /// [`MAX_STORED_BODY_BYTES`], its first bytes.
    pub body: String,
    /// The body's size as received, in bytes.
    #[serde(default)]
    pub body_bytes: u64,
    /// The SHA-256 digest of the body as received, lowercase hex.
    #[serde(default)]
    pub body_sha256: String,
    /// Whether anything was cut (the body, a header, or headers dropped): the message cannot
    /// be redelivered as it was received.
    #[serde(default)]
    pub truncated: bool,
}

impl RawMessage {
    /// Captures `headers` and `body` for storage, bounded.
    pub fn capture<K: AsRef<str>, V: AsRef<str>>(headers: &[(K, V)], body: &[u8]) -> Self {
        use sha2::Digest as _;

        let mut truncated = false;
        let mut cut = |text: &str| {
            if text.len() > MAX_STORED_HEADER_BYTES {
                truncated = true;
            }
            limits::bytes(text, MAX_STORED_HEADER_BYTES)
        };
        let stored: Vec<(String, String)> = headers
            .iter()
            .take(MAX_STORED_HEADERS)
            .map(|(name, value)| (cut(name.as_ref()), cut(value.as_ref())))
            .collect();
        let headers_dropped = headers.len().saturating_sub(MAX_STORED_HEADERS);
        let kept = body.len().min(MAX_STORED_BODY_BYTES);
        let text = String::from_utf8_lossy(body.get(..kept).unwrap_or(body)).into_owned();
        let digest = sha2::Sha256::digest(body);
        let mut body_sha256 = String::with_capacity(64);
        for byte in digest.iter() {
            use std::fmt::Write as _;
            let _ = write!(body_sha256, "{byte:02x}");
        }
        Self {
            headers: stored,
            headers_dropped,
            body: text,
            body_bytes: u64::try_from(body.len()).unwrap_or(u64::MAX),
            body_sha256,
            truncated: truncated || headers_dropped > 0 || kept < body.len(),
        }
    }

    /// An envelope that is over a limit, stored as its CloudEvents binary-mode form (or, if
    /// even that cannot be built, its payload alone), bounded.
    pub fn of_envelope(envelope: &Envelope) -> Self {
        match cloudevents::to_binary(envelope) {
            Ok(message) => Self::capture(&message.headers, &message.body),
            Err(_) => Self::capture::<&str, &str>(&[], envelope.payload.as_bytes()),
        }
    }
}

/// One row of the consumer dead-letter table.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ConsumerDeadLetter {
    /// Identity.
    pub id: i64,
    /// The message id, when it could be read.
    pub message_id: Option<Uuid>,
    /// The consumer.
    pub consumer: String,
    /// The event type, when it could be read.
    pub event_type: Option<String>,
    /// The aggregate type and id, when they could be read.
    pub aggregate: Option<(String, String)>,
    /// `malformed`, `unsupported_version`, `unknown_event_type` or `handler_failed`.
    pub reason: String,
    /// The last error.
    pub error: String,
    /// Handler attempts made.
    pub attempts: u32,
    /// The message.
    pub message: StoredMessage,
    /// The state.
    pub status: DeadLetterStatus,
    /// When it was dead-lettered.
    pub dead_at: DateTime<Utc>,
    /// When an operator requeued it.
    pub requeued_at: Option<DateTime<Utc>>,
    /// Who requeued it.
    pub requeued_by: Option<String>,
    /// When a requeued attempt succeeded.
    pub resolved_at: Option<DateTime<Utc>>,
    /// When an operator skipped it.
    pub skipped_at: Option<DateTime<Utc>>,
    /// Who skipped it.
    pub skipped_by: Option<String>,
    /// Why.
    pub skip_reason: Option<String>,
}

/// What to write for a new dead letter.
pub(crate) struct NewDeadLetter<'a> {
    pub(crate) message_id: Option<Uuid>,
    pub(crate) consumer: &'a str,
    pub(crate) event_type: Option<&'a str>,
    pub(crate) aggregate: Option<(&'a str, &'a str)>,
    pub(crate) reason: &'static str,
    pub(crate) error: String,
    pub(crate) attempts: u32,
    pub(crate) message: StoredMessage,
}

/// A key value as the `varchar(255)` columns take it.
fn key(value: &str) -> String {
    value.chars().take(255).collect()
}

fn encode_message(message: &StoredMessage) -> Result<(&'static str, String), DbErr> {
    let json = |e: serde_json::Error| DbErr::Json(e.to_string());
    let encoded = match message {
        StoredMessage::Envelope(envelope) => (
            "envelope",
            serde_json::to_string(envelope.as_ref()).map_err(json)?,
        ),
        StoredMessage::Binary(raw) => ("binary", serde_json::to_string(raw).map_err(json)?),
    };
    Ok(encoded)
}

fn decode_message(format: &str, text: &str) -> Result<StoredMessage, DbErr> {
    let bad = |e: serde_json::Error| DbErr::Json(format!("dead letter message: {e}"));
    match format {
        "envelope" => Ok(StoredMessage::Envelope(Box::new(
            serde_json::from_str(text).map_err(bad)?,
        ))),
        "binary" => Ok(StoredMessage::Binary(
            serde_json::from_str(text).map_err(bad)?,
        )),
        other => Err(DbErr::Type(format!("unknown dead letter format `{other}`"))),
    }
}

/// Inserts a dead letter; returns its id.
pub(crate) async fn insert<C: ConnectionTrait>(
    db: &C,
    outbox: &Outbox,
    letter: NewDeadLetter<'_>,
) -> Result<i64, DbErr> {
    let backend = db.get_database_backend();
    let (format, message) = encode_message(&letter.message)?;
    let mut statement = Sql::new(backend);
    statement
        .push("INSERT INTO ")
        .table(&table(outbox))
        .push(" (");
    let columns = [
        "message_id",
        "consumer",
        "event_type",
        "aggregate_type",
        "aggregate_id",
        "reason",
        "error",
        "attempts",
        "format",
        "message",
        "status",
        "dead_at",
    ];
    for (i, name) in columns.iter().enumerate() {
        if i > 0 {
            statement.push(", ");
        }
        statement.push(&quote(backend, name));
    }
    statement.push(") VALUES (");
    match letter.message_id {
        Some(id) => statement.bind(sql::uuid(backend, id)),
        None if backend == DbBackend::Postgres => statement.bind(sea_orm::Value::Uuid(None)),
        None => statement.bind(sql::opt_text(None)),
    };
    statement.push(", ");
    statement.bind(sql::text(letter.consumer)).push(", ");
    statement
        .bind(sql::opt_text(letter.event_type.map(key)))
        .push(", ");
    statement
        .bind(sql::opt_text(letter.aggregate.map(|(t, _)| key(t))))
        .push(", ");
    statement
        .bind(sql::opt_text(letter.aggregate.map(|(_, id)| key(id))))
        .push(", ");
    statement.bind(sql::text(letter.reason)).push(", ");
    statement
        .bind(sql::text(limits::error_text(&letter.error)))
        .push(", ");
    statement
        .bind(sea_orm::Value::Int(Some(
            i32::try_from(letter.attempts).unwrap_or(i32::MAX),
        )))
        .push(", ");
    statement.bind(sql::text(format)).push(", ");
    statement.bind(sql::text(message)).push(", ");
    statement
        .bind(sql::text(DeadLetterStatus::Dead.as_str()))
        .push(", ");
    statement
        .bind(sql::timestamp(backend, outbox.clock().now()))
        .push(")");
    if backend == DbBackend::MySql {
        // The id comes back with the INSERT's own result (the OK packet): a separate
        // `SELECT LAST_INSERT_ID()` may run on another pooled connection, and returns
        // `BIGINT UNSIGNED`, which does not decode as i64.
        let result = db.execute_raw(statement.build()).await?;
        return i64::try_from(result.last_insert_id())
            .map_err(|e| DbErr::Type(format!("dead letter id: {e}")));
    }
    statement.push(" RETURNING ").push(&quote(backend, "id"));
    let row = db
        .query_one_raw(statement.build())
        .await?
        .ok_or(DbErr::RecordNotInserted)?;
    sql::read_i64(&row, "id")
}

const SELECT_COLUMNS: [&str; 19] = [
    "id",
    "message_id",
    "consumer",
    "event_type",
    "aggregate_type",
    "aggregate_id",
    "reason",
    "error",
    "attempts",
    "format",
    "message",
    "status",
    "dead_at",
    "requeued_at",
    "requeued_by",
    "resolved_at",
    "skipped_at",
    "skipped_by",
    "skip_reason",
];

fn select(backend: DbBackend, outbox: &Outbox) -> Sql {
    let mut statement = Sql::new(backend);
    statement.push("SELECT ");
    for (i, name) in SELECT_COLUMNS.iter().enumerate() {
        if i > 0 {
            statement.push(", ");
        }
        statement.push(&quote(backend, name));
    }
    statement.push(" FROM ").table(&table(outbox));
    statement
}

fn read_row(row: &QueryResult) -> Result<ConsumerDeadLetter, DbErr> {
    let message_id = match row.try_get::<Option<String>>("", "message_id") {
        Ok(text) => text
            .map(|text| Uuid::parse_str(&text).map_err(|e| DbErr::Type(e.to_string())))
            .transpose()?,
        Err(_) => row.try_get::<Option<Uuid>>("", "message_id")?,
    };
    let format: String = row.try_get("", "format")?;
    let message: String = row.try_get("", "message")?;
    let status: String = row.try_get("", "status")?;
    Ok(ConsumerDeadLetter {
        id: sql::read_i64(row, "id")?,
        message_id,
        consumer: row.try_get("", "consumer")?,
        event_type: row.try_get("", "event_type")?,
        aggregate: match (
            row.try_get::<Option<String>>("", "aggregate_type")?,
            row.try_get::<Option<String>>("", "aggregate_id")?,
        ) {
            (Some(aggregate_type), Some(aggregate_id)) => Some((aggregate_type, aggregate_id)),
            _ => None,
        },
        reason: row.try_get("", "reason")?,
        error: row.try_get("", "error")?,
        attempts: u32::try_from(sql::read_i64(row, "attempts")?).unwrap_or(0),
        message: decode_message(&format, &message)?,
        status: DeadLetterStatus::parse(&status)
            .ok_or_else(|| DbErr::Type(format!("unknown dead letter status `{status}`")))?,
        dead_at: sql::read_timestamp(row, "dead_at")?
            .ok_or_else(|| DbErr::Type("dead letter `dead_at` is NULL".into()))?,
        requeued_at: sql::read_timestamp(row, "requeued_at")?,
        requeued_by: row.try_get("", "requeued_by")?,
        resolved_at: sql::read_timestamp(row, "resolved_at")?,
        skipped_at: sql::read_timestamp(row, "skipped_at")?,
        skipped_by: row.try_get("", "skipped_by")?,
        skip_reason: row.try_get("", "skip_reason")?,
    })
}

/// Dead letters, oldest first, filtered by consumer and status.
pub(crate) async fn list<C: ConnectionTrait>(
    db: &C,
    outbox: &Outbox,
    consumer: Option<&str>,
    status: Option<DeadLetterStatus>,
    limit: u64,
) -> Result<Vec<ConsumerDeadLetter>, DbErr> {
    let backend = db.get_database_backend();
    let mut statement = select(backend, outbox);
    statement.push(" WHERE 1 = 1");
    if let Some(consumer) = consumer {
        statement
            .push(" AND ")
            .push(&quote(backend, "consumer"))
            .push(" = ")
            .bind(sql::text(consumer));
    }
    if let Some(status) = status {
        statement
            .push(" AND ")
            .push(&quote(backend, "status"))
            .push(" = ")
            .bind(sql::text(status.as_str()));
    }
    statement
        .push(" ORDER BY ")
        .push(&quote(backend, "id"))
        .push(&format!(" LIMIT {limit}"));
    db.query_all_raw(statement.build())
        .await?
        .iter()
        .map(read_row)
        .collect()
}

/// One dead letter by id.
pub(crate) async fn find<C: ConnectionTrait>(
    db: &C,
    outbox: &Outbox,
    id: i64,
) -> Result<Option<ConsumerDeadLetter>, DbErr> {
    let backend = db.get_database_backend();
    let mut statement = select(backend, outbox);
    statement
        .push(" WHERE ")
        .push(&quote(backend, "id"))
        .push(" = ")
        .bind(sea_orm::Value::BigInt(Some(id)));
    db.query_one_raw(statement.build())
        .await?
        .as_ref()
        .map(read_row)
        .transpose()
}

/// Who moves a dead letter, and why (skips need a reason).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Actor<'a> {
    pub(crate) name: Option<&'a str>,
    pub(crate) reason: Option<&'a str>,
}

/// Moves a dead letter from `from` to `to`; returns whether it did.
pub(crate) async fn transition<C: ConnectionTrait>(
    db: &C,
    outbox: &Outbox,
    id: i64,
    from: DeadLetterStatus,
    to: DeadLetterStatus,
    actor: Actor<'_>,
) -> Result<bool, DbErr> {
    let backend = db.get_database_backend();
    let now = sql::timestamp(backend, outbox.clock().now());
    let mut statement = Sql::new(backend);
    statement
        .push("UPDATE ")
        .table(&table(outbox))
        .push(" SET ")
        .push(&quote(backend, "status"))
        .push(" = ")
        .bind(sql::text(to.as_str()));
    match to {
        DeadLetterStatus::Requeued => {
            statement
                .push(", ")
                .push(&quote(backend, "requeued_at"))
                .push(" = ")
                .bind(now)
                .push(", ")
                .push(&quote(backend, "requeued_by"))
                .push(" = ")
                .bind(sql::opt_text(actor.name.map(key)));
        }
        DeadLetterStatus::Resolved => {
            statement
                .push(", ")
                .push(&quote(backend, "resolved_at"))
                .push(" = ")
                .bind(now);
        }
        DeadLetterStatus::Skipped => {
            statement
                .push(", ")
                .push(&quote(backend, "skipped_at"))
                .push(" = ")
                .bind(now)
                .push(", ")
                .push(&quote(backend, "skipped_by"))
                .push(" = ")
                .bind(sql::opt_text(actor.name.map(key)))
                .push(", ")
                .push(&quote(backend, "skip_reason"))
                .push(" = ")
                .bind(sql::opt_text(actor.reason.map(limits::error_text)));
        }
        DeadLetterStatus::Dead => {}
    }
    statement
        .push(" WHERE ")
        .push(&quote(backend, "id"))
        .push(" = ")
        .bind(sea_orm::Value::BigInt(Some(id)))
        .push(" AND ")
        .push(&quote(backend, "status"))
        .push(" = ")
        .bind(sql::text(from.as_str()));
    Ok(db.execute_raw(statement.build()).await?.rows_affected() == 1)
}

/// Records a failed redelivery of a requeued dead letter: back to `dead`, with the new
/// error and attempts added.
pub(crate) async fn fail_again<C: ConnectionTrait>(
    db: &C,
    outbox: &Outbox,
    id: i64,
    error: &str,
    attempts: u32,
) -> Result<(), DbErr> {
    let backend = db.get_database_backend();
    let q = |n: &str| quote(backend, n);
    let mut statement = Sql::new(backend);
    statement
        .push("UPDATE ")
        .table(&table(outbox))
        .push(&format!(" SET {} = ", q("status")))
        .bind(sql::text(DeadLetterStatus::Dead.as_str()))
        .push(&format!(", {} = ", q("error")))
        .bind(sql::text(limits::error_text(error)))
        .push(&format!(", {0} = {0} + ", q("attempts")))
        .bind(sea_orm::Value::Int(Some(
            i32::try_from(attempts).unwrap_or(i32::MAX),
        )))
        .push(&format!(", {} = ", q("dead_at")))
        .bind(sql::timestamp(backend, outbox.clock().now()))
        .push(&format!(" WHERE {} = ", q("id")))
        .bind(sea_orm::Value::BigInt(Some(id)));
    db.execute_raw(statement.build()).await?;
    Ok(())
}
