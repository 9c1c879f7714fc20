//! `[http]`: where the service listens.

use std::net::SocketAddr;

use super::env::Overrides;
use super::file::FileHttp;
use super::problem::Problems;
use super::value::socket_addr;

/// The default address of the console and the operations endpoints.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";

/// Where the service listens.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HttpSettings {
    /// The console, and `/metrics`, `/healthz`, `/readyz` unless `ops_listen` is set
    /// (default `127.0.0.1:8080`).
    pub listen: SocketAddr,
    /// `/metrics`, `/healthz` and `/readyz` on an address of their own, e.g. one that only
    /// the monitoring network reaches; the console's address then serves the console only.
    pub ops_listen: Option<SocketAddr>,
}

/// Checks `[http]`.
pub(crate) fn check(
    file: &FileHttp,
    overrides: &Overrides,
    problems: &mut Problems,
) -> Option<HttpSettings> {
    let listen = match &file.listen {
        Some(text) => socket_addr(problems, &overrides.at("http.listen"), text),
        None => DEFAULT_LISTEN.parse().ok(),
    };
    let ops_listen = match &file.ops_listen {
        Some(text) => Some(socket_addr(
            problems,
            &overrides.at("http.ops_listen"),
            text,
        )?),
        None => None,
    };
    let listen = listen?;
    if ops_listen == Some(listen) {
        problems.add(
            "http.ops_listen",
            "is the same address as http.listen: leave it out to serve both there",
        );
        return None;
    }
    Some(HttpSettings { listen, ops_listen })
}
