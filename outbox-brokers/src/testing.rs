//! Outage tools for tests and demos (feature `testing`): a loopback TCP [`Proxy`] that can
//! be cut and restored, to make a broker (or a database) unavailable to one client without
//! touching the shared service.
//!
//! Used by the workspace's broker tests and by the Bookstore demo (a broker outage in
//! scenarios 1 and 3) (book: The demo).
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! let proxy = outbox_brokers::testing::Proxy::start("127.0.0.1:4222").await?;
//! let url = format!("nats://{}", proxy.addr()); // give this to the client under test
//! proxy.cut(); // drops every open connection and refuses new ones
//! proxy.restore(); // accepts connections again
//! proxy.hold(); // keeps what clients send instead of forwarding it
//! let sent_meanwhile: Vec<u8> = proxy.held();
//! proxy.cut(); // what was held is lost with the connections
//! # Ok(()) }
//! ```

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What clients sent while the proxy held it (see [`Proxy::hold`]).
#[derive(Debug, Default)]
struct Held {
    holding: AtomicBool,
    bytes: Mutex<Vec<u8>>,
}

/// A running proxy; stops when dropped.
#[derive(Debug)]
pub struct Proxy {
    addr: SocketAddr,
    up: Arc<AtomicBool>,
    /// Bumped by every cut: connections of an older generation close.
    generation: watch::Sender<u64>,
    connections: Arc<AtomicU64>,
    /// Connections being forwarded right now.
    open: Arc<AtomicU64>,
    held: Arc<Held>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Listens on a free loopback port and forwards to `upstream`.
    ///
    /// # Errors
    /// When the listener cannot bind.
    pub async fn start(upstream: &str) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let upstream = upstream.to_owned();
        let up = Arc::new(AtomicBool::new(true));
        let (generation, _) = watch::channel(0u64);
        let connections = Arc::new(AtomicU64::new(0));
        let open = Arc::new(AtomicU64::new(0));
        let held = Arc::new(Held::default());
        let task = {
            let held = Arc::clone(&held);
            let up = Arc::clone(&up);
            let generation = generation.clone();
            let connections = Arc::clone(&connections);
            let open = Arc::clone(&open);
            tokio::spawn(async move {
                loop {
                    let Ok((client, _)) = listener.accept().await else {
                        continue;
                    };
                    if !up.load(Ordering::SeqCst) {
                        drop(client);
                        continue;
                    }
                    connections.fetch_add(1, Ordering::SeqCst);
                    let upstream = upstream.clone();
                    let mut cut = generation.subscribe();
                    let born = *cut.borrow();
                    let open = Arc::clone(&open);
                    open.fetch_add(1, Ordering::SeqCst);
                    let held = Arc::clone(&held);
                    tokio::spawn(async move {
                        if let Ok(server) = TcpStream::connect(&upstream).await {
                            let (from_client, mut to_client) = client.into_split();
                            let (mut from_server, to_server) = server.into_split();
                            tokio::select! {
                                _ = forward(from_client, to_server, &held) => {}
                                _ = tokio::io::copy(&mut from_server, &mut to_client) => {}
                                _ = cut.wait_for(|now| *now != born) => {}
                            }
                        } else {
                            drop(client);
                        }
                        // Both sockets are closed here.
                        open.fetch_sub(1, Ordering::SeqCst);
                    });
                }
            })
        };
        Ok(Self {
            addr,
            up,
            generation,
            connections,
            open,
            held,
            task,
        })
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Drops every open connection and refuses new ones until [`restore`](Self::restore).
    /// It ends a [hold](Self::hold): what was held never reaches the upstream.
    pub fn cut(&self) {
        self.up.store(false, Ordering::SeqCst);
        self.held.holding.store(false, Ordering::SeqCst);
        self.generation.send_modify(|generation| *generation += 1);
    }

    /// [`cut`](Self::cut), then waits (up to 5 s) until every connection it dropped is
    /// closed: after this, nothing more passes through the proxy.
    pub async fn cut_and_wait(&self) {
        self.cut();
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
        while self.open.load(Ordering::SeqCst) > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }

    /// Accepts connections again.
    pub fn restore(&self) {
        self.up.store(true, Ordering::SeqCst);
    }

    /// From now on, keeps what clients send instead of forwarding it (answers from the
    /// upstream still reach the clients): the connection stays open and silent, like a
    /// network that stalls. [`held`](Self::held) shows what was kept; a [`cut`](Self::cut)
    /// ends the hold and loses it.
    pub fn hold(&self) {
        self.held
            .bytes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        self.held.holding.store(true, Ordering::SeqCst);
    }

    /// What clients sent since the last [`hold`](Self::hold), in the order it arrived (all
    /// connections together), also after the hold ended.
    pub fn held(&self) -> Vec<u8> {
        self.held
            .bytes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Whether the proxy accepts connections.
    pub fn is_up(&self) -> bool {
        self.up.load(Ordering::SeqCst)
    }

    /// Connections accepted so far (reconnects show up here).
    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::SeqCst)
    }
}

/// Copies what `client` sends to `server` until either closes, keeping it in `held`
/// instead while the proxy holds.
async fn forward(mut client: OwnedReadHalf, mut server: OwnedWriteHalf, held: &Held) {
    let mut buffer = vec![0u8; 16 * 1024];
    loop {
        let read = match client.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(read) => read,
        };
        let chunk = &buffer[..read];
        if held.holding.load(Ordering::SeqCst) {
            held.bytes
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .extend_from_slice(chunk);
        } else if server.write_all(chunk).await.is_err() {
            return;
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
        self.cut();
    }
}
