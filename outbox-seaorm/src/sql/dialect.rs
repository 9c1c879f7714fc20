//! How each backend spells what the statements need: quoted identifiers, values bound the
//! way the schema stores them (native `uuid`/`timestamptz` on PostgreSQL, `char(36)`/UTC
//! `datetime(6)` on MariaDB, text on SQLite) and read back, and the error codes that mean a
//! lock was not available. Every backend difference of a value lives here.

use chrono::{DateTime, NaiveDateTime, Utc};
use outbox_core::Payload;
use sea_orm::sea_query::{self, Alias, Value};
use sea_orm::{DbBackend, DbErr, QueryResult, RuntimeErr, TryGetable};
use uuid::Uuid;

use crate::table::TableName;

/// `"name"` (PostgreSQL, SQLite) or `` `name` `` (MariaDB). Names are validated identifiers
/// or constants of this crate, so they contain no quote.
pub(crate) fn quote(backend: DbBackend, name: &str) -> String {
    match backend {
        DbBackend::MySql => format!("`{name}`"),
        _ => format!("\"{name}\""),
    }
}

/// A quoted table name, schema-qualified when configured so.
pub(crate) fn quote_table(backend: DbBackend, name: &TableName) -> String {
    match name.schema() {
        Some(schema) => format!(
            "{}.{}",
            quote(backend, schema),
            quote(backend, name.table())
        ),
        None => quote(backend, name.table()),
    }
}

/// Whether `row` comes from PostgreSQL (always `false` without the `postgres` feature).
pub(crate) fn is_postgres(row: &QueryResult) -> bool {
    #[cfg(feature = "postgres")]
    return row.try_as_pg_row().is_some();
    #[cfg(not(feature = "postgres"))]
    {
        let _ = row;
        false
    }
}

/// Whether `row` comes from MySQL or MariaDB (always `false` without the `mysql` feature).
pub(crate) fn is_mysql(row: &QueryResult) -> bool {
    #[cfg(feature = "mysql")]
    return row.try_as_mysql_row().is_some();
    #[cfg(not(feature = "mysql"))]
    {
        let _ = row;
        false
    }
}

/// The backend's name, as an error message names the database found.
pub(crate) fn name(backend: DbBackend) -> &'static str {
    match backend {
        DbBackend::Postgres => "PostgreSQL",
        DbBackend::MySql => "MySQL / MariaDB",
        DbBackend::Sqlite => "SQLite",
        _ => "another database",
    }
}

/// The database server's clock now, as the log relay's lease and dead-letter statements
/// read it (so that relays on different hosts agree): `clock_timestamp()` on PostgreSQL,
/// `UTC_TIMESTAMP(6)` on MariaDB (its `datetime(6)` columns hold UTC).
pub(crate) fn server_now(backend: DbBackend) -> &'static str {
    match backend {
        DbBackend::MySql => "UTC_TIMESTAMP(6)",
        _ => "clock_timestamp()",
    }
}

/// `NOW + millis` on the server's clock ([`server_now`]), `millis` bound by the caller
/// between the two parts: `(before, after)`.
pub(crate) fn server_now_plus_millis(backend: DbBackend) -> (&'static str, &'static str) {
    match backend {
        DbBackend::MySql => ("UTC_TIMESTAMP(6) + INTERVAL (", " * 1000) MICROSECOND"),
        _ => ("clock_timestamp() + ", " * interval '1 millisecond'"),
    }
}

/// A `sea_query` table reference for a validated name.
pub(crate) fn table_ref(name: &TableName) -> sea_query::TableRef {
    let table = Alias::new(name.table());
    let name: sea_query::TableName = match name.schema() {
        Some(schema) => (Alias::new(schema), table).into(),
        None => table.into(),
    };
    sea_query::TableRef::Table(name, None)
}

/// A timestamp as the schema stores it: `timestamptz`, UTC `datetime(6)`, or fixed-width
/// RFC 3339 text on SQLite (so that text order is time order).
pub(crate) fn timestamp(backend: DbBackend, at: DateTime<Utc>) -> Value {
    match backend {
        DbBackend::Postgres => Value::ChronoDateTimeUtc(Some(at)),
        DbBackend::MySql => Value::ChronoDateTime(Some(at.naive_utc())),
        _ => Value::String(Some(sqlite_timestamp(at))),
    }
}

