//! Shared support for the cross-crate integration tests.
//!
//! Service-backed tests call [`service`] first. When the service is unreachable the test
//! **fails**, with one line saying what is missing and the command that provides it
//! (`bash scripts/test` starts every service and installs tansu): a test that did not run
//! never counts as passed. To skip such tests on purpose (a machine without some service),
//! set `OUTBOX_ALLOW_MISSING_SERVICES=1`; they then return early with a loud message on
//! stderr. `OUTBOX_REQUIRE_SERVICES=1` (CI) makes them fail whatever else is set.

pub mod binlog_mariadb;
pub mod bookstore;
pub mod db;
pub mod log_capture;
pub mod log_relay_cases;
pub mod logical_pg;
pub mod metrics;
pub mod ops_cli;
pub mod pgbouncer;
pub mod proxy;
pub mod readme;
pub mod tansu;

use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Environment variable that makes an unreachable service a test failure even when
/// [`ALLOW_MISSING_SERVICES`] is set (CI sets it).
pub const REQUIRE_SERVICES: &str = "OUTBOX_REQUIRE_SERVICES";

/// Environment variable that lets the tests of an unreachable service skip instead of fail.
pub const ALLOW_MISSING_SERVICES: &str = "OUTBOX_ALLOW_MISSING_SERVICES";

/// What to run when a service is missing.
pub const PROVISION_COMMAND: &str = "bash scripts/test";

/// A service a test may need, with its default loopback address and URL variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Service {
    /// PostgreSQL on 127.0.0.1:5432 (`OUTBOX_TEST_POSTGRES_URL`).
    Postgres,
    /// MariaDB on 127.0.0.1:3306 (`OUTBOX_TEST_MYSQL_URL`).
    MariaDb,
    /// Redis on 127.0.0.1:6379 (`OUTBOX_TEST_REDIS_URL`).
    Redis,
    /// RabbitMQ on 127.0.0.1:5672 (`OUTBOX_TEST_AMQP_URL`).
    RabbitMq,
    /// NATS with JetStream on 127.0.0.1:4222 (`OUTBOX_TEST_NATS_URL`).
    Nats,
}

impl Service {
    /// Human name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Postgres => "PostgreSQL",
            Self::MariaDb => "MariaDB",
            Self::Redis => "Redis",
            Self::RabbitMq => "RabbitMQ",
            Self::Nats => "NATS",
        }
    }

    /// Environment variable overriding the URL.
    pub fn url_variable(self) -> &'static str {
        match self {
            Self::Postgres => "OUTBOX_TEST_POSTGRES_URL",
            Self::MariaDb => "OUTBOX_TEST_MYSQL_URL",
            Self::Redis => "OUTBOX_TEST_REDIS_URL",
            Self::RabbitMq => "OUTBOX_TEST_AMQP_URL",
            Self::Nats => "OUTBOX_TEST_NATS_URL",
        }
    }

    /// Default URL on this machine.
    pub fn default_url(self) -> &'static str {
        match self {
            Self::Postgres => "postgres://postgres@127.0.0.1:5432/postgres",
            Self::MariaDb => "mysql://root@127.0.0.1:3306/test",
            Self::Redis => "redis://127.0.0.1:6379",
            Self::RabbitMq => "amqp://guest:guest@127.0.0.1:5672/%2f",
            Self::Nats => "nats://127.0.0.1:4222",
        }
    }

    fn default_port(self) -> u16 {
        match self {
            Self::Postgres => 5432,
            Self::MariaDb => 3306,
            Self::Redis => 6379,
            Self::RabbitMq => 5672,
            Self::Nats => 4222,
        }
    }

    /// The URL tests use: the override variable, else the default.
    pub fn url(self) -> String {
        std::env::var(self.url_variable()).unwrap_or_else(|_| self.default_url().to_owned())
    }
}

/// A loopback port free right now, for a server a test starts (PostgreSQL with logical
/// decoding, MariaDB with its binlog, tansu).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .unwrap_or_else(|error| panic!("no free loopback port: {error}"))
}

/// Whether the tests run as root (PostgreSQL and PgBouncer refuse to: the tests run them as
/// the `postgres` OS user then).
pub(crate) fn running_as_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|output| String::from_utf8_lossy(&output.stdout).trim() == "0")
}

/// Gives `dir` and what it holds to the `postgres` OS user when the tests run as root (the
/// servers they start run as that user then).
pub(crate) fn give_to_server_user(dir: &std::path::Path) {
    if !running_as_root() {
        return;
    }
    let status = std::process::Command::new("chown")
        .args(["-R", "postgres:postgres"])
        .arg(dir)
        .status();
    assert!(
        status.is_ok_and(|status| status.success()),
        "cannot give {} to the postgres user",
        dir.display()
    );
}

fn flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"))
}

/// Whether unreachable services fail tests: always, unless
/// `OUTBOX_ALLOW_MISSING_SERVICES=1` (and not `OUTBOX_REQUIRE_SERVICES=1`).
pub fn services_required() -> bool {
    required(flag(REQUIRE_SERVICES), flag(ALLOW_MISSING_SERVICES))
}

fn required(require: bool, allow_missing: bool) -> bool {
    require || !allow_missing
}

