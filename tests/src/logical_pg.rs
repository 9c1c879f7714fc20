//! A PostgreSQL cluster with `wal_level = logical`, for the log relay's tests: the
//! machine's own server runs with `wal_level = replica`, and logical decoding needs a
//! restart to change it, so the tests start a cluster of their own.
//!
//! [`LogicalPostgres::shared`] runs `initdb` into a temporary directory (as the `postgres`
//! OS user when the tests run as root: PostgreSQL refuses to run as root) and starts the
//! server on a free loopback port under a watchdog shell that stops it and removes the
//! directory when the test binary is gone (statics are never dropped). One cluster per test
//! binary; each test creates a database of its own ([`TestDb::logical_postgres`]) and
//! slots of its own name.
//!
//! The server binaries are found with `pg_config --bindir`, else the newest
//! `/usr/lib/postgresql/<version>/bin`, or at `$OUTBOX_PG_BINDIR`. When they are missing
//! the test fails saying so (skips loudly with `OUTBOX_ALLOW_MISSING_SERVICES=1`).
//!
//! [`TestDb::logical_postgres`]: crate::db::TestDb::logical_postgres

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tokio::sync::OnceCell;

use crate::services_required;

/// Environment variable naming the directory of `initdb` and `postgres`.
pub const BINDIR_VARIABLE: &str = "OUTBOX_PG_BINDIR";

/// How long a fresh cluster may take to accept connections.
const STARTUP: Duration = Duration::from_secs(60);

/// A running cluster with `wal_level = logical`.
#[derive(Debug)]
pub struct LogicalPostgres {
    /// The watchdog shell; the server runs as its child.
    child: Child,
    port: u16,
    dir: PathBuf,
}

static SHARED: OnceCell<Option<LogicalPostgres>> = OnceCell::const_new();

/// The directory of the server binaries, if installed.
pub fn bindir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os(BINDIR_VARIABLE) {
        let dir = PathBuf::from(dir);
        return dir.join("initdb").is_file().then_some(dir);
    }
    let from_pg_config = Command::new("pg_config")
        .arg("--bindir")
        .output()
        .ok()
        .filter(|output| output.status.success())
        .map(|output| PathBuf::from(String::from_utf8_lossy(&output.stdout).trim()))
        .filter(|dir| dir.join("initdb").is_file());
    from_pg_config.or_else(|| {
        let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
            .ok()?
            .filter_map(|entry| {
                let entry = entry.ok()?;
                let version = entry.file_name().to_str()?.parse().ok()?;
                let bin = entry.path().join("bin");
                bin.join("initdb").is_file().then_some((version, bin))
            })
            .collect();
        versions.sort();
        versions.pop().map(|(_, bin)| bin)
    })
}

/// `program args…`, as the `postgres` OS user when running as root.
fn as_server_user(program: &Path) -> Command {
    if crate::running_as_root() {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(program);
        command
    } else {
        Command::new(program)
    }
}

