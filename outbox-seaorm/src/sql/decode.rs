//! Decoding claimed rows ([`ClaimedRow`]): on PostgreSQL by position with native types,
//! elsewhere by name through [`OutboxRecord`].

#[cfg(feature = "postgres")]
use chrono::{DateTime, Utc};
use outbox_core::Envelope;
use sea_orm::{DbErr, FromQueryResult, QueryResult};

#[cfg(feature = "postgres")]
use super::columns::Column;
use super::dialect;
use crate::record::OutboxRecord;

/// One claimed row. The envelope may fail to decode (a poison row written by another
/// tool); the key columns are then read on their own so the row can still be
/// dead-lettered and its aggregate held back.
#[derive(Debug)]
pub(crate) struct ClaimedRow {
    pub(crate) seq: i64,
    pub(crate) attempts: i32,
    /// The row's worker key (job-queue mode).
    pub(crate) worker_key: Option<String>,
    /// `false`: a failed attempt marks the row `failed` (job-queue mode).
    pub(crate) retryable: bool,
    /// The envelope, or why it cannot be read. Lent to the publisher while it publishes
    /// (see `relay::decide`).
    pub(crate) envelope: Result<Envelope, Unreadable>,
}

/// A row whose envelope cannot be read: its key columns and the reason.
#[derive(Debug)]
pub(crate) struct Unreadable {
    pub(crate) event_type: String,
    pub(crate) aggregate_type: String,
    pub(crate) aggregate_id: String,
    pub(crate) error: DbErr,
}

impl Unreadable {
    /// Stands in for an envelope lent to the publisher (allocates nothing).
    pub(crate) fn lent() -> Self {
        Self {
            event_type: String::new(),
            aggregate_type: String::new(),
            aggregate_id: String::new(),
            error: DbErr::Custom(String::new()),
        }
    }
}

impl ClaimedRow {
    /// The aggregate (type, id), from the envelope or the row.
    pub(crate) fn aggregate(&self) -> (&str, &str) {
        match &self.envelope {
            Ok(envelope) => (&envelope.aggregate_type, &envelope.aggregate_id),
            Err(unreadable) => (&unreadable.aggregate_type, &unreadable.aggregate_id),
        }
    }

    /// The event type, from the envelope or the row.
    pub(crate) fn event_type(&self) -> &str {
        match &self.envelope {
            Ok(envelope) => &envelope.event_type,
            Err(unreadable) => &unreadable.event_type,
        }
    }

    /// `(aggregate_type, aggregate_id)`, from the envelope or the row.
    pub(crate) fn key(&self) -> (&str, &str) {
        match &self.envelope {
            Ok(envelope) => (&envelope.aggregate_type, &envelope.aggregate_id),
            Err(unreadable) => (&unreadable.aggregate_type, &unreadable.aggregate_id),
        }
    }
}

#[cfg(feature = "postgres")]
/// Positions of the columns of a PostgreSQL claim ([`Store::select_list`]), from the one
/// column order.
struct PgColumn;

#[cfg(feature = "postgres")]
impl PgColumn {
    const SEQ: usize = Column::Seq.claim_position();
    const MESSAGE_ID: usize = Column::MessageId.claim_position();
    const EVENT_TYPE: usize = Column::EventType.claim_position();
    const VERSION: usize = Column::Version.claim_position();
    const AGGREGATE_TYPE: usize = Column::AggregateType.claim_position();
    const AGGREGATE_ID: usize = Column::AggregateId.claim_position();
    const CORRELATION_ID: usize = Column::CorrelationId.claim_position();
    const CAUSATION_ID: usize = Column::CausationId.claim_position();
    const TRACEPARENT: usize = Column::Traceparent.claim_position();
    const TRACESTATE: usize = Column::Tracestate.claim_position();
    const HEADERS: usize = Column::Headers.claim_position();
    const OCCURRED_AT: usize = Column::OccurredAt.claim_position();
    const PAYLOAD: usize = Column::Payload.claim_position();
    const ATTEMPTS: usize = Column::Attempts.claim_position();
    const WORKER_KEY: usize = Column::WorkerKey.claim_position();
    const RETRYABLE: usize = Column::Retryable.claim_position();
}

/// Turns the rows of a claim into [`ClaimedRow`]s. On PostgreSQL it reads the columns of
/// [`Store::select_list`](super::store::Store::select_list) by position with their native types and remembers the last event
/// type it validated, so that a batch of one contract parses its name once; elsewhere it
/// reads by name through [`OutboxRecord`]. A relay decodes every row it publishes: this is
/// most of its CPU time per row.
#[derive(Default)]
pub(crate) struct RowDecoder {
    #[cfg(feature = "postgres")]
    /// The last event type [`Envelope::from_parts`] accepted, its version, and an envelope
    /// of that type with nothing else (no allocation to clone).
    last: Option<(String, u32, Envelope)>,
}

