//! [`RelayTask`]: one configured relay, supervised on its own — its database, its broker,
//! its failures and retries — so that one tenant's outage never stalls another's relay.
//!
//! The task connects to the database and the broker, builds the polling or log relay and
//! runs it until shutdown. Whatever fails (the database is down at start, the broker
//! refuses the setup, the log relay stops on an error retrying cannot help) is shown in
//! `/readyz` and retried after the backoff of [`outbox_seaorm::outage`] (1 s doubling, at
//! most 4 s apart; a run that lasted a minute starts over), and logged by that module's
//! rule: the first failure at WARN, then every 30 s, then the recovery at INFO. The relays
//! retry database and broker errors themselves while they run; what their own loops see
//! failing (a missing table, a revoked permission) makes the relay not ready too.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use outbox_core::metric;
use outbox_seaorm::budget::{BudgetSeat, ConnectionBudget};
use outbox_seaorm::ops::Operations;
use outbox_seaorm::outage::{DatabaseFailure, DatabaseOutage};
use outbox_seaorm::relay::Relay;
use outbox_seaorm::relay::log::{LogRelay, LogRelayConfig};
use sea_orm::{ConnectOptions, Database, DatabaseConnection};
use tokio_util::sync::CancellationToken;

use crate::broker::{self, BrokerProbe, BrokerPublisher};
use crate::config::{DEFAULT_BUDGETED_RELAY_CONNECTIONS, RelayMethod, RelaySettings, redacted_url};

/// How long connecting to a database may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A run that lasted this long counts as a recovery.
const HEALTHY_RUN: Duration = Duration::from_secs(60);

/// The steps of a relay task, as [`DatabaseOutage`] names them.
const DATABASE: &str = "database connection";
const BROKER: &str = "broker connection";
const RELAY: &str = "relay";

/// Where a relay task is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// Connecting to its database and broker.
    Starting,
    /// The relay runs (it may be a standby of a log relay, or wait for leases).
    Running,
    /// The last attempt failed; the next one is due after the backoff.
    Retrying {
        /// Why it failed.
        error: String,
        /// Failed attempts in a row.
        failures: u32,
    },
    /// Shut down.
    Stopped,
}

impl Phase {
    /// `starting`, `running`, `retrying` or `stopped`.
    pub const fn as_str(&self) -> &'static str {
        match self {
            Self::Starting => "starting",
            Self::Running => "running",
            Self::Retrying { .. } => "retrying",
            Self::Stopped => "stopped",
        }
    }
}

/// What the rest of the service knows of a relay task.
#[derive(Debug)]
pub struct RelayTask {
    settings: RelaySettings,
    state: Mutex<State>,
    /// The task's own failures (connecting, building, the relay stopping).
    outage: DatabaseOutage,
    /// Its seat in its server's connection budget, if the service has one.
    seat: Option<BudgetSeat>,
    /// Its idle connections close after this long (with a budget).
    idle_timeout: Option<Duration>,
}

#[derive(Debug)]
struct State {
    phase: Phase,
    since: Instant,
    db: Option<DatabaseConnection>,
    probe: Option<BrokerProbe>,
    /// The running relay's own database health.
    relay: Option<DatabaseOutage>,
}

impl RelayTask {
    /// A task for `settings`, not started.
    pub fn new(settings: RelaySettings) -> Arc<Self> {
        Self::with_budget(settings, None)
    }

    /// A task for `settings` whose connections count in `budget` (its database server's;
    /// see `outbox_seaorm::budget`), not started. A polling relay holds its connections
    /// only in its turns and polls instead of `LISTEN`; a log relay holds its seat — its
    /// pool and its replication connection — for as long as it runs. SQLite takes no seat.
    pub fn with_budget(
        settings: RelaySettings,
        budget: Option<(&ConnectionBudget, Duration)>,
    ) -> Arc<Self> {
        let labels = vec![metrics::Label::new("relay", settings.name.clone())];
        let outage = DatabaseOutage::new("relay service", settings.name.clone(), labels);
        let sqlite = settings.database_url.expose().starts_with("sqlite:");
        let (seat, idle_timeout) = match budget {
            Some((budget, idle_timeout)) if !sqlite => {
                let pool = budgeted_pool_size(&settings);
                let replication = u32::from(matches!(settings.method, RelayMethod::Log(_)));
                (Some(budget.seat(pool + replication)), Some(idle_timeout))
            }
            _ => (None, None),
        };
        Arc::new(Self {
            seat,
            idle_timeout,
            settings,
            state: Mutex::new(State {
                phase: Phase::Starting,
                since: Instant::now(),
                db: None,
                probe: None,
                relay: None,
            }),
            outage,
        })
    }

