//! A row as PostgreSQL's logical decoding (`pgoutput`) sends it, read by column name: the
//! [`Row`](super::change::Row) of the PostgreSQL source, apart from the source itself so
//! that the vocabulary of [`change`](super::change) does not depend on the client.

use pg_walstream::{ColumnValue, RowData};

/// A replicated row: column name → value in PostgreSQL's text format (`None`: SQL `NULL`).
#[derive(Debug)]
pub(crate) struct WalRow(Box<RowData>);

impl WalRow {
    /// The row `data` the replication client decoded.
    pub(crate) fn new(data: RowData) -> Self {
        Self(Box::new(data))
    }

    /// The text of column `name`: `None` when the column is missing or `NULL`.
    pub(crate) fn text(&self, name: &str) -> Option<&str> {
        self.0.get(name).and_then(ColumnValue::as_str)
    }
}
