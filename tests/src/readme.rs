//! Where the README's examples run: the doc tests of this package (the README's Rust
//! snippets) connect through [`database`], which hands back the SQLite options the snippet
//! shows, or — with `OUTBOX_README_DATABASE=postgres` or `mariadb` — a fresh database on that
//! server (dropped when the returned guard is). `scripts/test` runs them on all three, so
//! every snippet runs as written on every backend.

use sea_orm::ConnectOptions;

use crate::db::{Backend, TestDb};

/// The variable that picks the README examples' backend: `sqlite` (the default), `postgres`
/// or `mariadb`.
pub const DATABASE_VARIABLE: &str = "OUTBOX_README_DATABASE";

/// The options a README example connects with: `sqlite` as given, or those of a fresh
/// database on the server named by [`DATABASE_VARIABLE`], with the guard that drops it.
///
/// # Panics
/// On an unknown value of [`DATABASE_VARIABLE`], or when the server is unreachable.
pub async fn database(sqlite: ConnectOptions) -> (ConnectOptions, Option<TestDb>) {
    let backend = match std::env::var(DATABASE_VARIABLE).ok().as_deref() {
        None | Some("" | "sqlite") => return (sqlite, None),
        Some("postgres") => Backend::Postgres,
        Some("mariadb") => Backend::MariaDb,
        Some(other) => panic!("{DATABASE_VARIABLE}={other}: expected sqlite, postgres or mariadb"),
    };
    let Some(database) = TestDb::open(backend, "readme").await else {
        panic!("{DATABASE_VARIABLE} names {backend:?}, which is unreachable");
    };
    let options = ConnectOptions::new(database.url());
    (options, Some(database))
}

/// The options of a fresh database on the tests' `wal_level = logical` PostgreSQL cluster
/// ([`crate::logical_pg`]), for the README's log relay example, with the guard that drops
/// it; whatever [`DATABASE_VARIABLE`] says (the log relay runs on PostgreSQL only).
///
/// # Panics
/// When the cluster cannot start.
pub async fn logical_database() -> (ConnectOptions, TestDb) {
    let Some(database) = TestDb::logical_postgres("readme").await else {
        panic!("the README's log relay example needs a wal_level=logical PostgreSQL cluster");
    };
    let options = ConnectOptions::new(database.url());
    (options, database)
}

/// The URL of a fresh database on the tests' binlog-enabled MariaDB
/// ([`crate::binlog_mariadb`]), for the book's MariaDB log relay example, with the guard
/// that drops it.
///
/// # Panics
/// When the server cannot start.
pub async fn binlog_database() -> (String, TestDb) {
    let Some(database) = TestDb::binlog_mariadb("book").await else {
        panic!("the book's MariaDB log relay example needs MariaDB's server binaries");
    };
    (database.url().to_owned(), database)
}