    /// Its settings.
    pub fn settings(&self) -> &RelaySettings {
        &self.settings
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.settings.name
    }

    /// Where it is, and since when.
    pub fn phase(&self) -> (Phase, Duration) {
        let state = self.lock();
        (state.phase.clone(), state.since.elapsed())
    }

    /// Its database connection, once connected. With a connection budget, use
    /// [`operations`](Self::operations) instead: it waits for the relay's seat.
    pub fn database(&self) -> Option<DatabaseConnection> {
        self.lock().db.clone()
    }

    /// Whether its connections count in a budget.
    pub fn has_budget_seat(&self) -> bool {
        self.seat.is_some()
    }

    /// The operations on its outbox, once connected (through its budget seat, if any).
    pub fn operations(&self) -> Option<Operations> {
        let db = self.database()?;
        let ops = Operations::new(db, self.settings.outbox.clone());
        Some(match &self.seat {
            Some(seat) => ops.with_budget_seat(seat.clone()),
            None => ops,
        })
    }

    /// What the running relay's own loop sees failing in its database now (a missing
    /// table, a revoked permission, a lost connection), if anything.
    pub fn database_failure(&self) -> Option<DatabaseFailure> {
        self.lock().relay.as_ref().and_then(DatabaseOutage::failing)
    }

    /// Its broker probe, once connected.
    pub fn broker_probe(&self) -> Option<BrokerProbe> {
        self.lock().probe.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn set_phase(&self, phase: Phase) {
        let mut state = self.lock();
        state.phase = phase;
        state.since = Instant::now();
    }

    /// Runs the relay until `shutdown`, retrying what fails.
    pub async fn run(self: Arc<Self>, shutdown: CancellationToken) {
        let name = self.settings.name.clone();
        let mut failures = 0_u32;
        while !shutdown.is_cancelled() {
            self.set_phase(Phase::Starting);
            let started = Instant::now();
            let outcome = self.attempt(&shutdown).await;
            self.lock().relay = None;
            if shutdown.is_cancelled() {
                break;
            }
            if started.elapsed() >= HEALTHY_RUN {
                failures = 0;
                for step in [DATABASE, BROKER, RELAY] {
                    self.outage.succeeded(step);
                }
            }
            failures = failures.saturating_add(1);
            let (step, error) = match outcome {
                Ok(()) => (RELAY, "the relay stopped without being asked to".to_owned()),
                Err(failure) => failure,
            };
            let delay = self.outage.failed_with(step, &error, None);
            self.set_phase(Phase::Retrying { error, failures });
            tokio::select! {
                () = shutdown.cancelled() => break,
                () = tokio::time::sleep(delay) => {}
            }
        }
        self.close_pool().await;
        self.set_phase(Phase::Stopped);
        tracing::info!(relay = %name, "relay stopped");
    }

    /// Closes the pool of the last attempt, if any: a stopped relay, or one about to
    /// connect again, keeps no connection open.
    async fn close_pool(&self) {
        let db = self.lock().db.take();
        if let Some(db) = db {
            let _ = db.close_by_ref().await;
        }
    }

    /// One attempt: connect, build, run until shutdown or a failure.
    async fn attempt(&self, shutdown: &CancellationToken) -> Result<(), (&'static str, String)> {
        self.close_pool().await;
        let settings = &self.settings;
        let url = settings.database_url.expose();
        let mut options = ConnectOptions::new(url.to_owned());
        options
            .connect_timeout(CONNECT_TIMEOUT)
            .acquire_timeout(CONNECT_TIMEOUT)
            .sqlx_logging(false);
        if let Some(connections) = settings.max_connections {
            options.max_connections(connections);
        }
        if let Some(idle_timeout) = self.idle_timeout {
            // The seat closes idle connections; the pool's own reaper is a second net.
            options
                .max_connections(budgeted_pool_size(settings))
                .min_connections(0)
                .idle_timeout(idle_timeout * 2);
        }
        if settings.outbox.transaction_pooling() {
            // A server connection lasts one transaction: no statement outlives it.
            options.map_sqlx_postgres_opts(|options| options.statement_cache_capacity(0));
        }
        // Connecting opens a connection: with a budget, in a turn of the relay's seat.
        let turn = match &self.seat {
            Some(seat) => tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                turn = seat.enter() => Some(turn),
            },
            None => None,
        };
        let db = tokio::select! {
            () = shutdown.cancelled() => return Ok(()),
            db = Database::connect(options) => db.map_err(|error| {
                (DATABASE, format!("database {}: {error}", redacted_url(url)))
            })?,
        };
        if let Some(seat) = &self.seat {
            seat.attach(&db);
        }
        drop(turn);
        self.outage.succeeded(DATABASE);
        self.lock().db = Some(db.clone());
        let connection_name = format!("outbox-relay-{}", settings.name);
        let (publisher, probe) = tokio::select! {
            () = shutdown.cancelled() => return Ok(()),
            connected = broker::connect(&settings.broker, &connection_name) => {
                connected.map_err(|error| (BROKER, error.to_string()))?
            }
        };
        self.outage.succeeded(BROKER);
        self.lock().probe = Some(probe);
        tracing::info!(
            relay = %settings.name,
            method = settings.method.as_str(),
            outbox = %settings.outbox.outbox_table(),
            broker = settings.broker.kind.as_str(),
            database = %redacted_url(url),
            "relay starting"
        );
        self.set_phase(Phase::Running);
        match &settings.method {
            RelayMethod::Polling => {
                let mut builder = Relay::builder(db, settings.outbox.clone(), publisher)
                    .config(settings.relay.clone());
                if let Some(seat) = &self.seat {
                    builder = builder.budget_seat(seat.clone());
                }
                let relay = builder
                    .build()
                    .map_err(|error| (RELAY, error.to_string()))?;
                self.lock().relay = Some(relay.database_outage());
                relay
                    .run(shutdown.clone())
                    .await
                    .map(drop)
                    .map_err(|error| (RELAY, error.to_string()))
            }
            RelayMethod::Log(log) => self.run_log(db, publisher, log, shutdown).await,
        }
    }

