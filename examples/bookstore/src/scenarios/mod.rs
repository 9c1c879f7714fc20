//! The six scenarios of the outbox article (book: The demo), run for real: each `run` opens its own database (and
//! broker channel), plays the scenario, and returns the facts it measured. A report knows
//! the article's facts and lists every [deviation](Report::deviations) from them, so the
//! demo checks itself.
//!
//! | # | claim | needs |
//! |---|---|---|
//! | 1 | commit, then publish: the order commits, the event is lost (anti-pattern) | any database |
//! | 2 | publish, then commit: a rejected commit leaves a ghost event (anti-pattern) | any database |
//! | 3 | the outbox closes both windows; the relay retries after an outage | any database |
//! | 4 | a relay crash republishes the same id; the inbox applies it once | any database |
//! | 5 | a watermark loses a row committed late; the status on the row does not | PostgreSQL |
//! | 6 | two relays claim disjoint rows with `SKIP LOCKED` | PostgreSQL or MariaDB |
//!
//! With `--relay log` ([`RelayChoice::Log`]) scenarios 3–6 run with the log relay instead
//! (`scenarioN::log`), on PostgreSQL with `wal_level = logical`; elsewhere they are skipped
//! with the log relay's own reason. Scenarios 1 and 2 have no outbox and 7 is the job
//! queue: they do not involve a relay choice.
//!
//! | # | with the log relay |
//! |---|---|
//! | 3 | the relay streams before the checkout; the broker refuses, the relay retries once it is back; the row stays `pending` |
//! | 4 | a crash after the broker confirmed, before the acknowledgement reached the server: the restarted relay publishes the same id again; the inbox applies it once |
//! | 5 | Ada's late commit: the log relay publishes Alan's event, then Ada's — commit order — and loses nothing |
//! | 6 | two log relays on one slot: one streams, one stands by on the lease and takes over within its TTL |

mod log_relay;
pub mod scenario1;
pub mod scenario2;
pub mod scenario3;
pub mod scenario4;
pub mod scenario5;
pub mod scenario6;

use std::time::Duration;

use outbox_core::policy::Backoff;
use outbox_core::publish::Publisher;
use outbox_seaorm::Outbox;
use outbox_seaorm::relay::{Relay, RelayBuilder};
use sea_orm::DatabaseConnection;

use crate::env::{Env, RelayChoice};
use crate::error::DemoError;

/// The numbers of every scenario, in order.
pub const ALL: [u8; 7] = [1, 2, 3, 4, 5, 6, 7];

/// What a scenario measured, and how it compares with the article.
pub trait Report: std::fmt::Debug + Send {
    /// The scenario's number.
    fn number(&self) -> u8;
    /// Its title, as in the article.
    fn title(&self) -> &'static str;
    /// What it proves, in one line.
    fn claim(&self) -> &'static str;
    /// The measured facts, one line each, in the article's words.
    fn lines(&self) -> Vec<String>;
    /// Every way the measured facts differ from the article's (empty: the same facts).
    fn deviations(&self) -> Vec<String>;
}

/// The title of scenario `number` with `relay`.
pub fn title(number: u8, relay: RelayChoice) -> &'static str {
    match (number, relay) {
        (1, _) => scenario1::TITLE,
        (2, _) => scenario2::TITLE,
        (3, _) => scenario3::TITLE,
        (4, RelayChoice::Polling) => scenario4::TITLE,
        (4, RelayChoice::Log) => scenario4::LOG_TITLE,
        (5, _) => scenario5::TITLE,
        (6, RelayChoice::Polling) => scenario6::TITLE,
        (6, RelayChoice::Log) => scenario6::log::TITLE,
        (7, _) => crate::job_queue::TITLE,
        _ => "unknown scenario",
    }
}

/// Runs scenario `number` (3–6 with `env`'s relay).
///
/// # Errors
/// [`DemoError::Skipped`] when the database does not support it, [`DemoError::Config`]
/// for an unknown number, else why it could not run.
pub async fn run(env: &Env, number: u8) -> Result<Box<dyn Report>, DemoError> {
    let log = env.relay == RelayChoice::Log;
    Ok(match number {
        1 => Box::new(scenario1::run(env).await?),
        2 => Box::new(scenario2::run(env).await?),
        3 if log => Box::new(scenario3::log::run(env).await?),
        3 => Box::new(scenario3::run(env).await?),
        4 if log => Box::new(scenario4::log::run(env).await?),
        4 => Box::new(scenario4::run(env).await?),
        5 if log => Box::new(scenario5::log::run(env).await?),
        5 => Box::new(scenario5::run(env).await?),
        6 if log => Box::new(scenario6::log::run(env).await?),
        6 => Box::new(scenario6::run(env).await?),
        7 => Box::new(crate::job_queue::run_in(env).await?),
        other => {
            return Err(DemoError::Config(format!(
                "there is no scenario {other}: choose 1 to 7"
            )));
        }
    })
}

