//! The demo's environment: which database, which broker and which relay the scenarios run
//! on.
//!
//! Every scenario gets a database of its own, so it never sees another's (or an earlier
//! run's) rows:
//!
//! - SQLite file (the default: a fresh temporary folder): `<stem>-scenario-<N>.db` next to
//!   the given file, deleted first if it exists;
//! - `sqlite::memory:`: a private in-memory database per scenario, on one connection;
//! - PostgreSQL / MariaDB / MySQL: a database `bookstore_demo_<uuid>` created on the given
//!   server for the scenario and dropped at its end (the given URL is only the admin
//!   connection). A log relay's replication slots of that database are dropped with it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use sea_orm::sqlx::sqlite::{SqliteJournalMode, SqliteSynchronous};
use sea_orm::{
    ConnectOptions, ConnectionTrait, Database, DatabaseConnection, DbBackend, Statement,
};

use crate::broker::BrokerChoice;
use crate::error::DemoError;

/// Where the scenarios' databases live; see the [module documentation](self).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatabaseTarget {
    /// SQLite files `<dir>/<stem>-scenario-<N>.db`.
    SqliteFiles {
        /// The folder.
        dir: PathBuf,
        /// The file name stem.
        stem: String,
    },
    /// A private in-memory SQLite database per scenario.
    SqliteMemory,
    /// A fresh database per scenario on this PostgreSQL server (admin URL).
    Postgres(String),
    /// A fresh database per scenario on this MariaDB / MySQL server (admin URL).
    MySql(String),
}

impl DatabaseTarget {
    /// SQLite files `bookstore-scenario-<N>.db` in `dir`.
    pub fn sqlite_in(dir: &Path) -> Self {
        Self::SqliteFiles {
            dir: dir.to_path_buf(),
            stem: "bookstore".to_owned(),
        }
    }

    /// Reads a `--database` URL: `sqlite://PATH`, `sqlite::memory:`, `postgres://…`,
    /// `postgresql://…`, `mysql://…` or `mariadb://…`.
    ///
    /// # Errors
    /// [`DemoError::Config`] for another scheme or an empty path.
    pub fn parse(url: &str) -> Result<Self, DemoError> {
        let url = url.trim();
        if url == "sqlite::memory:" || url.starts_with("sqlite::memory:?") {
            return Ok(Self::SqliteMemory);
        }
        if let Some(rest) = url
            .strip_prefix("sqlite://")
            .or_else(|| url.strip_prefix("sqlite:"))
        {
            let path = Path::new(rest.split('?').next().unwrap_or_default());
            let stem = path
                .file_stem()
                .and_then(|stem| stem.to_str())
                .filter(|stem| !stem.is_empty())
                .ok_or_else(|| DemoError::Config(format!("no file name in `{url}`")))?;
            let dir = path
                .parent()
                .filter(|dir| !dir.as_os_str().is_empty())
                .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
            return Ok(Self::SqliteFiles {
                dir,
                stem: stem.to_owned(),
            });
        }
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            return Ok(Self::Postgres(url.to_owned()));
        }
        if url.starts_with("mysql://") || url.starts_with("mariadb://") {
            return Ok(Self::MySql(url.replacen("mariadb://", "mysql://", 1)));
        }
        Err(DemoError::Config(format!(
            "unsupported database URL `{url}`: use sqlite://PATH, sqlite::memory:, \
             postgres://… or mysql://…"
        )))
    }

    /// SeaORM's backend.
    pub fn backend(&self) -> DbBackend {
        match self {
            Self::SqliteFiles { .. } | Self::SqliteMemory => DbBackend::Sqlite,
            Self::Postgres(_) => DbBackend::Postgres,
            Self::MySql(_) => DbBackend::MySql,
        }
    }

    /// For the demo's header line (no password).
    pub fn describe(&self) -> String {
        match self {
            Self::SqliteFiles { dir, stem } => {
                format!("SQLite files {}/{stem}-scenario-<N>.db", dir.display())
            }
            Self::SqliteMemory => "SQLite in memory, one database per scenario".to_owned(),
            Self::Postgres(url) => format!(
                "PostgreSQL at {}, a fresh database per scenario",
                without_password(url)
            ),
            Self::MySql(url) => format!(
                "MariaDB/MySQL at {}, a fresh database per scenario",
                without_password(url)
            ),
        }
    }
}

/// `url` with the password of its user info replaced by `***`.
fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((user_info, host)) => match user_info.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}{tail}"),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

/// `url` with its database (path) replaced by `name`, query kept.
fn with_database(url: &str, name: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let (authority, query) = match rest.split_once('/') {
        Some((authority, path)) => (authority, path.split_once('?').map(|(_, q)| q)),
        None => match rest.split_once('?') {
            Some((authority, query)) => (authority, Some(query)),
            None => (rest, None),
        },
    };
    match query {
        Some(query) => format!("{scheme}://{authority}/{name}?{query}"),
        None => format!("{scheme}://{authority}/{name}"),
    }
}

