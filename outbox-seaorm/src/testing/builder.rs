//! [`TestKitBuilder`]: the relay and the consumers a [`TestKit`] runs.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use outbox_core::in_process::InProcessBroker;
use sea_orm::DatabaseConnection;

use super::kit::{ConfigureConsumer, ConfigureRelay, KitConsumer};
use super::{TestKit, TestKitError};
use crate::config::Outbox;
use crate::inbox::ConsumerBuilder;
use crate::relay::RelayBuilder;

/// Default limit of rounds of one [`TestKit::drain_until_idle`].
pub const DEFAULT_MAX_ROUNDS: usize = 100;
/// Default time one step of a drain may take (a relay drain, a delivery, a redelivery
/// round) before [`TestKitError::Timeout`].
pub const DEFAULT_STEP_TIMEOUT: Duration = Duration::from_secs(30);

/// One consumer to run: its name, where it lives (the kit's database when `None`), its
/// settings.
struct ConsumerSpec {
    name: String,
    home: Option<(DatabaseConnection, Outbox)>,
    configure: ConfigureConsumer,
}

/// Configures a [`TestKit`]; built by [`TestKit::builder`].
#[must_use]
pub struct TestKitBuilder {
    db: DatabaseConnection,
    outbox: Outbox,
    broker: InProcessBroker,
    relay: ConfigureRelay,
    consumers: Vec<ConsumerSpec>,
    max_rounds: usize,
    step_timeout: Duration,
}

impl std::fmt::Debug for TestKitBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let consumers: Vec<&str> = self.consumers.iter().map(|c| c.name.as_str()).collect();
        f.debug_struct("TestKitBuilder")
            .field("outbox", &self.outbox.outbox_table().to_string())
            .field("consumers", &consumers)
            .field("max_rounds", &self.max_rounds)
            .field("step_timeout", &self.step_timeout)
            .finish_non_exhaustive()
    }
}

impl TestKit {
    /// A kit for `outbox` on `db` (the tables must exist: [`crate::schema::install`]).
    /// Give it a clock you drive ([`ManualClock`](super::ManualClock), through
    /// [`OutboxBuilder::clock`](crate::OutboxBuilder::clock)) to make retries due when the
    /// test says so.
    pub fn builder(db: DatabaseConnection, outbox: Outbox) -> TestKitBuilder {
        TestKitBuilder::new(db, outbox)
    }
}

impl TestKitBuilder {
    fn new(db: DatabaseConnection, outbox: Outbox) -> Self {
        Self {
            db,
            outbox,
            broker: InProcessBroker::new(),
            relay: Arc::new(|relay| relay),
            consumers: Vec::new(),
            max_rounds: DEFAULT_MAX_ROUNDS,
            step_timeout: DEFAULT_STEP_TIMEOUT,
        }
    }

    /// Runs the consumer `name` (every `#[inbox_handler]` registered under that name) on
    /// the kit's database, with the [`Consumer`](crate::inbox::Consumer)'s defaults. Each
    /// consumer receives every message the broker accepted, in order; an event type it has
    /// no handler for is ignored (or dead-lettered, as configured).
    pub fn consumer(self, name: impl Into<String>) -> Self {
        self.consumer_with(name, |consumer| consumer)
    }

    /// [`consumer`](Self::consumer) with settings: `configure` receives the consumer's
    /// builder (e.g. `|c| c.max_attempts(3)`). It runs again whenever the consumer is
    /// restarted after a crash.
    pub fn consumer_with(
        mut self,
        name: impl Into<String>,
        configure: impl Fn(ConsumerBuilder) -> ConsumerBuilder + Send + Sync + 'static,
    ) -> Self {
        self.consumers.push(ConsumerSpec {
            name: name.into(),
            home: None,
            configure: Arc::new(configure),
        });
        self
    }

    /// [`consumer_with`](Self::consumer_with) for a consumer service of its own: the
    /// consumer `name` runs on `db` with `outbox` (its inbox, dead-letter and parked tables
    /// there), and still receives every message the kit's broker accepted. Events its
    /// handlers raise stay in `db`'s outbox: the kit's relay publishes the kit's database.
    pub fn consumer_in(
        mut self,
        db: DatabaseConnection,
        outbox: Outbox,
        name: impl Into<String>,
        configure: impl Fn(ConsumerBuilder) -> ConsumerBuilder + Send + Sync + 'static,
    ) -> Self {
        self.consumers.push(ConsumerSpec {
            name: name.into(),
            home: Some((db, outbox)),
            configure: Arc::new(configure),
        });
        self
    }

    /// Settings of the relay: `configure` receives its builder, on which the kit already
    /// set the instance id [`RELAY_INSTANCE_ID`](super::RELAY_INSTANCE_ID) (keep one that
    /// is stable: the relay restarted after a crash must get its leases back). It runs
    /// again at every restart.
    pub fn relay(
        mut self,
        configure: impl Fn(RelayBuilder<InProcessBroker>) -> RelayBuilder<InProcessBroker>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        self.relay = Arc::new(configure);
        self
    }

    /// The broker the relay publishes to (a new, empty one by default). Keep a clone to
    /// play outages and poison messages ([`InProcessBroker::go_down`],
    /// [`InProcessBroker::fail_messages`]); the kit reads what it accepted.
    pub fn broker(mut self, broker: InProcessBroker) -> Self {
        self.broker = broker;
        self
    }

    /// Rounds one [`TestKit::drain_until_idle`] may take before [`TestKitError::NotIdle`]
    /// (default [`DEFAULT_MAX_ROUNDS`]).
    pub fn max_rounds(mut self, rounds: usize) -> Self {
        self.max_rounds = rounds.max(1);
        self
    }

    /// Time one step may take before [`TestKitError::Timeout`] (default
    /// [`DEFAULT_STEP_TIMEOUT`]).
    pub fn step_timeout(mut self, timeout: Duration) -> Self {
        self.step_timeout = timeout;
        self
    }

    /// Builds the relay and the consumers.
    ///
    /// # Errors
    /// [`TestKitError::RelayConfig`], [`TestKitError::ConsumerConfig`] (e.g. a consumer
    /// name no handler is registered under), [`TestKitError::DuplicateConsumer`].
    pub fn build(self) -> Result<TestKit, TestKitError> {
        let mut names = BTreeSet::new();
        let mut consumers = Vec::with_capacity(self.consumers.len());
        for spec in self.consumers {
            if !names.insert(spec.name.clone()) {
                return Err(TestKitError::DuplicateConsumer { name: spec.name });
            }
            let (db, outbox) = spec
                .home
                .unwrap_or_else(|| (self.db.clone(), self.outbox.clone()));
            consumers.push(KitConsumer::start(db, outbox, spec.name, spec.configure)?);
        }
        TestKit::start(super::kit::Parts {
            db: self.db,
            outbox: self.outbox,
            broker: self.broker,
            relay: self.relay,
            consumers,
            max_rounds: self.max_rounds,
            step_timeout: self.step_timeout,
        })
    }
}
