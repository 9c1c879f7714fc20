//! Where the binlog log relay reads changes from: a thin seam over `mysql_async`'s binlog
//! stream (the replication dump protocol), so that nothing else of the relay names its
//! types. [`BinlogSource::connect`] resumes after a [`GtidPosition`] as a MariaDB replica
//! does; [`BinlogSource::next`] turns the events into the relay's [`Change`]s, in commit
//! order; its [`Acknowledger`] holds the confirmed position the session stores.
//!
//! MariaDB writes a transaction as `GTID` (type 162, parsed in [`super::gtid`]), its row
//! events (a table map, then `WRITE_ROWS_EVENT_V1` per statement), then `XID`; a statement
//! outside a transaction (DDL) as `GTID` with the standalone flag and one `QUERY` event.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_util::StreamExt as _;
use mysql_async::binlog::events::{Event, EventData, RowsEventData};
use mysql_async::prelude::Queryable as _;
use mysql_async::{BinlogStream, BinlogStreamRequest, Conn, Opts, Value};

use super::super::change::{Acknowledger, Change, Confirmed, Position, Row};
use super::super::text_row::TextRow;
use super::gtid_event::GtidEvent;
use crate::gtid::GtidPosition;

/// MariaDB's GTID event: the start of a transaction's event group.
const GTID_EVENT: u8 = 162;

/// `ER_MASTER_FATAL_ERROR_READING_BINLOG`: the position asked for is not in the server's
/// binlogs (purged, or a GTID the server never wrote).
pub(crate) const POSITION_NOT_IN_BINLOG: u16 = 1236;

/// Settings of one replication connection.
#[derive(Debug, Clone)]
pub(crate) struct BinlogSettings {
    /// A `mysql://` URL of the database.
    pub(crate) url: String,
    /// The server id the relay registers as a replica with (unique among the server's
    /// replicas, and not the server's own).
    pub(crate) server_id: u32,
    /// How often an idle server sends a heartbeat.
    pub(crate) heartbeat: Duration,
    /// How long connecting may take.
    pub(crate) connect_timeout: Duration,
    /// The streamed table's database.
    pub(crate) schema: String,
    /// The streamed table.
    pub(crate) table: String,
}

/// A failure of the replication connection, with the server's error code when it sent
/// one.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub(crate) struct BinlogError {
    /// The server's error code (e.g. [`POSITION_NOT_IN_BINLOG`]).
    pub(crate) code: Option<u16>,
    /// What went wrong.
    pub(crate) message: String,
}

impl From<mysql_async::Error> for BinlogError {
    fn from(error: mysql_async::Error) -> Self {
        let code = match &error {
            mysql_async::Error::Server(server) => Some(server.code),
            _ => None,
        };
        Self {
            code,
            message: error.to_string(),
        }
    }
}

impl BinlogError {
    pub(crate) fn protocol(message: impl Into<String>) -> Self {
        Self {
            code: None,
            message: message.into(),
        }
    }
}

/// A connection to the server of `settings` (its URL, within its connect timeout).
pub(crate) async fn open_connection(settings: &BinlogSettings) -> Result<Conn, BinlogError> {
    let opts = Opts::from_url(&settings.url)
        .map_err(|error| BinlogError::protocol(format!("not a MariaDB URL: {error}")))?;
    let conn = tokio::time::timeout(settings.connect_timeout, Conn::new(opts))
        .await
        .map_err(|_| {
            BinlogError::protocol(format!(
                "no connection within {:?}",
                settings.connect_timeout
            ))
        })??;
    Ok(conn)
}

/// A binlog dump from a MariaDB server.
pub(crate) struct BinlogSource {
    stream: BinlogStream,
    schema: Arc<str>,
    table: Arc<str>,
    /// Where the dump started; moved by acknowledgements.
    confirmed: Arc<Mutex<GtidPosition>>,
    /// The transaction being read: its GTID, and whether it ends with its one query.
    open: Option<GtidEvent>,
    /// Rows read from one rows event, handed out one by one.
    pending: std::collections::VecDeque<TextRow>,
}