/// Which relay publishes the outbox in scenarios 3–6 (1 and 2 run without an outbox, 7 is
/// the job queue: they do not involve a relay choice).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RelayChoice {
    /// The polling relay (`outbox_seaorm::relay::Relay`): claims `pending` rows and marks
    /// them `published`; any database.
    #[default]
    Polling,
    /// The log relay (`outbox_seaorm::relay::log::LogRelay`): tails PostgreSQL's
    /// write-ahead log through a replication slot; PostgreSQL with `wal_level = logical`.
    Log,
}

impl RelayChoice {
    /// For the demo's header line.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Polling => {
                "polling (claims pending rows, marks them published) for scenarios 3–6; \
                 1, 2 and 7 do not use a relay choice"
            }
            Self::Log => {
                "log (tails PostgreSQL's write-ahead log through a replication slot) for \
                 scenarios 3–6; 1, 2 and 7 do not use a relay choice"
            }
        }
    }
}

/// The demo's settings: the database, the broker and the relay.
#[derive(Debug, Clone)]
pub struct Env {
    /// Where the scenarios' databases live.
    pub database: DatabaseTarget,
    /// The broker the relays publish to.
    pub broker: BrokerChoice,
    /// The relay of scenarios 3–6.
    pub relay: RelayChoice,
}

impl Env {
    /// SQLite files in `dir`, the in-process broker and the polling relay: the embedded
    /// default.
    pub fn embedded(dir: &Path) -> Self {
        Self {
            database: DatabaseTarget::sqlite_in(dir),
            broker: BrokerChoice::InProcess,
            relay: RelayChoice::Polling,
        }
    }

    /// Opens the database of scenario `scenario` (see the [module documentation](self)).
    ///
    /// # Errors
    /// [`DemoError::Database`] when the server is unreachable or the database cannot be
    /// created; [`DemoError::Io`] when an old SQLite file cannot be removed.
    pub async fn open_database(&self, scenario: u8) -> Result<ScenarioDb, DemoError> {
        match &self.database {
            DatabaseTarget::SqliteFiles { dir, stem } => {
                std::fs::create_dir_all(dir)?;
                let path = dir.join(format!("{stem}-scenario-{scenario}.db"));
                for suffix in ["", "-wal", "-shm"] {
                    let mut file = path.clone().into_os_string();
                    file.push(suffix);
                    match std::fs::remove_file(&file) {
                        Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                            return Err(error.into());
                        }
                        _ => {}
                    }
                }
                let url = format!("sqlite://{}?mode=rwc", path.display());
                let conn = Database::connect(sqlite_file_options(&url)).await?;
                Ok(ScenarioDb {
                    conn,
                    backend: DbBackend::Sqlite,
                    url,
                    server: None,
                })
            }
            DatabaseTarget::SqliteMemory => {
                let url = "sqlite::memory:".to_owned();
                let mut options = quiet(ConnectOptions::new(&url));
                options
                    .max_connections(1)
                    .min_connections(1)
                    .idle_timeout(None::<Duration>)
                    .max_lifetime(None::<Duration>);
                let conn = Database::connect(options).await?;
                Ok(ScenarioDb {
                    conn,
                    backend: DbBackend::Sqlite,
                    url,
                    server: None,
                })
            }
            DatabaseTarget::Postgres(admin_url) | DatabaseTarget::MySql(admin_url) => {
                let backend = self.database.backend();
                let name = format!("bookstore_demo_{}", uuid::Uuid::now_v7().simple());
                let admin = Database::connect(quiet(ConnectOptions::new(admin_url))).await?;
                let create = if backend == DbBackend::Postgres {
                    format!("CREATE DATABASE \"{name}\"")
                } else {
                    format!(
                        "CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
                    )
                };
                let created = admin.execute_unprepared(&create).await;
                let _ = admin.close().await;
                created?;
                let server = ServerDatabase {
                    backend,
                    admin_url: admin_url.clone(),
                    name: name.clone(),
                };
                let url = with_database(admin_url, &name);
                match Database::connect(quiet(ConnectOptions::new(&url))).await {
                    Ok(conn) => Ok(ScenarioDb {
                        conn,
                        backend,
                        url,
                        server: Some(server),
                    }),
                    Err(error) => {
                        server.drop_database().await;
                        Err(error.into())
                    }
                }
            }
        }
    }
}

fn quiet(mut options: ConnectOptions) -> ConnectOptions {
    options
        .sqlx_logging(false)
        .acquire_timeout(Duration::from_secs(30));
    options
}

/// The pool of a SQLite file: a few connections, WAL, busy timeout (writers queue instead
/// of failing with `SQLITE_BUSY`).
fn sqlite_file_options(url: &str) -> ConnectOptions {
    let mut options = quiet(ConnectOptions::new(url));
    options
        .max_connections(4)
        .min_connections(1)
        .map_sqlx_sqlite_opts(|opts| {
            opts.journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Normal)
                .busy_timeout(Duration::from_secs(30))
        });
    options
}

#[derive(Debug, Clone)]
struct ServerDatabase {
    backend: DbBackend,
    admin_url: String,
    name: String,
}

