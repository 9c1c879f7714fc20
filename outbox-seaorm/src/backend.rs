//! Facts about the three backends that do not depend on any table: how many bind parameters
//! one statement may carry, and [`PerBackend`], a value kept per backend (the statement
//! texts an [`Outbox`](crate::Outbox) caches, see [`StatementCache`]).

use std::sync::OnceLock;

use sea_orm::DbBackend;

/// Most bind parameters one statement may carry on `backend`.
pub(crate) const fn max_bind_parameters(backend: DbBackend) -> usize {
    match backend {
        // PostgreSQL's wire protocol and MySQL's COM_STMT_PREPARE count parameters in u16.
        DbBackend::Postgres | DbBackend::MySql => 65_535,
        // SQLITE_MAX_VARIABLE_NUMBER's default since SQLite 3.32.
        _ => 32_766,
    }
}

/// A value per backend (PostgreSQL, MariaDB, SQLite), built on first use.
#[derive(Debug)]
pub(crate) struct PerBackend<T>([OnceLock<T>; 3]);

impl<T> Default for PerBackend<T> {
    fn default() -> Self {
        Self([OnceLock::new(), OnceLock::new(), OnceLock::new()])
    }
}

impl<T> PerBackend<T> {
    /// The value for `backend`, built by `init` the first time.
    pub(crate) fn get_or_init(&self, backend: DbBackend, init: impl FnOnce() -> T) -> &T {
        let index = match backend {
            DbBackend::Postgres => 0,
            DbBackend::MySql => 1,
            _ => 2,
        };
        self.0[index].get_or_init(init)
    }
}

/// The text of a multi-row `INSERT`, split where the rows begin.
#[derive(Debug)]
pub(crate) struct InsertText {
    /// `INSERT INTO <table> (<columns>) VALUES `.
    pub(crate) prefix: String,
    /// The prefix and one row's placeholders: the whole statement of a one-row commit.
    pub(crate) one_row: String,
}

/// The statement texts of one outbox, as plain strings, built on first use per backend by
/// the `sql` layer and kept on the [`Outbox`](crate::Outbox) (table and column names are
/// fixed by the configuration): a commit then only copies them.
#[derive(Debug, Default)]
pub(crate) struct StatementCache {
    /// The outbox `INSERT`.
    pub(crate) outbox_insert: PerBackend<InsertText>,
    /// The inbox `INSERT` of a received message.
    pub(crate) inbox_insert: PerBackend<String>,
}
