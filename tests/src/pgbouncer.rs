//! A PgBouncer of the test's own in front of the tests' PostgreSQL, in **transaction**
//! pooling mode: the setup of a SaaS that runs many tenant databases on one server.
//!
//! [`PgBouncer::start`] writes a configuration into a temporary directory (every database of
//! the upstream server, trust authentication, `pool_mode = transaction`, the pool size asked
//! for, and the settings the book recommends: `server_reset_query = DEALLOCATE ALL` with
//! `server_reset_query_always = 1`, so that a server connection handed to another client
//! carries no prepared statement of the last one) and runs Debian's `/usr/sbin/pgbouncer` on
//! a free loopback port under a watchdog shell that stops it and removes the directory when
//! the test binary is gone, or when dropped. PgBouncer refuses to run as root: as root the tests run it as the `postgres`
//! OS user. [`PgBouncer::restart`] stops it and starts it again on the same port (a pooler
//! restarted under a running service). When the binary is missing the test fails saying so
//! (skips loudly with `OUTBOX_ALLOW_MISSING_SERVICES=1`).

use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where Debian's package puts the binary.
const BINARY: &str = "/usr/sbin/pgbouncer";

/// How long PgBouncer may take to accept connections.
const STARTUP: Duration = Duration::from_secs(20);

/// A running PgBouncer.
#[derive(Debug)]
pub struct PgBouncer {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
}

impl PgBouncer {
    /// A PgBouncer in front of the PostgreSQL server at `upstream_port` (127.0.0.1), with
    /// `pool_size` server connections per database and user; `None` (after a loud
    /// message) when PgBouncer is not installed and services are not required.
    pub async fn start(test: &str, upstream_port: u16, pool_size: u32) -> Option<PgBouncer> {
        let binary = crate::program(
            "PgBouncer",
            &[BINARY],
            "run `bash scripts/provision` (installs Debian's pgbouncer)",
            test,
        )?;
        let dir = tempfile::Builder::new()
            .prefix("outbox-pgbouncer-")
            .tempdir()
            .unwrap_or_else(|error| panic!("cannot create PgBouncer's directory: {error}"))
            .keep();
        let port = crate::free_port();
        let config = format!(
            "[databases]\n\
             * = host=127.0.0.1 port={upstream_port}\n\
             [pgbouncer]\n\
             listen_addr = 127.0.0.1\n\
             listen_port = {port}\n\
             unix_socket_dir =\n\
             auth_type = trust\n\
             auth_file = {dir}/users.txt\n\
             pool_mode = transaction\n\
             default_pool_size = {pool_size}\n\
             min_pool_size = 0\n\
             reserve_pool_size = 0\n\
             max_client_conn = 2000\n\
             server_reset_query = DEALLOCATE ALL\n\
             server_reset_query_always = 1\n\
             ignore_startup_parameters = extra_float_digits,options\n\
             logfile = {dir}/log\n\
             pidfile = {dir}/pid\n\
             admin_users = postgres\n",
            dir = dir.display()
        );
        std::fs::write(dir.join("pgbouncer.ini"), config)
            .unwrap_or_else(|error| panic!("cannot write PgBouncer's configuration: {error}"));
        std::fs::write(dir.join("users.txt"), "\"postgres\" \"\"\n")
            .unwrap_or_else(|error| panic!("cannot write PgBouncer's users: {error}"));
        crate::give_to_server_user(&dir);
        let mut bouncer = PgBouncer {
            child: None,
            port,
            dir,
        };
        bouncer.spawn(&binary).await;
        Some(bouncer)
    }

    async fn spawn(&mut self, binary: &std::path::Path) {
        let user = if crate::running_as_root() {
            "runuser -u postgres --"
        } else {
            ""
        };
        // A watchdog shell runs PgBouncer and stops it when the test binary (its parent) is
        // gone; the directory goes with the last stop (see Drop).
        let script = format!(
            r#"
{user} "$PGB_BIN" "$PGB_DIR/pgbouncer.ini" </dev/null >>"$PGB_DIR/out" 2>&1 &
pgb=$!
exec >/dev/null
# SIGTERM is PgBouncer's immediate shutdown (SIGINT waits for every client to leave).
stop() {{ kill -TERM "$(cat "$PGB_DIR/pid" 2>/dev/null)" 2>/dev/null; wait $pgb; }}
trap 'stop; exit 0' TERM
while kill -0 "$PGB_PARENT" 2>/dev/null && kill -0 $pgb 2>/dev/null; do sleep 1 & wait $!; done
stop
[ -f "$PGB_DIR/keep" ] || rm -rf "$PGB_DIR"
"#
        );
        let child = Command::new("sh")
            .arg("-c")
            .arg(script)
            .env("PGB_BIN", binary)
            .env("PGB_DIR", &self.dir)
            .env("PGB_PARENT", std::process::id().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start PgBouncer's watchdog: {error}"));
        self.child = Some(child);
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        let started = Instant::now();
        while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            assert!(
                started.elapsed() < STARTUP,
                "PgBouncer did not start within {STARTUP:?}: {}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Stops PgBouncer (its clients' connections break) and waits for it to exit.
    pub fn stop(&mut self) {
        // The directory stays for the restart.
        let _ = std::fs::write(self.dir.join("keep"), "");
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            let _ = child.wait();
        }
    }

    /// Stops PgBouncer and starts it again on the same port.
    pub async fn restart(&mut self) {
        self.stop();
        self.spawn(std::path::Path::new(BINARY)).await;
    }

    /// The port it listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The URL of `database` through PgBouncer, as user `postgres`.
    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    /// PgBouncer's log so far.
    pub fn log(&self) -> String {
        let log = std::fs::read_to_string(self.dir.join("log")).unwrap_or_default();
        let out = std::fs::read_to_string(self.dir.join("out")).unwrap_or_default();
        format!("{log}{out}")
    }

    /// The number of server connections PgBouncer holds to `database` now (its admin
    /// console's `SHOW SERVERS`, through `psql`).
    pub fn server_connections(&self, database: &str) -> usize {
        let output = Command::new("psql")
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
                "-At",
                "-F",
                "|",
                "-c",
                "SHOW SERVERS",
                "pgbouncer",
            ])
            .output()
            .unwrap_or_else(|error| panic!("cannot run psql: {error}"));
        assert!(
            output.status.success(),
            "SHOW SERVERS failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        // Columns: type|user|database|state|…
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter(|line| line.split('|').nth(2) == Some(database))
            .count()
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