impl ServerDatabase {
    async fn drop_database(&self) {
        let statement = if self.backend == DbBackend::Postgres {
            format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.name)
        } else {
            format!("DROP DATABASE IF EXISTS `{}`", self.name)
        };
        match Database::connect(quiet(ConnectOptions::new(&self.admin_url))).await {
            Ok(admin) => {
                if self.backend == DbBackend::MySql {
                    // Connections left behind (e.g. by a relay aborted mid-batch) would make
                    // DROP DATABASE wait for their metadata locks.
                    let kill = Statement::from_sql_and_values(
                        DbBackend::MySql,
                        "SELECT id FROM information_schema.processlist WHERE db = ?",
                        [self.name.clone().into()],
                    );
                    if let Ok(rows) = admin.query_all_raw(kill).await {
                        for row in rows {
                            if let Ok(id) = row.try_get_by_index::<u64>(0) {
                                let _ = admin.execute_unprepared(&format!("KILL {id}")).await;
                            }
                        }
                    }
                }
                if self.backend == DbBackend::Postgres {
                    self.drop_replication_slots(&admin).await;
                }
                if let Err(error) = admin.execute_unprepared(&statement).await {
                    tracing::warn!(%error, database = %self.name, "could not drop the demo database");
                }
                let _ = admin.close().await;
            }
            Err(error) => {
                tracing::warn!(%error, database = %self.name, "could not drop the demo database");
            }
        }
    }
}

impl ServerDatabase {
    /// Drops the replication slots of the database (a log relay's slot left behind by a
    /// scenario that failed or timed out): PostgreSQL refuses to drop a database that has
    /// one, and a forgotten slot keeps the server's WAL forever. A slot still streamed from
    /// is freed first (its walsender terminated).
    async fn drop_replication_slots(&self, admin: &DatabaseConnection) {
        let database = || -> sea_orm::Value { self.name.clone().into() };
        let terminate = Statement::from_sql_and_values(
            DbBackend::Postgres,
            "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots \
             WHERE database = $1 AND active_pid IS NOT NULL",
            [database()],
        );
        let drop = Statement::from_sql_and_values(
            DbBackend::Postgres,
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots \
             WHERE database = $1",
            [database()],
        );
        // A terminated walsender releases its slot a moment later.
        for _ in 0..50 {
            let _ = admin.query_all_raw(terminate.clone()).await;
            match admin.query_all_raw(drop.clone()).await {
                Ok(_) => return,
                Err(error) => {
                    tracing::debug!(%error, database = %self.name, "dropping the demo's replication slots");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
        tracing::warn!(database = %self.name, "could not drop the demo database's replication slots");
    }
}

/// The database of one scenario; [`close`](Self::close) it at the end (server databases
/// are dropped then; also, from a helper thread, when it is dropped without closing).
#[derive(Debug)]
pub struct ScenarioDb {
    conn: DatabaseConnection,
    backend: DbBackend,
    url: String,
    server: Option<ServerDatabase>,
}

impl ScenarioDb {
    /// The connection pool.
    pub fn conn(&self) -> &DatabaseConnection {
        &self.conn
    }

    /// The backend.
    pub fn backend(&self) -> DbBackend {
        self.backend
    }

    /// The URL the pool connected to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Closes the pool and drops the scenario's server database.
    pub async fn close(mut self) {
        // A pool waits for its checked-out connections; do not wait for one that was
        // leaked (the server database is dropped anyway).
        if tokio::time::timeout(Duration::from_secs(5), self.conn.close_by_ref())
            .await
            .is_err()
        {
            tracing::warn!(url = %self.url, "the scenario's pool did not close within 5 s");
        }
        if let Some(server) = self.server.take() {
            server.drop_database().await;
        }
    }
}

impl Drop for ScenarioDb {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            let _ = std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build();
                if let Ok(runtime) = runtime {
                    runtime.block_on(server.drop_database());
                }
            })
            .join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_database_urls() {
        assert_eq!(
            DatabaseTarget::parse("sqlite:///tmp/x/demo.db?mode=rwc").ok(),
            Some(DatabaseTarget::SqliteFiles {
                dir: PathBuf::from("/tmp/x"),
                stem: "demo".to_owned()
            })
        );
        assert_eq!(
            DatabaseTarget::parse("sqlite::memory:").ok(),
            Some(DatabaseTarget::SqliteMemory)
        );
        assert_eq!(
            DatabaseTarget::parse("mariadb://root@127.0.0.1:3306/test").ok(),
            Some(DatabaseTarget::MySql(
                "mysql://root@127.0.0.1:3306/test".to_owned()
            ))
        );
        assert!(DatabaseTarget::parse("oracle://x").is_err());
    }

    #[test]
    fn replaces_the_database_and_hides_the_password() {
        assert_eq!(
            with_database("postgres://postgres@127.0.0.1:5432/postgres", "x"),
            "postgres://postgres@127.0.0.1:5432/x"
        );
        assert_eq!(
            with_database("mysql://root@127.0.0.1:3306?ssl-mode=disabled", "x"),
            "mysql://root@127.0.0.1:3306/x?ssl-mode=disabled"
        );
        assert_eq!(
            without_password("postgres://app:secret@db:5432/app"),
            "postgres://app:***@db:5432/app"
        );
    }
}