#[cfg(feature = "postgres")]
/// A column value that failed to decode.
fn column_error(index: usize, error: impl std::fmt::Display) -> DbErr {
    DbErr::Type(format!("outbox column #{index}: {error}"))
}

#[cfg(feature = "postgres")]
type PgRow = sea_orm::sqlx::postgres::PgRow;

#[cfg(feature = "postgres")]
/// Decodes column `index` after checking that its type is compatible with `T`.
fn pg_get<'r, T>(row: &'r PgRow, index: usize) -> Result<T, DbErr>
where
    T: sea_orm::sqlx::Decode<'r, sea_orm::sqlx::Postgres>
        + sea_orm::sqlx::Type<sea_orm::sqlx::Postgres>,
{
    use sea_orm::sqlx::Row as _;
    row.try_get(index)
        .map_err(|error| column_error(index, error))
}

#[cfg(feature = "postgres")]
/// Decodes a text column without sqlx's type check (which compares type names for every
/// value): the text, varchar or name binary format is the UTF-8 string, which decoding
/// validates.
fn pg_text<'r, T>(row: &'r PgRow, index: usize) -> Result<T, DbErr>
where
    T: sea_orm::sqlx::Decode<'r, sea_orm::sqlx::Postgres>,
{
    use sea_orm::sqlx::Row as _;
    row.try_get_unchecked(index)
        .map_err(|error| column_error(index, error))
}

#[cfg(feature = "postgres")]
/// The headers column: a JSON object of strings (a non-string value is kept as its JSON
/// text; anything but an object reads as no headers).
fn pg_headers(row: &PgRow) -> Result<std::collections::BTreeMap<String, String>, DbErr> {
    use sea_orm::sqlx::types::Json;
    let index = PgColumn::HEADERS;
    // Nearly always `{}` or an object of strings: decoded straight into the map.
    if let Ok(Json(map)) = pg_get::<Json<std::collections::BTreeMap<String, String>>>(row, index) {
        return Ok(map);
    }
    Ok(match pg_get::<Json<serde_json::Value>>(row, index)?.0 {
        serde_json::Value::Object(map) => map
            .into_iter()
            .map(|(name, value)| match value {
                serde_json::Value::String(text) => (name, text),
                other => (name, other.to_string()),
            })
            .collect(),
        _ => Default::default(),
    })
}

impl RowDecoder {
    pub(crate) fn decode_all(&mut self, rows: &[QueryResult]) -> Result<Vec<ClaimedRow>, DbErr> {
        rows.iter().map(|row| self.decode(row)).collect()
    }

    fn decode(&mut self, row: &QueryResult) -> Result<ClaimedRow, DbErr> {
        #[cfg(feature = "postgres")]
        if let Some(row) = row.try_as_pg_row() {
            return self.decode_pg(row);
        }
        let seq = dialect::read_i64(row, "seq")?;
        let attempts = row.try_get("", "attempts")?;
        let worker_key = row.try_get("", "worker_key")?;
        let retryable = dialect::read_bool(row, "", "retryable")?;
        let envelope = match OutboxRecord::from_query_result(row, "") {
            Ok(record) => Ok(record.envelope),
            Err(error) => Err(Unreadable {
                event_type: row.try_get("", "event_type")?,
                aggregate_type: row.try_get("", "aggregate_type")?,
                aggregate_id: row.try_get("", "aggregate_id")?,
                error,
            }),
        };
        Ok(ClaimedRow {
            seq,
            attempts,
            worker_key,
            retryable,
            envelope,
        })
    }

    #[cfg(feature = "postgres")]
    fn decode_pg(&mut self, row: &PgRow) -> Result<ClaimedRow, DbErr> {
        let seq: i64 = pg_get(row, PgColumn::SEQ)?;
        let attempts: i32 = pg_get(row, PgColumn::ATTEMPTS)?;
        let worker_key: Option<String> = pg_text(row, PgColumn::WORKER_KEY)?;
        let retryable: bool = pg_get(row, PgColumn::RETRYABLE)?;
        let event_type: String = pg_text(row, PgColumn::EVENT_TYPE)?;
        let aggregate_type: String = pg_text(row, PgColumn::AGGREGATE_TYPE)?;
        let aggregate_id: String = pg_text(row, PgColumn::AGGREGATE_ID)?;
        let envelope = self
            .envelope_pg(row, event_type, aggregate_type, aggregate_id)
            .map_err(|unreadable| *unreadable);
        Ok(ClaimedRow {
            seq,
            attempts,
            worker_key,
            retryable,
            envelope,
        })
    }