impl std::fmt::Debug for BinlogSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BinlogSource")
            .field("schema", &self.schema)
            .field("table", &self.table)
            .finish_non_exhaustive()
    }
}

impl BinlogSource {
    /// Connects and starts the dump right after `from` (every domain it names; an empty
    /// position starts at the oldest binlog): MariaDB's GTID resume — the replica
    /// capability, the connect state in strict mode, then a plain dump request.
    pub(crate) async fn connect(
        settings: &BinlogSettings,
        from: &GtidPosition,
    ) -> Result<Self, BinlogError> {
        let mut conn = open_connection(settings).await?;
        let heartbeat_ns = settings.heartbeat.as_nanos().min(u128::from(u64::MAX));
        for statement in [
            // Without it MariaDB hides its GTID events from the dump.
            "SET @mariadb_slave_capability = 4".to_owned(),
            format!("SET @slave_connect_state = '{from}'"),
            // A position the server's binlogs do not hold fails (1236) instead of
            // silently starting elsewhere.
            "SET @slave_gtid_strict_mode = 1".to_owned(),
            format!("SET @master_heartbeat_period = {heartbeat_ns}"),
        ] {
            conn.query_drop(statement).await?;
        }
        let stream = conn
            .get_binlog_stream(BinlogStreamRequest::new(settings.server_id))
            .await?;
        Ok(Self {
            stream,
            schema: Arc::from(settings.schema.as_str()),
            table: Arc::from(settings.table.as_str()),
            confirmed: Arc::new(Mutex::new(from.clone())),
            open: None,
            pending: std::collections::VecDeque::new(),
        })
    }

    /// The acknowledger of this dump: it starts at the position the dump resumed after.
    pub(crate) fn acknowledger(&self) -> Acknowledger {
        Acknowledger::new(Confirmed::Binlog(Arc::clone(&self.confirmed)))
    }

    /// The next change; `None` when the server closed the stream.
    pub(crate) async fn next(&mut self) -> Result<Option<Change>, BinlogError> {
        if let Some(row) = self.pending.pop_front() {
            return Ok(Some(self.insert(row)));
        }
        let Some(event) = self.stream.next().await else {
            return Ok(None);
        };
        let change = self.change(&event?)?;
        Ok(Some(change))
    }

    fn insert(&self, row: TextRow) -> Change {
        Change::Insert {
            schema: Arc::clone(&self.schema),
            table: Arc::clone(&self.table),
            row: Row::Binlog(row),
        }
    }

    fn change(&mut self, event: &Event) -> Result<Change, BinlogError> {
        let header = event.header();
        if header.event_type_raw() == GTID_EVENT {
            let gtid = GtidEvent::parse(header.server_id(), event.data())
                .map_err(|error| BinlogError::protocol(error.to_string()))?;
            self.open = Some(gtid);
            return Ok(Change::Begin);
        }
        let committed_at =
            || DateTime::from_timestamp(i64::from(header.timestamp()), 0).unwrap_or_default();
        let data = event
            .read_data()
            .map_err(|error| BinlogError::protocol(format!("unreadable binlog event: {error}")))?;
        match data {
            Some(EventData::XidEvent(_)) => Ok(self.commit(committed_at())),
            Some(EventData::QueryEvent(_)) if self.open.is_some_and(|open| open.standalone()) => {
                Ok(self.commit(committed_at()))
            }
            Some(EventData::RowsEvent(rows)) => self.rows(&rows),
            // Rotations, the GTID list at the start of a file, heartbeats, annotations.
            _ => Ok(Change::Other),
        }
    }

    fn commit(&mut self, committed_at: DateTime<Utc>) -> Change {
        match self.open.take() {
            Some(open) => {
                let mut position = GtidPosition::default();
                position.advance(open.gtid);
                Change::Commit {
                    position: Position::Gtid(position),
                    committed_at,
                }
            }
            // A dump starts at a transaction's GTID event; an XID without one is not ours.
            None => Change::Other,
        }
    }

