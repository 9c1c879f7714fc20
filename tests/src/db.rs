//! Databases for backend tests. Each test gets a database of its own — a temporary SQLite
//! file, a private in-memory SQLite database, or a fresh PostgreSQL / MariaDB database named
//! `outbox_t_<uuid>` — and drops it at the end (also when the test panics).
//!
//! [`backend_tests!`](crate::backend_tests) runs one scenario on every backend.
//!
//! Pool settings (what a service on these backends should use too):
//!
//! - **SQLite file**: up to 4 connections, WAL journal, `synchronous = NORMAL`, busy timeout
//!   30 s. Units of work begin with `BEGIN IMMEDIATE` (the outbox default), so concurrent
//!   writers queue on the busy timeout instead of failing with `SQLITE_BUSY`.
//! - **SQLite in memory**: exactly one connection kept forever (`min_connections(1)`, no idle
//!   timeout, no max lifetime): every connection to `sqlite::memory:` is a different, empty
//!   database, and the database disappears with its last connection.
//! - **PostgreSQL, MariaDB**: sqlx defaults (10 connections).

use std::time::Duration;

use sea_orm::sqlx::sqlite::{SqliteJournalMode, SqliteSynchronous};
use sea_orm::{ConnectOptions, ConnectionTrait, Database, DatabaseConnection, DbBackend};

use crate::Service;

/// Which database a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Backend {
    /// A SQLite file in a temporary directory.
    SqliteFile,
    /// A private in-memory SQLite database on one connection.
    SqliteMemory,
    /// A fresh PostgreSQL database.
    Postgres,
    /// A fresh MariaDB database.
    MariaDb,
}

impl Backend {
    /// SeaORM's backend.
    pub fn db_backend(self) -> DbBackend {
        match self {
            Self::SqliteFile | Self::SqliteMemory => DbBackend::Sqlite,
            Self::Postgres => DbBackend::Postgres,
            Self::MariaDb => DbBackend::MySql,
        }
    }
}

