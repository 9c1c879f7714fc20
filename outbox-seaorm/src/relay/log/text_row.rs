//! A row whose values were rendered as text, read by column name: the
//! [`Row`](super::change::Row) of the MariaDB binlog source (and of its snapshot), apart
//! from the source so that the vocabulary of [`change`](super::change) does not depend on
//! it.

/// A row of the streamed table, each value as text the way the row decoder reads it:
/// strings as UTF-8, integers in decimal, `DATETIME(6)` as `YYYY-MM-DD HH:MM:SS.ffffff+00`
/// (the outbox writes UTC), `None` for SQL `NULL`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TextRow(Vec<(String, Option<String>)>);

impl TextRow {
    /// A row of `(column, text)` pairs.
    pub(crate) fn new(columns: Vec<(String, Option<String>)>) -> Self {
        Self(columns)
    }

    /// The text of column `name`: `None` when the column is missing or `NULL`.
    pub(crate) fn text(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(column, _)| column == name)
            .and_then(|(_, value)| value.as_deref())
    }
}