/// How a scenario ended, for the demo's output and exit code.
#[derive(Debug)]
pub enum Outcome {
    /// It ran; its report.
    Ran(Box<dyn Report>),
    /// It was skipped, and why.
    Skipped(String),
    /// It could not run.
    Failed(DemoError),
}

impl Outcome {
    /// Whether the scenario ran and measured the article's facts, or was skipped.
    pub fn is_ok(&self) -> bool {
        match self {
            Self::Ran(report) => report.deviations().is_empty(),
            Self::Skipped(_) => true,
            Self::Failed(_) => false,
        }
    }
}

/// The longest a scenario may take (they take well under a second or two): a database or
/// broker that stops answering fails the scenario instead of hanging the demo.
pub const SCENARIO_TIMEOUT: Duration = Duration::from_secs(120);

/// Runs scenario `number` (within [`SCENARIO_TIMEOUT`]) and keeps how it ended.
pub async fn outcome(env: &Env, number: u8) -> Outcome {
    match tokio::time::timeout(SCENARIO_TIMEOUT, run(env, number)).await {
        Ok(Ok(report)) => Outcome::Ran(report),
        Ok(Err(DemoError::Skipped { reason })) => Outcome::Skipped(reason),
        Ok(Err(error)) => Outcome::Failed(error),
        Err(_) => Outcome::Failed(DemoError::Timeout(format!(
            "scenario {number} did not finish within {SCENARIO_TIMEOUT:?}"
        ))),
    }
}

/// The block the demo prints for scenario `number`, run with `relay`.
pub fn block(number: u8, relay: RelayChoice, outcome: &Outcome) -> Vec<String> {
    let mut lines = vec![format!("{number}) {}", title(number, relay))];
    match outcome {
        Outcome::Ran(report) => {
            lines.push(format!("  claim: {}", report.claim()));
            lines.extend(report.lines().into_iter().map(|line| format!("  {line}")));
            let deviations = report.deviations();
            if deviations.is_empty() {
                lines.push("  check: ok, the article's facts".to_owned());
            } else {
                for deviation in deviations {
                    lines.push(format!("  check: FAILED, {deviation}"));
                }
            }
        }
        Outcome::Skipped(reason) => lines.push(format!("  skipped: {reason}")),
        Outcome::Failed(error) => lines.push(format!("  check: FAILED, could not run: {error}")),
    }
    lines
}

/// A deviation when `actual` differs from `expected`.
pub(crate) fn expect<T: PartialEq + std::fmt::Debug>(
    deviations: &mut Vec<String>,
    what: &str,
    actual: &T,
    expected: &T,
) {
    if actual != expected {
        deviations.push(format!(
            "{what}: expected {expected:?}, measured {actual:?}"
        ));
    }
}

/// A relay with the demo's timings: short leases and publish timeout, a deterministic
/// backoff starting at 1 s (the scenarios advance a manual clock past it).
pub(crate) fn relay<P: Publisher + 'static>(
    db: &DatabaseConnection,
    outbox: &Outbox,
    publisher: P,
    instance: &str,
) -> RelayBuilder<P> {
    Relay::builder(db.clone(), outbox.clone(), publisher)
        .instance_id(instance)
        .poll_interval(Duration::from_millis(50))
        .heartbeat_interval(Duration::from_millis(500))
        .lease_ttl(Duration::from_secs(10))
        .publish_timeout(Duration::from_secs(3))
        .backoff(Backoff::new().with_jitter(false))
        // The demo shows what happened to each row, so it keeps published rows (the
        // default deletes a row once it is published).
        .retention(Some(KEEP_PUBLISHED))
}

/// How long the demo's relays keep published rows (see [`relay`]).
pub(crate) const KEEP_PUBLISHED: Duration = Duration::from_secs(7 * 24 * 3600);

/// The outbox's error as a [`DemoError`].
pub(crate) fn outbox_error(error: impl std::fmt::Display) -> DemoError {
    DemoError::outbox(error)
}

/// The lines of the double click (scenarios 2 and 3): the first click's error if any, then
/// how the second one ended.
pub(crate) fn click_lines(click_1: Option<&str>, click_2: Option<&str>) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(error) = click_1 {
        lines.push(format!("click 1: {error}"));
    }
    lines.push(match click_2 {
        Some(error) => format!("click 2: {error}"),
        None => "click 2: accepted".to_owned(),
    });
    lines
}

/// Opens scenario `number`'s database and broker channel, plays the scenario on them, and
/// closes both, whatever happened.
pub(crate) async fn staged<T>(
    env: &Env,
    number: u8,
    outage: crate::broker::Outage,
    play: impl AsyncFnOnce(
        &sea_orm::DatabaseConnection,
        &crate::broker::Channel,
    ) -> Result<T, DemoError>,
) -> Result<T, DemoError> {
    let db = env.open_database(number).await?;
    let channel = match crate::broker::Channel::open(&env.broker, number, outage).await {
        Ok(channel) => channel,
        Err(error) => {
            db.close().await;
            return Err(error);
        }
    };
    let result = play(db.conn(), &channel).await;
    channel.close().await;
    db.close().await;
    result
}
