//! A binlog relay's first start: a consistent snapshot of the outbox table with the binlog
//! position it corresponds to (`START TRANSACTION WITH CONSISTENT SNAPSHOT`, whose
//! `binlog_snapshot_file`/`_position` MariaDB keeps in step with the snapshot, turned into
//! a GTID position by `BINLOG_GTID_POS`). The rows pending in the snapshot are published
//! (the backfill) and the stream resumes right after its position: every committed row is
//! in one of the two, never in both.
//!
//! The snapshot reads through its own connection (a pooled one must not keep a
//! transaction's isolation level), and its rows are read as the stream reads them
//! ([`TextRow`]), so that a backfilled envelope is the envelope the stream would have read.

use mysql_async::prelude::Queryable as _;
use mysql_async::{Conn, Row as MysqlRow};

use super::super::text_row::TextRow;
use super::source::{BinlogError, BinlogSettings, open_connection, value_text};
use crate::gtid::GtidPosition;

/// Attempts at a snapshot whose binlog position has no GTID position yet (the server is
/// between a binlog write and its GTID index, rare and brief).
const ATTEMPTS: usize = 5;

/// An open consistent snapshot on its own connection.
pub(crate) struct Snapshot {
    conn: Conn,
    /// The GTID position of the snapshot: where the stream resumes after the backfill.
    pub(crate) position: GtidPosition,
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("position", &self.position.to_string())
            .finish_non_exhaustive()
    }
}

impl Snapshot {
    /// Opens a read-only consistent snapshot and reads its GTID position.
    pub(crate) async fn open(settings: &BinlogSettings) -> Result<Self, BinlogError> {
        let mut conn = open_connection(settings).await?;
        conn.query_drop("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            .await?;
        for _ in 0..ATTEMPTS {
            conn.query_drop("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
                .await?;
            let status: Vec<(String, String)> = conn
                .query("SHOW SESSION STATUS LIKE 'binlog_snapshot_%'")
                .await?;
            let value = |name: &str| {
                status
                    .iter()
                    .find(|(variable, _)| variable.eq_ignore_ascii_case(name))
                    .map(|(_, value)| value.clone())
            };
            let (Some(file), Some(offset)) = (
                value("binlog_snapshot_file"),
                value("binlog_snapshot_position"),
            ) else {
                return Err(BinlogError::protocol(
                    "the server reports no binlog_snapshot_file/position (is log_bin on?)",
                ));
            };
            let offset: u64 = offset.parse().map_err(|_| {
                BinlogError::protocol(format!("binlog_snapshot_position {offset:?}"))
            })?;
            let at: Option<Option<String>> = conn
                .exec_first("SELECT BINLOG_GTID_POS(?, ?)", (file.as_str(), offset))
                .await?;
            let at = at.flatten().unwrap_or_default();
            if at.is_empty() {
                // Empty at the very start of the binlog history is right (nothing before
                // it); with GTIDs already written it means the position could not be
                // mapped: take the snapshot again.
                let written: Option<Option<String>> =
                    conn.query_first("SELECT @@gtid_binlog_pos").await?;
                if !written.flatten().unwrap_or_default().is_empty() {
                    conn.query_drop("ROLLBACK").await?;
                    continue;
                }
            }
            let position = GtidPosition::parse(&at).map_err(|error| {
                BinlogError::protocol(format!("BINLOG_GTID_POS({file}, {offset}): {error}"))
            })?;
            return Ok(Self { conn, position });
        }
        Err(BinlogError::protocol(format!(
            "no GTID position for a consistent snapshot in {ATTEMPTS} attempts"
        )))
    }

    /// One page of the backfill: `select` (one `?`, the `seq` to read after) as rows of
    /// text, each with its `seq` (column `seq_column`).
    pub(crate) async fn page(
        &mut self,
        select: &str,
        seq_column: &str,
        after: i64,
    ) -> Result<Vec<(i64, TextRow)>, BinlogError> {
        let rows: Vec<MysqlRow> = self.conn.exec(select, (after,)).await?;
        rows.into_iter()
            .map(|row| {
                let names: Vec<String> = row
                    .columns_ref()
                    .iter()
                    .map(|column| column.name_str().into_owned())
                    .collect();
                let values = row.unwrap();
                let text = TextRow::new(
                    names
                        .into_iter()
                        .zip(values.iter().map(value_text))
                        .collect(),
                );
                let seq = text
                    .text(seq_column)
                    .and_then(|seq| seq.parse::<i64>().ok())
                    .ok_or_else(|| {
                        BinlogError::protocol(format!("a backfilled row without `{seq_column}`"))
                    })?;
                Ok((seq, text))
            })
            .collect()
    }

    /// Ends the snapshot.
    pub(crate) async fn close(mut self) -> Result<(), BinlogError> {
        self.conn.query_drop("COMMIT").await?;
        self.conn.disconnect().await?;
        Ok(())
    }
}