    async fn run_log(
        &self,
        db: DatabaseConnection,
        publisher: BrokerPublisher,
        config: &LogRelayConfig,
        shutdown: &CancellationToken,
    ) -> Result<(), (&'static str, String)> {
        let settings = &self.settings;
        // A log relay holds its seat for as long as it runs.
        let _seat = match &self.seat {
            Some(seat) => {
                seat.attach(&db);
                Some(seat.enter().await)
            }
            None => None,
        };
        let relay = LogRelay::builder(db, settings.outbox.clone(), publisher)
            .config(config.clone())
            .connection_url(settings.database_url.expose())
            .build()
            .map_err(|error| (RELAY, error.to_string()))?;
        self.lock().relay = Some(relay.database_outage());
        relay
            .run(shutdown.clone())
            .await
            .map(drop)
            .map_err(|error| (RELAY, error.to_string()))
    }
}

/// The pool of a relay whose connections count in a budget: its `max_connections`, or
/// [`DEFAULT_BUDGETED_RELAY_CONNECTIONS`].
fn budgeted_pool_size(settings: &RelaySettings) -> u32 {
    settings
        .max_connections
        .unwrap_or(DEFAULT_BUDGETED_RELAY_CONNECTIONS)
}

/// Creates the counters of `relay` at zero, so that `/metrics` has its series (and
/// `increase()` alerts see their start) before the first event.
pub fn register_metrics(relay: &RelaySettings) {
    let labels = relay.outbox.metric_labels().to_vec();
    metrics::counter!(metric::PUBLISHED, labels.clone()).increment(0);
    for class in ["transient", "permanent"] {
        let mut labels = labels.clone();
        labels.push(metrics::Label::new("class", class));
        metrics::counter!(metric::PUBLISH_FAILURES, labels).increment(0);
    }
    if matches!(relay.method, RelayMethod::Polling) {
        metrics::counter!(metric::LISTENER_RECONNECTS, labels.clone()).increment(0);
    }
}
