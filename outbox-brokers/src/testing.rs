//! Outage tools for tests and demos (feature `testing`): a loopback TCP [`Proxy`] that can
//! be cut and restored, to make a broker (or a database) unavailable to one client without
//! touching the shared service.
//!
//! Used by the workspace's broker tests and by the Bookstore demo (a broker outage in
//! scenarios 1 and 3, see README, The demo).
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! let proxy = outbox_brokers::testing::Proxy::start("127.0.0.1:4222").await?;
//! let url = format!("nats://{}", proxy.addr()); // give this to the client under test
//! proxy.cut(); // drops every open connection and refuses new ones
//! proxy.restore(); // accepts connections again
//! # Ok(()) }
//! ```

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tokio::io::copy_bidirectional;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

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
        let task = {
            let up = Arc::clone(&up);
            let generation = generation.clone();
            let connections = Arc::clone(&connections);
            let open = Arc::clone(&open);
            tokio::spawn(async move {
                loop {
                    let Ok((mut client, _)) = listener.accept().await else {
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
                    tokio::spawn(async move {
                        if let Ok(mut server) = TcpStream::connect(&upstream).await {
                            tokio::select! {
                                _ = copy_bidirectional(&mut client, &mut server) => {}
                                _ = cut.wait_for(|now| *now != born) => {}
                            }
                        }
                        // Both sockets are closed here.
                        drop(client);
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
            task,
        })
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Drops every open connection and refuses new ones until [`restore`](Self::restore).
    pub fn cut(&self) {
        self.up.store(false, Ordering::SeqCst);
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

    /// Whether the proxy accepts connections.
    pub fn is_up(&self) -> bool {
        self.up.load(Ordering::SeqCst)
    }

    /// Connections accepted so far (reconnects show up here).
    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::SeqCst)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
        self.cut();
    }
}
