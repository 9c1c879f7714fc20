//! (c) of the drain: `mysql_async`'s binlog stream from a stored position, decoding the
//! inserted rows of one table and counting them — what the log relay's reader does before
//! it renders rows, with nothing published or stored.

use std::time::Instant;

use futures_util::StreamExt;
use mysql_async::binlog::events::{EventData, RowsEventData};
use mysql_async::prelude::Queryable;
use mysql_async::{BinlogStreamRequest, Conn, Opts};

use crate::log::BoxError;

/// The raw dump's replica server id (the relays derive theirs from their slot).
const SERVER_ID: u32 = 0x7fff_0001;

/// Connects to `url`, dumps from `position` and counts `count` inserted rows of
/// `schema.table`; returns when the first and the last were decoded.
pub(super) async fn count(
    url: &str,
    position: &str,
    schema: &str,
    table: &str,
    count: usize,
) -> Result<(Instant, Instant), BoxError> {
    let mut conn = Conn::new(Opts::from_url(url)?).await?;
    for statement in [
        "SET @mariadb_slave_capability = 4".to_owned(),
        format!("SET @slave_connect_state = '{position}'"),
        "SET @slave_gtid_strict_mode = 1".to_owned(),
    ] {
        conn.query_drop(statement).await?;
    }
    let mut stream = conn
        .get_binlog_stream(BinlogStreamRequest::new(SERVER_ID))
        .await?;
    let (mut seen, mut first) = (0, None);
    while seen < count {
        let Some(event) = stream.next().await else {
            return Err(format!("the dump ended after {seen} of {count} rows").into());
        };
        let event = event?;
        let Some(EventData::RowsEvent(rows)) = event.read_data()? else {
            continue;
        };
        let (RowsEventData::WriteRowsEventV1(_) | RowsEventData::WriteRowsEvent(_)) = rows else {
            continue;
        };
        let Some(tme) = stream.get_tme(rows.table_id()) else {
            continue;
        };
        if tme.database_name() != schema || tme.table_name() != table {
            continue;
        }
        for row in rows.rows(tme) {
            let (_, after) = row?;
            if after.is_some() {
                seen += 1;
            }
        }
        first.get_or_insert_with(Instant::now);
    }
    let last = Instant::now();
    stream.close().await?;
    Ok((first.unwrap_or(last), last))
}
