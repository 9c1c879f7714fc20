//! `bookstore-services up`: the three Bookstore processes on this machine — Ordering (HTTP,
//! PostgreSQL), the `outbox` relay service (from `outbox.toml`, to NATS) and Inventory
//! (NATS into MariaDB) — started together and stopped together (Ctrl-C, SIGTERM, or one
//! of them exiting).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use sea_orm::{ConnectionTrait, Database, DbBackend};

use crate::DemoError;

/// Where the three processes find their databases, broker and addresses.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The Ordering database (PostgreSQL).
    pub ordering_database: String,
    /// The Inventory database (MariaDB).
    pub inventory_database: String,
    /// NATS.
    pub nats_url: String,
    /// The Ordering API's address.
    pub ordering_listen: SocketAddr,
    /// Inventory's address (`GET /stock/{book}`).
    pub inventory_listen: SocketAddr,
    /// The relay service's configuration file.
    pub relay_config: PathBuf,
    /// The console operator's token (`OUTBOX_CONSOLE_USER_OPERATOR_TOKEN`).
    pub console_token: String,
}

/// Creates database `name` on the server of `admin_url` unless it exists; returns its URL.
///
/// # Errors
/// [`DemoError`] when the server cannot be reached or refuses.
pub async fn ensure_database(admin_url: &str, name: &str) -> Result<String, DemoError> {
    let admin = Database::connect(admin_url)
        .await
        .map_err(DemoError::broker)?;
    let backend = admin.get_database_backend();
    let exists = match backend {
        DbBackend::Postgres => admin
            .query_one_raw(sea_orm::Statement::from_string(
                backend,
                format!("SELECT 1 AS one FROM pg_database WHERE datname = '{name}'"),
            ))
            .await
            .map_err(DemoError::broker)?
            .is_some(),
        _ => false,
    };
    if !exists {
        let create = match backend {
            DbBackend::Postgres => format!("CREATE DATABASE \"{name}\""),
            _ => format!("CREATE DATABASE IF NOT EXISTS `{name}` CHARACTER SET utf8mb4"),
        };
        admin
            .execute_unprepared(&create)
            .await
            .map_err(DemoError::broker)?;
    }
    let _ = admin.close().await;
    let (base, _) = admin_url.rsplit_once('/').unwrap_or((admin_url, ""));
    Ok(format!("{base}/{name}"))
}

/// Waits until `process` accepts connections on `address` (at most a minute, or until
/// `stop`); returns its exit status when it exits first.
fn wait_until_listening(
    process: &mut Process,
    address: SocketAddr,
    stop: &std::sync::atomic::AtomicBool,
) -> Option<ExitStatus> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline && !stop.load(std::sync::atomic::Ordering::SeqCst) {
        if let Ok(Some(status)) = process.child.try_wait() {
            return Some(status);
        }
        if std::net::TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_ok() {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    tracing::warn!(process = process.name, %address, "not listening after a minute; starting the others anyway");
    None
}

/// A child process, terminated on drop.
struct Process {
    name: &'static str,
    child: Child,
}

impl Drop for Process {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn terminate(process: &Process) {
    let _ = Command::new("kill")
        .args(["-TERM", &process.child.id().to_string()])
        .status();
}

/// Starts the three processes of `plan` and waits until `stop` is set or one of them exits;
/// then stops them all (SIGTERM, then SIGKILL after 20 s). Returns the first exit status
/// that was not a success, if any.
///
/// # Errors
/// [`DemoError`] when a process cannot be started.
pub fn run(
    plan: &Plan,
    stop: &std::sync::atomic::AtomicBool,
) -> Result<Option<(String, ExitStatus)>, DemoError> {
    let exe = std::env::current_exe()
        .map_err(|error| DemoError::Broker(format!("cannot find this program: {error}")))?;
    let spawn = |name: &'static str, command: &mut Command| -> Result<Process, DemoError> {
        let child = command
            .spawn()
            .map_err(|error| DemoError::Broker(format!("cannot start {name}: {error}")))?;
        Ok(Process { name, child })
    };
    let mut ordering = spawn(
        "ordering",
        Command::new(&exe).args([
            "ordering",
            "--database",
            &plan.ordering_database,
            "--listen",
            &plan.ordering_listen.to_string(),
        ]),
    )?;
    // Ordering installs the outbox tables before it listens: the relay service starts
    // once it answers, so that it never looks for tables that are not there yet.
    if let Some(status) = wait_until_listening(&mut ordering, plan.ordering_listen, stop) {
        return Ok(Some((ordering.name.to_owned(), status)).filter(|(_, status)| !status.success()));
    }
    let mut processes = vec![
        ordering,
        spawn(
            "relay",
            Command::new(&exe)
                .arg("relay")
                .arg(&plan.relay_config)
                .env(
                    "OUTBOX_RELAY_ORDERING_DATABASE_URL",
                    &plan.ordering_database,
                )
                .env("OUTBOX_RELAY_ORDERING_BROKER_URL", &plan.nats_url)
                .env("OUTBOX_CONSOLE_USER_OPERATOR_TOKEN", &plan.console_token),
        )?,
        spawn(
            "inventory",
            Command::new(&exe).args([
                "inventory",
                "--database",
                &plan.inventory_database,
                "--nats-url",
                &plan.nats_url,
                "--listen",
                &plan.inventory_listen.to_string(),
            ]),
        )?,
    ];
    let mut failed = None;
    'watch: while !stop.load(std::sync::atomic::Ordering::SeqCst) {
        for process in &mut processes {
            if let Ok(Some(status)) = process.child.try_wait() {
                tracing::warn!(process = process.name, %status, "a Bookstore process exited; stopping the others");
                if !status.success() {
                    failed = Some((process.name.to_owned(), status));
                }
                break 'watch;
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    for process in &processes {
        terminate(process);
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    for process in &mut processes {
        while Instant::now() < deadline {
            match process.child.try_wait() {
                Ok(Some(status)) => {
                    if !status.success() && failed.is_none() {
                        failed = Some((process.name.to_owned(), status));
                    }
                    break;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(50)),
                Err(_) => break,
            }
        }
    }
    Ok(failed)
}
