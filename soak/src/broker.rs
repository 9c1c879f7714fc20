//! The soak's own NATS server: `nats-server` with JetStream on a free loopback port and a
//! store folder of the soak's, so that it can be killed and restarted without touching the
//! machine's shared server.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};

use crate::SoakError;

/// A running (or killed) NATS server of the soak.
#[derive(Debug)]
pub struct NatsServer {
    binary: PathBuf,
    port: u16,
    store: PathBuf,
    log: PathBuf,
    child: Option<Child>,
}

impl NatsServer {
    /// Starts `binary` on a free loopback port, storing under `dir`; returns once it
    /// accepts connections.
    ///
    /// # Errors
    /// When the server cannot be started or does not listen within 10 s.
    pub async fn start(binary: &Path, dir: &Path) -> Result<Self, SoakError> {
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
            listener.local_addr()?.port()
        };
        let mut server = Self {
            binary: binary.to_owned(),
            port,
            store: dir.join("nats-store"),
            log: dir.join("nats-server.log"),
            child: None,
        };
        server.spawn().await?;
        Ok(server)
    }

    /// The URL clients connect to.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Kills the server (`SIGKILL`: what JetStream acknowledged is in its store files).
    ///
    /// # Errors
    /// When the process cannot be signalled.
    pub async fn kill(&mut self) -> Result<(), SoakError> {
        if let Some(mut child) = self.child.take() {
            child.start_kill()?;
            child.wait().await?;
        }
        Ok(())
    }

    /// Starts the server again on the same port and store (after a kill).
    ///
    /// # Errors
    /// As [`start`](Self::start).
    pub async fn restart(&mut self) -> Result<(), SoakError> {
        self.kill().await?;
        self.spawn().await
    }

    /// Whether the server process runs.
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|child| matches!(child.try_wait(), Ok(None)))
    }

    async fn spawn(&mut self) -> Result<(), SoakError> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        let child = Command::new(&self.binary)
            .args([
                "-a",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-js",
                "-sd",
            ])
            .arg(&self.store)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .map_err(|error| {
                SoakError::Setup(format!(
                    "cannot start {} (--nats-server): {error}",
                    self.binary.display()
                ))
            })?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while tokio::net::TcpStream::connect(("127.0.0.1", self.port))
            .await
            .is_err()
        {
            if Instant::now() >= deadline {
                return Err(SoakError::Setup(format!(
                    "nats-server does not listen on {} (see {})",
                    self.port,
                    self.log.display()
                )));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }
}