enum Cleanup {
    Dir(#[allow(dead_code)] tempfile::TempDir),
    Server {
        service: Service,
        admin_url: String,
        name: String,
    },
}

/// A test database; see the [module documentation](self).
pub struct TestDb {
    db: DatabaseConnection,
    backend: Backend,
    url: String,
    cleanup: Option<Cleanup>,
}

/// `url` with its database (path) replaced by `name`, query kept.
fn with_database(url: &str, name: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let (authority, query) = match rest.split_once('/') {
        Some((authority, path)) => (authority, path.split_once('?').map(|(_, q)| q)),
        None => (rest, None),
    };
    match query {
        Some(query) => format!("{scheme}://{authority}/{name}?{query}"),
        None => format!("{scheme}://{authority}/{name}"),
    }
}

fn quiet(mut options: ConnectOptions) -> ConnectOptions {
    options
        .sqlx_logging(false)
        .acquire_timeout(Duration::from_secs(60));
    options
}

async fn connect(options: ConnectOptions) -> DatabaseConnection {
    let url = options.get_url().to_owned();
    Database::connect(options)
        .await
        .unwrap_or_else(|error| panic!("cannot connect to {url}: {error}"))
}

async fn drop_server_database(service: Service, admin_url: &str, name: &str) {
    let admin = connect(quiet(ConnectOptions::new(admin_url))).await;
    if service == Service::Postgres {
        // Replication slots of the database (log relay tests) block its drop: end their
        // streams, then drop them.
        let slots = format!(
            "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots \
             WHERE database = '{name}' AND active_pid IS NOT NULL"
        );
        let _ = admin.execute_unprepared(&slots).await;
        let drop_slots = format!(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots \
             WHERE database = '{name}'"
        );
        for _ in 0..50 {
            if admin.execute_unprepared(&drop_slots).await.is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    if service == Service::MariaDb {
        // A connection a test left inside a transaction (a relay "killed" mid-batch whose
        // transaction task still holds its locks) would make DROP DATABASE wait for its
        // metadata lock for good: end them first, as PostgreSQL's WITH (FORCE) does.
        let sessions = format!(
            "SELECT id FROM information_schema.processlist WHERE db = '{name}' \
             AND id <> CONNECTION_ID()"
        );
        if let Ok(rows) = admin
            .query_all_raw(sea_orm::Statement::from_string(
                sea_orm::DbBackend::MySql,
                sessions,
            ))
            .await
        {
            for row in rows {
                if let Ok(id) = row.try_get_by_index::<u64>(0) {
                    let _ = admin.execute_unprepared(&format!("KILL {id}")).await;
                }
            }
        }
    }
    let statement = match service {
        Service::Postgres => format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"),
        _ => format!("DROP DATABASE IF EXISTS `{name}`"),
    };
    if let Err(error) = admin.execute_unprepared(&statement).await {
        eprintln!("warning: could not drop test database {name}: {error}");
    }
    let _ = admin.close().await;
}

impl TestDb {
    /// Opens a database on `backend`, or `None` when its server is unreachable and services
    /// are not required (see [`service`](crate::service)).
    pub async fn open(backend: Backend, test: &str) -> Option<Self> {
        match backend {
            Backend::SqliteFile => Some(Self::sqlite_file().await),
            Backend::SqliteMemory => Some(Self::sqlite_memory().await),
            Backend::Postgres => Self::postgres(test).await,
            Backend::MariaDb => Self::mariadb(test).await,
        }
    }

    /// The pool options of a SQLite file database (see the module documentation).
    pub fn sqlite_file_options(url: &str) -> ConnectOptions {
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

    /// A SQLite file in a new temporary directory.
    pub async fn sqlite_file() -> Self {
        let dir = tempfile::tempdir().expect("temporary directory");
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("test.db").display());
        let db = connect(Self::sqlite_file_options(&url)).await;
        Self {
            db,
            backend: Backend::SqliteFile,
            url,
            cleanup: Some(Cleanup::Dir(dir)),
        }
    }

    /// A private in-memory SQLite database on exactly one connection.
    pub async fn sqlite_memory() -> Self {
        let url = "sqlite::memory:".to_owned();
        let mut options = quiet(ConnectOptions::new(&url));
        options
            .max_connections(1)
            .min_connections(1)
            .idle_timeout(None::<Duration>)
            .max_lifetime(None::<Duration>);
        let db = connect(options).await;
        Self {
            db,
            backend: Backend::SqliteMemory,
            url,
            cleanup: None,
        }
    }

    async fn server(kind: Service, backend: Backend, test: &str) -> Option<Self> {
        let admin_url = crate::service(kind, test)?;
        Some(Self::server_at(kind, backend, admin_url).await)
    }

    /// A fresh PostgreSQL database on the tests' `wal_level = logical` cluster (see
    /// [`crate::logical_pg`]), for the log relay.
    pub async fn logical_postgres(test: &str) -> Option<Self> {
        let cluster = crate::logical_pg::LogicalPostgres::shared(test).await?;
        Some(Self::server_at(Service::Postgres, Backend::Postgres, cluster.admin_url()).await)
    }

    /// A fresh MariaDB database on the tests' server with its binary log on (see
    /// [`crate::binlog_mariadb`]), for the binlog log relay.
    pub async fn binlog_mariadb(test: &str) -> Option<Self> {
        let server = crate::binlog_mariadb::BinlogMariaDb::shared(test).await?;
        Some(Self::server_at(Service::MariaDb, Backend::MariaDb, server.admin_url()).await)
    }

    /// A fresh database on the server of `admin_url`.
    pub async fn server_at(service: Service, backend: Backend, admin_url: String) -> Self {
        // UUIDv7: unique, and sortable by creation time when leftovers are inspected.
        let name = format!("outbox_t_{}", uuid::Uuid::now_v7().simple());
        let admin = connect(quiet(ConnectOptions::new(&admin_url))).await;
        let create = match service {
            Service::Postgres => format!("CREATE DATABASE \"{name}\""),
            _ => {
                format!("CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
            }
        };
        admin
            .execute_unprepared(&create)
            .await
            .unwrap_or_else(|error| panic!("cannot create database {name}: {error}"));
        let _ = admin.close().await;
        // From here on, the database is dropped even if connecting fails.
        let cleanup = Cleanup::Server {
            service,
            admin_url: admin_url.clone(),
            name: name.clone(),
        };
        let url = with_database(&admin_url, &name);
        let db = connect(quiet(ConnectOptions::new(&url))).await;
        Self {
            db,
            backend,
            url,
            cleanup: Some(cleanup),
        }
    }

    /// A fresh PostgreSQL database.
    pub async fn postgres(test: &str) -> Option<Self> {
        Self::server(Service::Postgres, Backend::Postgres, test).await
    }

    /// A fresh MariaDB database.
    pub async fn mariadb(test: &str) -> Option<Self> {
        Self::server(Service::MariaDb, Backend::MariaDb, test).await
    }

    /// A second pool of exactly one connection to this database, whose acquire gives up
    /// after `acquire_timeout`; on SQLite in memory, whose database lives on its pool's only
    /// connection, that pool itself.
    pub async fn single_connection_pool(&self, acquire_timeout: Duration) -> DatabaseConnection {
        let mut options = match self.backend {
            Backend::SqliteMemory => return self.db.clone(),
            Backend::SqliteFile => Self::sqlite_file_options(&self.url),
            _ => ConnectOptions::new(&self.url),
        };
        options
            .max_connections(1)
            .min_connections(1)
            .acquire_timeout(acquire_timeout)
            .sqlx_logging(false);
        connect(options).await
    }

    /// The connection pool.
    pub fn conn(&self) -> &DatabaseConnection {
        &self.db
    }

    /// The backend.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The URL the pool connected to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Closes the pool and drops the database.
    pub async fn close(mut self) {
        let _ = self.db.close_by_ref().await;
        match self.cleanup.take() {
            Some(Cleanup::Server {
                service,
                admin_url,
                name,
            }) => drop_server_database(service, &admin_url, &name).await,
            Some(Cleanup::Dir(dir)) => drop(dir),
            None => {}
        }
    }
}

impl Drop for TestDb {
    /// When a test panicked before [`TestDb::close`]: drop the server database from a
    /// helper thread with its own runtime (`Drop` cannot `await`).
    fn drop(&mut self) {
        if let Some(Cleanup::Server {
            service,
            admin_url,
            name,
        }) = self.cleanup.take()
        {
            let _ = std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build();
                if let Ok(runtime) = runtime {
                    runtime.block_on(drop_server_database(service, &admin_url, &name));
                }
            })
            .join();
        }
    }
}

/// Default time limit of one scenario: a deadlock fails the test instead of hanging CI.
pub const SCENARIO_TIMEOUT: Duration = Duration::from_secs(180);

/// Opens a database on `backend`, runs `scenario` on it within [`SCENARIO_TIMEOUT`], then
/// drops the database. Returns without running when the backend is skipped.
pub async fn run_scenario<F>(backend: Backend, test: &str, scenario: F)
where
    F: for<'a> AsyncFnOnce(&'a TestDb),
{
    let Some(db) = TestDb::open(backend, test).await else {
        return;
    };
    let started = std::time::Instant::now();
    if tokio::time::timeout(SCENARIO_TIMEOUT, scenario(&db))
        .await
        .is_err()
    {
        panic!("{test} did not finish within {SCENARIO_TIMEOUT:?}");
    }
    db.close().await;
    eprintln!("{test}: {:?}", started.elapsed());
}

/// Generates one `#[tokio::test]` per backend for each scenario
/// `async fn name(db: &TestDb)`, in a module named after the scenario:
/// `name::sqlite_file`, `name::sqlite_memory`, `name::postgres`, `name::mariadb`.
#[macro_export]
macro_rules! backend_tests {
    ($($scenario:ident),* $(,)?) => {
        $(
            mod $scenario {
                use $crate::db::{Backend, run_scenario};

                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sqlite_file() {
                    run_scenario(Backend::SqliteFile, concat!(stringify!($scenario), "::sqlite_file"), super::$scenario).await;
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sqlite_memory() {
                    run_scenario(Backend::SqliteMemory, concat!(stringify!($scenario), "::sqlite_memory"), super::$scenario).await;
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres() {
                    run_scenario(Backend::Postgres, concat!(stringify!($scenario), "::postgres"), super::$scenario).await;
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn mariadb() {
                    run_scenario(Backend::MariaDb, concat!(stringify!($scenario), "::mariadb"), super::$scenario).await;
                }
            }
        )*
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_database_of_a_url() {
        assert_eq!(
            with_database("postgres://postgres@127.0.0.1:5432/postgres", "x"),
            "postgres://postgres@127.0.0.1:5432/x"
        );
        assert_eq!(
            with_database("mysql://root@127.0.0.1:3306/test?ssl-mode=disabled", "x"),
            "mysql://root@127.0.0.1:3306/x?ssl-mode=disabled"
        );
        assert_eq!(
            with_database("mysql://root@127.0.0.1:3306", "x"),
            "mysql://root@127.0.0.1:3306/x"
        );
    }
}