/// `YYYY-MM-DDTHH:MM:SS.ffffffZ`: fixed width, so text order is time order.
pub(crate) fn sqlite_timestamp(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

/// A UUID as the schema stores it: native on PostgreSQL, hyphenated text elsewhere.
pub(crate) fn uuid(backend: DbBackend, id: Uuid) -> Value {
    opt_uuid(backend, Some(id))
}

/// A UUID that may be `NULL`, as [`uuid`] stores it.
pub(crate) fn opt_uuid(backend: DbBackend, id: Option<Uuid>) -> Value {
    match backend {
        DbBackend::Postgres => Value::Uuid(id),
        _ => Value::String(id.map(|id| id.hyphenated().to_string())),
    }
}

/// A string value.
pub(crate) fn text(value: impl Into<String>) -> Value {
    Value::String(Some(value.into()))
}

/// An optional string value.
pub(crate) fn opt_text(value: Option<String>) -> Value {
    Value::String(value)
}

/// The error of a column that holds something it should not.
pub(crate) fn type_error(column: &str, detail: impl std::fmt::Display) -> DbErr {
    DbErr::Type(format!("column `{column}`: {detail}"))
}

/// Reads a value that may be `NULL`.
pub(crate) fn optional<T: TryGetable>(
    row: &QueryResult,
    pre: &str,
    column: &str,
) -> Result<Option<T>, DbErr> {
    row.try_get::<Option<T>>(pre, column)
}

/// A value that must not be `NULL`.
pub(crate) fn required<T>(value: Option<T>, column: &str) -> Result<T, DbErr> {
    value.ok_or_else(|| type_error(column, "unexpected NULL"))
}

/// Reads a UUID column written by [`uuid`], `NULL` allowed.
pub(crate) fn read_opt_uuid(
    row: &QueryResult,
    pre: &str,
    column: &str,
) -> Result<Option<Uuid>, DbErr> {
    // Native `uuid` on PostgreSQL, hyphenated text elsewhere. The backend is asked first:
    // a failed `try_get` builds an error message, which a relay would pay for every row.
    if is_postgres(row) {
        return optional::<Uuid>(row, pre, column);
    }
    if let Ok(value) = optional::<String>(row, pre, column) {
        return value
            .map(|text| Uuid::parse_str(&text).map_err(|error| type_error(column, error)))
            .transpose();
    }
    optional::<Uuid>(row, pre, column)
}

/// Reads a UUID column written by [`uuid`].
pub(crate) fn read_uuid(row: &QueryResult, column: &str) -> Result<Uuid, DbErr> {
    required(read_opt_uuid(row, "", column)?, column)
}

/// Reads a timestamp column written by [`timestamp`], `NULL` allowed.
pub(crate) fn read_timestamp_of(
    row: &QueryResult,
    pre: &str,
    column: &str,
) -> Result<Option<DateTime<Utc>>, DbErr> {
    // `timestamptz` on PostgreSQL, `datetime(6)` (UTC) on MariaDB, RFC 3339 text on SQLite.
    if is_mysql(row) {
        return Ok(optional::<NaiveDateTime>(row, pre, column)?.map(|naive| naive.and_utc()));
    }
    if let Ok(value) = optional::<DateTime<Utc>>(row, pre, column) {
        return Ok(value);
    }
    if let Ok(value) = optional::<NaiveDateTime>(row, pre, column) {
        return Ok(value.map(|naive| naive.and_utc()));
    }
    optional::<String>(row, pre, column)?
        .map(|text| {
            DateTime::parse_from_rfc3339(&text)
                .map(|at| at.with_timezone(&Utc))
                .map_err(|error| type_error(column, error))
        })
        .transpose()
}

/// Reads a timestamp column of a statement's own result (no prefix), `NULL` allowed.
pub(crate) fn read_timestamp(
    row: &QueryResult,
    column: &str,
) -> Result<Option<DateTime<Utc>>, DbErr> {
    read_timestamp_of(row, "", column)
}

/// Reads a JSON column: `jsonb` on PostgreSQL, JSON text elsewhere.
pub(crate) fn read_json(
    row: &QueryResult,
    pre: &str,
    column: &str,
) -> Result<serde_json::Value, DbErr> {
    if is_postgres(row) {
        return row.try_get::<serde_json::Value>(pre, column);
    }
    if let Ok(text) = row.try_get::<String>(pre, column) {
        return serde_json::from_str(&text).map_err(|error| type_error(column, error));
    }
    row.try_get::<serde_json::Value>(pre, column)
}

/// Reads a JSON column as validated text, not parsed into a tree (see [`Payload`]);
/// PostgreSQL's `jsonb` goes through a `serde_json::Value`.
pub(crate) fn read_payload(row: &QueryResult, pre: &str, column: &str) -> Result<Payload, DbErr> {
    if !is_postgres(row)
        && let Ok(text) = row.try_get::<String>(pre, column)
    {
        return Payload::from_json(text).map_err(|error| type_error(column, error));
    }
    read_json(row, pre, column).map(Payload::from)
}

/// Reads an integer column whatever its width (`COUNT(*)` is 64 bits, `int` columns 32).
pub(crate) fn read_i64(row: &QueryResult, column: &str) -> Result<i64, DbErr> {
    if let Ok(value) = row.try_get::<i64>("", column) {
        return Ok(value);
    }
    row.try_get::<i32>("", column).map(i64::from)
}

/// Reads a boolean column: `boolean` on PostgreSQL, `tinyint(1)` on MariaDB, 0 / 1 on
/// SQLite (whose drivers may hand it back as an integer).
pub(crate) fn read_bool(row: &QueryResult, pre: &str, column: &str) -> Result<bool, DbErr> {
    if is_postgres(row) {
        return row.try_get::<bool>(pre, column);
    }
    if let Ok(value) = row.try_get::<bool>(pre, column) {
        return Ok(value);
    }
    row.try_get::<i64>(pre, column).map(|value| value != 0)
}

/// `{1,2,3}`: a PostgreSQL `bigint[]` literal, bound as text.
pub(crate) fn pg_bigint_array(seqs: &[i64]) -> String {
    use std::fmt::Write as _;
    let mut array = String::with_capacity(2 + seqs.len() * 8);
    array.push('{');
    for (i, seq) in seqs.iter().enumerate() {
        if i > 0 {
            array.push(',');
        }
        // Writing to a String cannot fail.
        let _ = write!(array, "{seq}");
    }
    array.push('}');
    array
}

/// Whether `error` is a lock that `NOWAIT` did not get: PostgreSQL `55P03`
/// (`lock_not_available`), MariaDB 1205 (`ER_LOCK_WAIT_TIMEOUT`).
pub(crate) fn is_lock_not_available(error: &DbErr) -> bool {
    // Without a backend there is no database error to look at (and no `SqlxError`).
    #[cfg(not(any(feature = "postgres", feature = "mysql", feature = "sqlite")))]
    {
        let _ = error;
        false
    }
    #[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
    is_sqlx_lock_not_available(error)
}

#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
fn is_sqlx_lock_not_available(error: &DbErr) -> bool {
    let (DbErr::Query(RuntimeErr::SqlxError(error)) | DbErr::Exec(RuntimeErr::SqlxError(error))) =
        error
    else {
        return false;
    };
    let Some(database) = error.as_database_error() else {
        return false;
    };
    if database.code().as_deref() == Some("55P03") {
        return true;
    }
    #[cfg(feature = "mysql")]
    if database
        .try_downcast_ref::<sea_orm::error::SqlxMySqlError>()
        .is_some_and(|mysql| mysql.number() == 1205)
    {
        return true;
    }
    false
}

/// The table `error` says does not exist, if that is what it says: PostgreSQL `42P01`
/// (`undefined_table`: `relation "t" does not exist`), MariaDB 1146 (`ER_NO_SUCH_TABLE`:
/// `Table 'db.t' doesn't exist`), SQLite `no such table: t`. The name is as the server
/// wrote it (MariaDB's carries the database).
pub(crate) fn missing_table(error: &DbErr) -> Option<String> {
    #[cfg(not(any(feature = "postgres", feature = "mysql", feature = "sqlite")))]
    {
        let _ = error;
        None
    }
    #[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
    sqlx_missing_table(error)
}

#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
fn sqlx_missing_table(error: &DbErr) -> Option<String> {
    let (DbErr::Query(RuntimeErr::SqlxError(error))
    | DbErr::Exec(RuntimeErr::SqlxError(error))
    | DbErr::Conn(RuntimeErr::SqlxError(error))) = error
    else {
        return None;
    };
    let database = error.as_database_error()?;
    let message = database.message();
    let quoted = |quote: char| {
        let (_, rest) = message.split_once(quote)?;
        let (name, _) = rest.split_once(quote)?;
        Some(name.to_owned())
    };
    match database.code().as_deref() {
        Some("42P01") => return quoted('"').or_else(|| Some(message.to_owned())),
        Some("42S02") => return quoted('\'').or_else(|| Some(message.to_owned())),
        _ => {}
    }
    message
        .strip_prefix("no such table: ")
        .map(|name| name.trim().to_owned())
}
