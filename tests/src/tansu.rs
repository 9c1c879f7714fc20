//! A Kafka-wire-compatible broker for the tests: [`tansu`](https://crates.io/crates/tansu)
//! with memory storage, started as a child process on a free loopback port and stopped at
//! the end.
//!
//! - [`Tansu::shared`]: one broker per test binary (each test creates topics of its own);
//!   it stops with the test binary (the process watches its parent).
//! - [`Tansu::behind_proxy`]: a broker of the test's own, reachable only through a
//!   [`Proxy`] — its advertised address is the proxy's, so every client connection (also
//!   the ones librdkafka opens after reading the metadata) goes through the proxy, and
//!   [`Proxy::cut`] makes the broker unavailable. Stopped when dropped.
//!
//! When `tansu` is not on `PATH` (or at `$OUTBOX_TANSU`), the test fails saying so, or skips
//! with a loud message when `OUTBOX_ALLOW_MISSING_SERVICES=1` (see
//! [`service`](crate::service)); `scripts/test` installs it.
//!
//! ```no_run
//! # async fn demo() {
//! let Some(tansu) = outbox_tests::tansu::Tansu::shared("my_test").await else { return };
//! tansu.create_topic("my-topic", 3).await;
//! let bootstrap = tansu.bootstrap(); // "127.0.0.1:PORT"
//! # }
//! ```

use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tokio::sync::OnceCell;

use crate::proxy::Proxy;
use crate::services_required;

/// Environment variable naming the `tansu` binary (default: `tansu` on `PATH`, then
/// `~/.cargo/bin/tansu`).
pub const TANSU_VARIABLE: &str = "OUTBOX_TANSU";

/// How long a fresh broker may take to accept connections.
const STARTUP: Duration = Duration::from_secs(20);

/// A running tansu broker.
#[derive(Debug)]
pub struct Tansu {
    binary: PathBuf,
    /// The `sh` watchdog; tansu runs as its child.
    child: Child,
    /// tansu's own process id (the watchdog prints it first).
    pid: Option<u32>,
    /// Where tansu listens.
    listen: SocketAddr,
    /// Where clients connect (the proxy, if any).
    advertised: SocketAddr,
    proxy: Option<Proxy>,
}

static SHARED: OnceCell<Option<Tansu>> = OnceCell::const_new();

/// The `tansu` binary, if installed.
pub fn binary() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(TANSU_VARIABLE) {
        let path = PathBuf::from(path);
        return path.is_file().then_some(path);
    }
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("tansu"))
            .find(|candidate| candidate.is_file())
    });
    on_path.or_else(|| {
        let home = PathBuf::from(std::env::var_os("HOME")?);
        let cargo = home.join(".cargo/bin/tansu");
        cargo.is_file().then_some(cargo)
    })
}

/// The `tansu` binary, or `None` after a loud skip message; panics when services are
/// required.
fn binary_or_skip(test: &str) -> Option<PathBuf> {
    if let Some(binary) = binary() {
        return Some(binary);
    }
    let message = format!(
        "tansu (the Kafka-compatible broker) is not installed (${TANSU_VARIABLE} when set, else \
         `tansu` on PATH or in ~/.cargo/bin); test `{test}` needs it. Install it with \
         `cargo install tansu --locked --no-default-features --features dynostore`"
    );
    crate::missing(&message, services_required());
    None
}