    /// The inserted rows of the streamed table in `rows` (the first returned, the others
    /// queued); [`Change::Other`] for other tables, updates and deletes.
    fn rows(&mut self, rows: &RowsEventData<'_>) -> Result<Change, BinlogError> {
        let (RowsEventData::WriteRowsEventV1(_) | RowsEventData::WriteRowsEvent(_)) = rows else {
            return Ok(Change::Other);
        };
        let Some(tme) = self.stream.get_tme(rows.table_id()) else {
            return Err(BinlogError::protocol(format!(
                "a rows event of table id {} came without its table map",
                rows.table_id()
            )));
        };
        if tme.database_name() != *self.schema || tme.table_name() != *self.table {
            return Ok(Change::Other);
        }
        for row in rows.rows(tme) {
            let (_, after) = row.map_err(|error| {
                BinlogError::protocol(format!("unreadable row of {}: {error}", self.table))
            })?;
            let Some(after) = after else { continue };
            let columns = after.columns();
            let values = after.unwrap();
            let row = columns
                .iter()
                .zip(values)
                .map(|(column, value)| (column.name_str().into_owned(), text(value)))
                .collect();
            self.pending.push_back(TextRow::new(row));
        }
        Ok(match self.pending.pop_front() {
            Some(row) => self.insert(row),
            None => Change::Other,
        })
    }
}

/// A binlog value as the text the row decoder reads.
fn text(value: mysql_async::binlog::value::BinlogValue<'_>) -> Option<String> {
    use mysql_async::binlog::value::BinlogValue;
    match value {
        BinlogValue::Value(value) => value_text(&value),
        // MariaDB's JSON is LONGTEXT; a MySQL JSONB value reads as its JSON text.
        other => Value::try_from(other)
            .ok()
            .and_then(|value| value_text(&value)),
    }
}

/// A value as the text the row decoder reads (see [`TextRow`]).
pub(crate) fn value_text(value: &Value) -> Option<String> {
    match value {
        Value::NULL => None,
        Value::Bytes(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
        Value::Int(n) => Some(n.to_string()),
        Value::UInt(n) => Some(n.to_string()),
        Value::Float(n) => Some(n.to_string()),
        Value::Double(n) => Some(n.to_string()),
        Value::Date(year, month, day, hour, minute, second, micros) => Some(format!(
            "{year:04}-{month:02}-{day:02} {hour:02}:{minute:02}:{second:02}.{micros:06}+00"
        )),
        Value::Time(negative, days, hours, minutes, seconds, micros) => {
            let sign = if *negative { "-" } else { "" };
            let hours = u64::from(*days) * 24 + u64::from(*hours);
            Some(format!(
                "{sign}{hours:02}:{minutes:02}:{seconds:02}.{micros:06}"
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binlog_values_read_as_the_row_decoder_expects() {
        assert_eq!(value_text(&Value::NULL), None);
        assert_eq!(
            value_text(&Value::Bytes(b"{\"a\":1}".to_vec())).as_deref(),
            Some("{\"a\":1}")
        );
        assert_eq!(value_text(&Value::Int(-7)).as_deref(), Some("-7"));
        assert_eq!(value_text(&Value::UInt(7)).as_deref(), Some("7"));
        assert_eq!(
            value_text(&Value::Date(2026, 12, 6, 8, 5, 9, 4_200)).as_deref(),
            Some("2026-12-06 08:05:09.004200+00")
        );
        let row = TextRow::new(vec![
            ("message_id".into(), Some("m".into())),
            ("traceparent".into(), None),
        ]);
        assert_eq!(row.text("message_id"), Some("m"));
        assert_eq!(row.text("traceparent"), None);
        assert_eq!(row.text("missing"), None);
    }
}