/// Fails (when services are required) or skips loudly: a test that needs what `message`
/// says is missing.
pub(crate) fn missing(message: &str, required: bool) {
    if required {
        panic!(
            "{message}: start it, or run `{PROVISION_COMMAND}` (starts every service, installs \
             tansu, runs the suite); {ALLOW_MISSING_SERVICES}=1 skips such tests instead"
        );
    }
    eprintln!("\n!!!!!!!! SKIPPED ({ALLOW_MISSING_SERVICES}=1): {message}. !!!!!!!!\n");
}

/// The first of `candidates` that exists (an installed program a test needs, e.g.
/// Chromium). Otherwise skips (returns `None` after a loud message) or, when services are
/// required, panics naming `install` (what provides it).
pub fn program(
    name: &str,
    candidates: &[&str],
    install: &str,
    test: &str,
) -> Option<std::path::PathBuf> {
    let found = candidates
        .iter()
        .map(std::path::PathBuf::from)
        .find(|path| path.is_file());
    if found.is_none() {
        missing(
            &format!(
                "{name} is not installed (looked for {}); test `{test}` needs it; {install}",
                candidates.join(", ")
            ),
            services_required(),
        );
    }
    found
}

/// Returns the service's URL when its port answers. Otherwise skips (returns `None` after a
/// loud message) or, when services are required, panics.
///
/// Reachability is a TCP connect to the default port on 127.0.0.1 (or the host and port of
/// the override URL when it has them).
pub fn service(service: Service, test: &str) -> Option<String> {
    probe(service, service.url(), services_required(), test)
}

fn probe(service: Service, url: String, required: bool, test: &str) -> Option<String> {
    let addr = socket_addr(&url)
        .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], service.default_port())));
    match TcpStream::connect_timeout(&addr, Duration::from_secs(2)) {
        Ok(_) => Some(url),
        Err(error) => {
            let message = format!(
                "{} is unreachable at {addr} ({error}); test `{test}` needs it",
                service.name()
            );
            missing(&message, required);
            None
        }
    }
}

fn socket_addr(url: &str) -> Option<SocketAddr> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?']).next()?;
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, hp)| hp);
    let (host, port) = host_port.rsplit_once(':')?;
    let host = if host == "localhost" {
        "127.0.0.1"
    } else {
        host
    };
    format!("{host}:{port}").parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_host_and_port_from_urls() {
        assert_eq!(
            socket_addr("postgres://postgres@127.0.0.1:5432/postgres"),
            Some(SocketAddr::from(([127, 0, 0, 1], 5432)))
        );
        assert_eq!(
            socket_addr("mysql://root:pw@localhost:3307/test?x=1"),
            Some(SocketAddr::from(([127, 0, 0, 1], 3307)))
        );
        assert_eq!(socket_addr("nats://127.0.0.1"), None);
    }

    #[test]
    fn unreachable_service_skips_when_not_required() {
        // Nothing listens on loopback port 9 here.
        let url = "redis://127.0.0.1:9".to_owned();
        assert_eq!(probe(Service::Redis, url, false, "probe"), None);
    }

    #[test]
    fn services_are_required_unless_missing_ones_are_allowed() {
        assert!(
            required(false, false),
            "the default: a missing service fails"
        );
        assert!(
            !required(false, true),
            "OUTBOX_ALLOW_MISSING_SERVICES=1 skips"
        );
        assert!(required(true, true), "OUTBOX_REQUIRE_SERVICES=1 wins");
    }

    #[test]
    #[should_panic(expected = "Redis is unreachable at 127.0.0.1:9")]
    fn unreachable_service_fails_when_required() {
        let url = "redis://127.0.0.1:9".to_owned();
        probe(Service::Redis, url, true, "probe");
    }
}

/// The Rust snippets of the workspace README.md, compiled and run as doc tests (this package
/// depends on every crate the README shows).
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;

/// The Rust blocks of each chapter of the book (`docs/book/src`), compiled and run as doc
/// tests like the README's.
#[cfg(doctest)]
pub mod book {
    macro_rules! chapters {
        ($($name:ident = $file:literal,)*) => {$(
            #[doc = include_str!(concat!("../../docs/book/src/", $file))]
            pub struct $name;
        )*};
    }
    chapters! {
        Introduction = "introduction.md",
        Guarantees = "guarantees.md",
        Demo = "demo.md",
        Contracts = "contracts.md",
        WritingEvents = "writing-events.md",
        ScheduledEvents = "scheduled-events.md",
        PollingRelay = "polling-relay.md",
        LogRelay = "log-relay.md",
        LogRelayMariaDb = "log-relay-mariadb.md",
        Inbox = "inbox.md",
        Brokers = "brokers.md",
        ScalingConsumers = "scaling-consumers.md",
        TestKit = "test-kit.md",
        JobQueue = "job-queue.md",
        Configuration = "configuration.md",
        Operations = "operations.md",
        RelayService = "relay-service.md",
        ManyTenants = "many-tenants.md",
        Reliability = "reliability.md",
        Performance = "performance.md",
        Comparison = "comparison.md",
        Limits = "limits.md",
        Upgrading = "upgrading.md",
    }
}