    #[cfg(feature = "postgres")]
    /// The envelope of a PostgreSQL row, or the key columns back with the reason it cannot
    /// be read.
    fn envelope_pg(
        &mut self,
        row: &PgRow,
        event_type: String,
        aggregate_type: String,
        aggregate_id: String,
    ) -> Result<Envelope, Box<Unreadable>> {
        let unreadable = |event_type, aggregate_type, aggregate_id, error| {
            Box::new(Unreadable {
                event_type,
                aggregate_type,
                aggregate_id,
                error,
            })
        };
        use outbox_core::envelope::EnvelopeParts;
        use sea_orm::sqlx::types::Json;
        let fields = (|| {
            Ok::<_, DbErr>((
                pg_get::<i32>(row, PgColumn::VERSION)?,
                pg_get::<uuid::Uuid>(row, PgColumn::MESSAGE_ID)?,
                pg_get::<DateTime<Utc>>(row, PgColumn::OCCURRED_AT)?,
                pg_get::<Option<uuid::Uuid>>(row, PgColumn::CORRELATION_ID)?,
                pg_get::<Option<uuid::Uuid>>(row, PgColumn::CAUSATION_ID)?,
                pg_text::<Option<String>>(row, PgColumn::TRACEPARENT)?,
                pg_text::<Option<String>>(row, PgColumn::TRACESTATE)?,
                pg_headers(row)?,
                // The stored text, validated but not parsed into a tree: the broker gets it
                // as the body.
                pg_get::<Json<outbox_core::Payload>>(row, PgColumn::PAYLOAD)?.0,
            ))
        })();
        let (
            stored_version,
            message_id,
            occurred_at,
            correlation_id,
            causation_id,
            traceparent,
            tracestate,
            headers,
            payload,
        ) = match fields {
            Ok(fields) => fields,
            Err(error) => return Err(unreadable(event_type, aggregate_type, aggregate_id, error)),
        };
        let version_error = |event_type: &str| {
            DbErr::Type(format!(
                "outbox column `version`: {stored_version} disagrees with event type \
                 `{event_type}`"
            ))
        };
        // The same event type as the previous row: already validated.
        if let Some((last_type, version, template)) = &self.last
            && *last_type == event_type
        {
            let version = *version;
            if i64::from(version) != i64::from(stored_version) {
                let error = version_error(&event_type);
                return Err(unreadable(event_type, aggregate_type, aggregate_id, error));
            }
            let mut envelope = template.clone();
            envelope.message_id = message_id;
            envelope.event_type = event_type;
            envelope.version = version;
            envelope.occurred_at = occurred_at;
            envelope.correlation_id = correlation_id;
            envelope.causation_id = causation_id;
            envelope.traceparent = traceparent;
            envelope.tracestate = tracestate;
            envelope.aggregate_type = aggregate_type;
            envelope.aggregate_id = aggregate_id;
            envelope.headers = headers;
            envelope.payload = payload;
            return Ok(envelope);
        }
        let parts =
            |event_type: String, aggregate_type: String, aggregate_id: String, headers, payload| {
                EnvelopeParts {
                    message_id,
                    event_type,
                    occurred_at,
                    correlation_id,
                    causation_id,
                    traceparent: traceparent.clone(),
                    tracestate: tracestate.clone(),
                    aggregate_type,
                    aggregate_id,
                    headers,
                    payload,
                }
            };
        let envelope = match Envelope::from_parts(parts(
            event_type.clone(),
            aggregate_type.clone(),
            aggregate_id.clone(),
            headers,
            payload,
        )) {
            Ok(envelope) => envelope,
            Err(error) => {
                let error = DbErr::Type(format!("outbox column `event_type`: {error}"));
                return Err(unreadable(event_type, aggregate_type, aggregate_id, error));
            }
        };
        if i64::from(envelope.version) != i64::from(stored_version) {
            let error = version_error(&event_type);
            return Err(unreadable(event_type, aggregate_type, aggregate_id, error));
        }
        // Remember the type, with an envelope of it holding nothing else.
        if let Ok(template) = Envelope::from_parts(parts(
            event_type.clone(),
            String::new(),
            String::new(),
            Default::default(),
            outbox_core::Payload::null(),
        )) {
            let mut template = template;
            template.event_type = String::new();
            template.traceparent = None;
            template.tracestate = None;
            self.last = Some((event_type, envelope.version, template));
        }
        Ok(envelope)
    }
}
