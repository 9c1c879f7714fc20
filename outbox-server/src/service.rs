//! [`Service`]: the relays of a [`ServerConfig`] and the HTTP endpoints, from start to a
//! graceful stop.

use axum::Router;
use metrics_exporter_prometheus::PrometheusHandle;
use std::net::SocketAddr;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::config::ServerConfig;
use crate::console::Console;
use crate::fleet::{Fleet, Reconciler};
use crate::http::{self, ops::OpsState};

/// The service could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServiceError {
    /// An address could not be bound (taken, or not this host's).
    #[error("cannot listen on {address}: {source}")]
    Bind {
        /// The address.
        address: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// Serving HTTP failed.
    #[error("HTTP server on {address}: {source}")]
    Serve {
        /// The address.
        address: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

/// The relay service of one configuration.
#[derive(Debug)]
pub struct Service {
    config: ServerConfig,
    metrics: PrometheusHandle,
}

impl Service {
    /// The service of `config`, recording into `metrics` (see [`http::metrics::install`]).
    pub fn new(config: ServerConfig, metrics: PrometheusHandle) -> Self {
        Self { config, metrics }
    }

    /// Binds the addresses, starts every relay (the file's, then the tenants its
    /// `[tenants]` sources list, kept current while it runs: see [`crate::fleet`]) and
    /// serves until `shutdown`; then stops accepting requests, lets each relay finish what
    /// it publishes (the polling relay its batch, the log relay its acknowledgement) and
    /// returns.
    ///
    /// # Errors
    /// [`ServiceError`]: an address cannot be bound (nothing was started), or serving
    /// failed.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), ServiceError> {
        let http = &self.config.http;
        let listener = bind(http.listen).await?;
        let ops_listener = match http.ops_listen {
            Some(address) => Some(bind(address).await?),
            None => None,
        };
        let mut reconciler = Reconciler::new(&self.config, shutdown.clone());
        reconciler.start().await;
        let fleet: Fleet = reconciler.fleet();
        let ops = http::ops::router(OpsState {
            fleet: fleet.clone(),
            metrics: self.metrics.clone(),
        });
        // The main address serves the console (when enabled) and, without an operations
        // address of their own, the operations routes.
        let console = if self.config.console.enabled {
            Console::new(fleet.clone(), self.config.console.clone()).router()
        } else {
            Router::new()
        };
        let (main, ops) = match ops_listener {
            Some(ops_listener) => (console, Some((ops_listener, ops))),
            None => (console.merge(ops), None),
        };
        let mut tasks = tokio::task::JoinSet::new();
        tasks.spawn(reconciler.run());
        tasks.spawn(http::metrics::upkeep(
            self.metrics.clone(),
            shutdown.clone(),
        ));
        tracing::info!(
            listen = %http.listen,
            ops_listen = ?http.ops_listen,
            relays = fleet.relays().len(),
            tenant_problems = fleet.problems().len(),
            "outbox relay service started"
        );
        let mut servers = tokio::task::JoinSet::new();
        servers.spawn(serve(listener, main, shutdown.clone()));
        if let Some((listener, router)) = ops {
            servers.spawn(serve(listener, router, shutdown.clone()));
        }
        let mut result = Ok(());
        while let Some(served) = servers.join_next().await {
            match served {
                Ok(Ok(())) => {}
                Ok(Err(error)) => {
                    // One endpoint failing stops the whole service: it would be blind.
                    shutdown.cancel();
                    result = Err(error);
                }
                Err(join) => tracing::error!(%join, "an HTTP server task ended abnormally"),
            }
        }
        while let Some(joined) = tasks.join_next().await {
            if let Err(join) = joined {
                tracing::error!(%join, "a relay task ended abnormally");
            }
        }
        tracing::info!("outbox relay service stopped");
        result
    }
}

async fn bind(address: SocketAddr) -> Result<TcpListener, ServiceError> {
    TcpListener::bind(address)
        .await
        .map_err(|source| ServiceError::Bind { address, source })
}

async fn serve(
    listener: TcpListener,
    router: Router,
    shutdown: CancellationToken,
) -> Result<(), ServiceError> {
    let address = listener
        .local_addr()
        .map_err(|source| ServiceError::Serve {
            address: SocketAddr::from(([0, 0, 0, 0], 0)),
            source,
        })?;
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await
        .map_err(|source| ServiceError::Serve { address, source })
}