impl Tansu {
    /// The broker shared by the tests of this binary, started on first use; `None` (after a
    /// loud message) when tansu is not installed and services are not required.
    pub async fn shared(test: &str) -> Option<&'static Tansu> {
        let binary = binary_or_skip(test)?;
        SHARED
            .get_or_init(|| async {
                let port = crate::free_port();
                let addr = SocketAddr::from(([127, 0, 0, 1], port));
                Some(Self::spawn(binary, addr, addr, None).await)
            })
            .await
            .as_ref()
    }

    /// A broker of the caller's own behind a fresh [`Proxy`] (see the module
    /// documentation); `None` (after a loud message) when tansu is not installed and
    /// services are not required.
    pub async fn behind_proxy(test: &str) -> Option<Tansu> {
        let binary = binary_or_skip(test)?;
        let listen = SocketAddr::from(([127, 0, 0, 1], crate::free_port()));
        let proxy = Proxy::start(&listen.to_string())
            .await
            .unwrap_or_else(|error| panic!("cannot start the proxy: {error}"));
        let advertised = proxy.addr();
        Some(Self::spawn(binary, listen, advertised, Some(proxy)).await)
    }

    async fn spawn(
        binary: PathBuf,
        listen: SocketAddr,
        advertised: SocketAddr,
        proxy: Option<Proxy>,
    ) -> Tansu {
        // A watchdog shell starts tansu, prints its pid and kills it when the test binary
        // (its parent) is gone: statics are never dropped.
        let script = r#"
"$TANSU_BIN" broker --listener-url "tcp://$TANSU_LISTEN" \
    --advertised-listener-url "tcp://$TANSU_ADVERTISED" --storage-engine memory://tansu/ \
    </dev/null >/dev/null 2>&1 &
tansu=$!
echo "$tansu"
exec >/dev/null
while kill -0 "$TANSU_PARENT" 2>/dev/null && kill -0 "$tansu" 2>/dev/null; do sleep 1; done
kill "$tansu" 2>/dev/null
"#;
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(script)
            .env("TANSU_BIN", &binary)
            .env("TANSU_LISTEN", listen.to_string())
            .env("TANSU_ADVERTISED", advertised.to_string())
            .env("TANSU_PARENT", std::process::id().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start {}: {error}", binary.display()));
        let pid = child.stdout.take().and_then(|stdout| {
            use std::io::BufRead as _;
            let mut line = String::new();
            std::io::BufReader::new(stdout).read_line(&mut line).ok()?;
            line.trim().parse().ok()
        });
        let tansu = Tansu {
            binary,
            child,
            pid,
            listen,
            advertised,
            proxy,
        };
        let started = Instant::now();
        loop {
            if TcpStream::connect_timeout(&listen, Duration::from_millis(200)).is_ok() {
                break;
            }
            assert!(
                started.elapsed() < STARTUP,
                "tansu did not accept connections on {listen} within {STARTUP:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tansu
    }

    /// The bootstrap servers clients use (`127.0.0.1:PORT`, the proxy's when behind one).
    pub fn bootstrap(&self) -> String {
        self.advertised.to_string()
    }

    /// The proxy in front of the broker ([`behind_proxy`](Self::behind_proxy) only).
    pub fn proxy(&self) -> Option<&Proxy> {
        self.proxy.as_ref()
    }

    /// Creates `topic` with `partitions` partitions (`tansu topic create`, straight to the
    /// broker, not through the proxy). Panics when it fails.
    pub async fn create_topic(&self, topic: &str, partitions: u32) {
        let binary = self.binary.clone();
        let broker = format!("tcp://{}", self.listen);
        let topic = topic.to_owned();
        let output = tokio::task::spawn_blocking(move || {
            let output = Command::new(&binary)
                .args(["topic", "create", &topic, "--broker", &broker])
                .args(["--partitions", &partitions.to_string()])
                .output();
            (topic, output)
        })
        .await
        .unwrap_or_else(|error| panic!("topic creation panicked: {error}"));
        match output {
            (_, Ok(output)) if output.status.success() => {}
            (topic, Ok(output)) => panic!(
                "tansu topic create {topic} failed ({}): {}{}",
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ),
            (topic, Err(error)) => panic!("cannot run tansu topic create {topic}: {error}"),
        }
    }

    /// Deletes `topic` (best effort).
    pub async fn delete_topic(&self, topic: &str) {
        let binary = self.binary.clone();
        let broker = format!("tcp://{}", self.listen);
        let topic = topic.to_owned();
        let _ = tokio::task::spawn_blocking(move || {
            Command::new(&binary)
                .args(["topic", "delete", &topic, "--broker", &broker])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
        })
        .await;
    }
}

impl Drop for Tansu {
    fn drop(&mut self) {
        if let Some(pid) = self.pid {
            let _ = Command::new("kill")
                .arg(pid.to_string())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
