//! The soak's own broker server — `nats-server` with JetStream, `redis-server` with an
//! append-only file synced on every write, a RabbitMQ node of its own, or a tansu broker
//! (Kafka's wire protocol) storing in an SQLite file — on a free loopback port and a store
//! folder of the soak's, so that it can be killed and restarted without touching the
//! machine's shared server. Each keeps what it acknowledged across a `SIGKILL`: JetStream's
//! store files, Redis's AOF with `appendfsync always` (the reply to `XADD` or `XACK` leaves
//! after the fsync), RabbitMQ's message store (a confirm of a persistent message to a
//! durable queue leaves once it is on disk), tansu's SQLite file in WAL mode (a produce is
//! answered after its transaction committed).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};

use crate::error::SoakError;
use crate::plan::Broker;

/// A running (or killed) broker server of the soak.
#[derive(Debug)]
pub struct BrokerServer {
    broker: Broker,
    binary: PathBuf,
    port: u16,
    /// RabbitMQ's Erlang distribution port.
    distribution_port: u16,
    store: PathBuf,
    log: PathBuf,
    child: Option<Child>,
}

impl BrokerServer {
    /// Starts `broker`'s server `binary` on a free loopback port, storing under `dir`;
    /// returns once it accepts connections.
    ///
    /// # Errors
    /// When the server cannot be started or does not listen in time (10 s; a RabbitMQ
    /// node 90 s).
    pub async fn start(broker: Broker, binary: &Path, dir: &Path) -> Result<Self, SoakError> {
        let port = free_port()?;
        let distribution_port = free_port()?;
        let name = broker.name();
        let store = dir.join(format!("{name}-store"));
        std::fs::create_dir_all(&store)?;
        let mut server = Self {
            broker,
            binary: binary.to_owned(),
            port,
            distribution_port,
            store,
            log: dir.join(format!("{name}-server.log")),
            child: None,
        };
        server.spawn().await?;
        Ok(server)
    }

    /// The URL clients connect to.
    pub fn url(&self) -> String {
        match self.broker {
            Broker::Nats => format!("nats://127.0.0.1:{}", self.port),
            Broker::Redis => format!("redis://127.0.0.1:{}", self.port),
            Broker::Rabbitmq => format!("amqp://guest:guest@127.0.0.1:{}/%2f", self.port),
            Broker::Kafka => format!("127.0.0.1:{}", self.port),
        }
    }

    /// Creates `topic` with `partitions` partitions (`tansu topic create`; Kafka).
    ///
    /// # Errors
    /// When tansu cannot be run or refuses.
    pub async fn create_topic(&self, topic: &str, partitions: u32) -> Result<(), SoakError> {
        let output = Command::new(&self.binary)
            .args(["topic", "create", topic, "--broker"])
            .arg(format!("tcp://127.0.0.1:{}", self.port))
            .args(["--partitions", &partitions.to_string()])
            .output()
            .await?;
        if output.status.success() {
            return Ok(());
        }
        Err(SoakError::Broker(format!(
            "tansu topic create {topic} failed ({}): {}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )))
    }

    /// Kills the server (`SIGKILL`).
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

    /// The server's command line.
    fn command(&self) -> Command {
        let mut command = Command::new(&self.binary);
        let port = self.port.to_string();
        match self.broker {
            Broker::Nats => {
                command
                    .args(["-a", "127.0.0.1", "-p", &port, "-js", "-sd"])
                    .arg(&self.store);
            }
            Broker::Redis => {
                command
                    .args(["--bind", "127.0.0.1", "--port", &port, "--dir"])
                    .arg(&self.store)
                    .args([
                        "--appendonly",
                        "yes",
                        "--appendfsync",
                        "always",
                        "--save",
                        "",
                        "--daemonize",
                        "no",
                    ]);
            }
            Broker::Rabbitmq => {
                // A node of its own: its name, ports and folders; neither the machine's
                // configuration (its listener is the shared node's port) nor its plugins.
                // `RUNNING_UNDER_SYSTEMD` makes the script `exec` the VM instead of waiting
                // on it, so the child is the node itself.
                let none = self.store.join("none");
                command
                    .env("RUNNING_UNDER_SYSTEMD", "true")
                    .env("RABBITMQ_NODENAME", format!("soak{}@localhost", self.port))
                    .env("RABBITMQ_NODE_IP_ADDRESS", "127.0.0.1")
                    .env("RABBITMQ_NODE_PORT", &port)
                    .env("RABBITMQ_DIST_PORT", self.distribution_port.to_string())
                    .env("RABBITMQ_MNESIA_BASE", self.store.join("mnesia"))
                    .env("RABBITMQ_LOG_BASE", self.store.join("log"))
                    .env("RABBITMQ_PID_FILE", self.store.join("pid"))
                    .env("RABBITMQ_CONFIG_FILE", &none)
                    .env("RABBITMQ_CONF_ENV_FILE", &none)
                    .env("RABBITMQ_ENABLED_PLUGINS_FILE", self.store.join("plugins"));
            }
            Broker::Kafka => {
                // tansu takes an SQLite URL's path as relative to its working directory.
                let listener = format!("tcp://127.0.0.1:{port}");
                command
                    .current_dir(&self.store)
                    .args(["broker", "--listener-url", &listener])
                    .args(["--advertised-listener-url", &listener])
                    .args(["--storage-engine", "sqlite://tansu.db"]);
            }
        }
        command
    }

    async fn spawn(&mut self) -> Result<(), SoakError> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        let child = self
            .command()
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .map_err(|error| {
                SoakError::Setup(format!(
                    "cannot start {} (--{}-server): {error}",
                    self.binary.display(),
                    self.broker.name()
                ))
            })?;
        self.child = Some(child);
        // A RabbitMQ node takes 5–20 s to boot on two busy cores.
        let boot = match self.broker {
            Broker::Rabbitmq => Duration::from_secs(90),
            Broker::Nats | Broker::Redis | Broker::Kafka => Duration::from_secs(10),
        };
        let deadline = Instant::now() + boot;
        while tokio::net::TcpStream::connect(("127.0.0.1", self.port))
            .await
            .is_err()
        {
            if !self.is_running() {
                return Err(SoakError::Setup(self.exited()));
            }
            if Instant::now() >= deadline {
                return Err(SoakError::Setup(format!(
                    "{} does not listen on {} (see {})",
                    self.binary.display(),
                    self.port,
                    self.log.display()
                )));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }

    /// Why the server exited during its start: the end of its log, and what to do about a
    /// tansu without SQLite storage.
    fn exited(&self) -> String {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        let tail = &lines[lines.len().saturating_sub(5)..];
        let mut message = format!(
            "{} exited during its start (see {}): {}",
            self.binary.display(),
            self.log.display(),
            tail.join(" | ")
        );
        if self.broker == Broker::Kafka && log.contains("FeatureNotEnabled") {
            message.push_str(
                "; the soak's tansu stores in an SQLite file: install it with `cargo install \
                 tansu --version 0.6.0 --locked --force --no-default-features --features \
                 dynostore,libsql`",
            );
        }
        message
    }
}

/// A loopback port nobody listens on now.
fn free_port() -> Result<u16, SoakError> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}