impl LogicalPostgres {
    /// The cluster shared by the tests of this binary, started on first use; `None` (after
    /// a loud message) when the server binaries are missing and services are not required.
    pub async fn shared(test: &str) -> Option<&'static LogicalPostgres> {
        let Some(bindir) = bindir() else {
            let message = format!(
                "PostgreSQL's server binaries (initdb, postgres) are not installed (${BINDIR_VARIABLE}, \
                 pg_config --bindir or /usr/lib/postgresql/*/bin); test `{test}` needs a \
                 wal_level=logical cluster of its own"
            );
            crate::missing(&message, services_required());
            return None;
        };
        SHARED
            .get_or_init(|| async move { Some(Self::start(&bindir, &[]).await) })
            .await
            .as_ref()
    }

    /// A cluster of the caller's own with extra server settings (`-c name=value`), stopped
    /// when dropped; `None` as for [`shared`](Self::shared).
    pub async fn dedicated(test: &str, settings: &[(&str, &str)]) -> Option<LogicalPostgres> {
        let Some(bindir) = bindir() else {
            crate::missing(
                &format!(
                    "PostgreSQL's server binaries are not installed; test `{test}` needs them"
                ),
                services_required(),
            );
            return None;
        };
        Some(Self::start(&bindir, settings).await)
    }

    async fn start(bindir: &Path, settings: &[(&str, &str)]) -> LogicalPostgres {
        let dir = tempfile::Builder::new()
            .prefix("outbox-logical-pg-")
            .tempdir()
            .unwrap_or_else(|error| panic!("cannot create a cluster directory: {error}"))
            .keep();
        crate::give_to_server_user(&dir);
        let data = dir.join("data");
        let output = as_server_user(&bindir.join("initdb"))
            .arg("-D")
            .arg(&data)
            .args(["-U", "postgres", "--auth=trust", "-N", "-E", "UTF8"])
            .output()
            .unwrap_or_else(|error| panic!("cannot run initdb: {error}"));
        assert!(
            output.status.success(),
            "initdb failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        let port = crate::free_port();
        let mut options = vec![
            "-c wal_level=logical".to_owned(),
            format!("-c port={port}"),
            "-c listen_addresses=127.0.0.1".to_owned(),
            format!("-c unix_socket_directories={}", dir.display()),
            "-c fsync=off".to_owned(),
            "-c synchronous_commit=off".to_owned(),
            "-c max_replication_slots=64".to_owned(),
            "-c max_wal_senders=64".to_owned(),
            "-c max_connections=300".to_owned(),
        ];
        options.extend(
            settings
                .iter()
                .map(|(name, value)| format!("-c {name}={value}")),
        );
        // A watchdog shell starts the server and stops it (fast shutdown), then removes the
        // directory, when the test binary (its parent) or the server is gone.
        let user = if crate::running_as_root() {
            "runuser -u postgres --"
        } else {
            ""
        };
        let script = format!(
            r#"
{user} "$PG_BIN/postgres" -D "$PG_DATA" {options} </dev/null >"$PG_DIR/log" 2>&1 &
exec >/dev/null
sleep 1
while kill -0 "$PG_PARENT" 2>/dev/null && [ -f "$PG_DATA/postmaster.pid" ]; do sleep 1; done
pid=$(head -1 "$PG_DATA/postmaster.pid" 2>/dev/null)
[ -n "$pid" ] && kill -INT "$pid" 2>/dev/null
for _ in $(seq 1 30); do [ -f "$PG_DATA/postmaster.pid" ] || break; sleep 0.2; done
rm -rf "$PG_DIR"
"#,
            options = options.join(" ")
        );
        let child = Command::new("sh")
            .arg("-c")
            .arg(script)
            .env("PG_BIN", bindir)
            .env("PG_DATA", &data)
            .env("PG_DIR", &dir)
            .env("PG_PARENT", std::process::id().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start the cluster's watchdog: {error}"));
        let cluster = LogicalPostgres { child, port, dir };
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let started = Instant::now();
        loop {
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
                && cluster.accepts_queries()
            {
                break;
            }
            assert!(
                started.elapsed() < STARTUP,
                "the wal_level=logical cluster did not start within {STARTUP:?}: {}",
                std::fs::read_to_string(cluster.dir.join("log")).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        cluster
    }

    /// Whether the server is past recovery and answers (a connect can succeed while it
    /// still says "the database system is starting up").
    fn accepts_queries(&self) -> bool {
        let Some(bindir) = bindir() else {
            return true;
        };
        Command::new(bindir.join("pg_isready"))
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    }

    /// The port the server listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The URL of its `postgres` database, as user `postgres` (trust).
    pub fn admin_url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("log")).unwrap_or_default()
    }
}

impl Drop for LogicalPostgres {
    fn drop(&mut self) {
        let pid = std::fs::read_to_string(self.dir.join("data/postmaster.pid"))
            .ok()
            .and_then(|text| text.lines().next().map(str::to_owned));
        if let Some(pid) = pid {
            let _ = Command::new("kill")
                .args(["-INT", &pid])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        let _ = self.child.wait();
    }
}
