//! [`TestKit`]: a relay and consumers over an in-process broker, run until idle.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use outbox_core::in_process::{AfterPublish, InProcessBroker};
use outbox_core::{Envelope, IntegrationEvent};
use sea_orm::DatabaseConnection;

use super::{Crash, TestKitError};
use crate::config::Outbox;
use crate::inbox::crash_point::CrashPoint;
use crate::inbox::{Consumer, ConsumerBuilder};
use crate::relay::{Relay, RelayBuilder};

/// The relay's instance id in the kit: stable across the restarts after a crash, so that
/// the restarted relay takes its own leases back at once.
pub const RELAY_INSTANCE_ID: &str = "outbox-test-kit-relay";

/// How the kit configures its relay, at start and at every restart.
pub(super) type ConfigureRelay =
    Arc<dyn Fn(RelayBuilder<InProcessBroker>) -> RelayBuilder<InProcessBroker> + Send + Sync>;
/// How the kit configures one consumer, at start and at every restart.
pub(super) type ConfigureConsumer = Arc<dyn Fn(ConsumerBuilder) -> ConsumerBuilder + Send + Sync>;

/// One consumer the kit runs: its process (the [`Consumer`], built again after a crash)
/// and its place in the broker's log.
pub(super) struct KitConsumer {
    pub(super) name: String,
    /// The consumer's database and outbox (the kit's, or a consumer service's own).
    db: DatabaseConnection,
    outbox: Outbox,
    configure: ConfigureConsumer,
    pub(super) consumer: Consumer,
    /// Broker messages delivered and settled (acknowledged) so far.
    pub(super) acknowledged: usize,
    pub(super) crash_point: Arc<CrashPoint>,
}

impl KitConsumer {
    pub(super) fn start(
        db: DatabaseConnection,
        outbox: Outbox,
        name: String,
        configure: ConfigureConsumer,
    ) -> Result<Self, TestKitError> {
        let consumer = configure(Consumer::builder(db.clone(), outbox.clone(), &name)).build()?;
        Ok(Self {
            name,
            db,
            outbox,
            configure,
            consumer,
            acknowledged: 0,
            crash_point: Arc::new(CrashPoint::default()),
        })
    }

    /// The process starts again: a new [`Consumer`] (nothing kept in memory), the same
    /// place in the broker's log (what was not acknowledged is delivered again).
    pub(super) fn restart(&mut self) -> Result<(), TestKitError> {
        let builder = Consumer::builder(self.db.clone(), self.outbox.clone(), &self.name);
        self.consumer = (self.configure)(builder).build()?;
        Ok(())
    }
}

/// What [`TestKitBuilder::build`](super::TestKitBuilder::build) hands over.
pub(super) struct Parts {
    pub(super) db: DatabaseConnection,
    pub(super) outbox: Outbox,
    pub(super) broker: InProcessBroker,
    pub(super) relay: ConfigureRelay,
    pub(super) consumers: Vec<KitConsumer>,
    pub(super) max_rounds: usize,
    pub(super) step_timeout: Duration,
}

/// A relay publishing the outbox to an [`InProcessBroker`] and the consumers reading it,
/// run step by step until nothing is left to do; see the [module documentation](super).
pub struct TestKit {
    pub(super) db: DatabaseConnection,
    pub(super) outbox: Outbox,
    pub(super) broker: InProcessBroker,
    configure_relay: ConfigureRelay,
    pub(super) relay: Relay<InProcessBroker>,
    /// Relay crashes armed and not played yet.
    pub(super) relay_crashes: usize,
    pub(super) consumers: Vec<KitConsumer>,
    pub(super) max_rounds: usize,
    pub(super) step_timeout: Duration,
}

impl std::fmt::Debug for TestKit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let consumers: Vec<&str> = self.consumers.iter().map(|c| c.name.as_str()).collect();
        f.debug_struct("TestKit")
            .field("outbox", &self.outbox.outbox_table().to_string())
            .field("broker", &self.broker)
            .field("consumers", &consumers)
            .field("armed", &self.armed_crashes())
            .finish_non_exhaustive()
    }
}

impl TestKit {
    pub(super) fn start(parts: Parts) -> Result<Self, TestKitError> {
        let relay = build_relay(&parts.db, &parts.outbox, &parts.broker, &parts.relay)?;
        Ok(Self {
            db: parts.db,
            outbox: parts.outbox,
            broker: parts.broker,
            configure_relay: parts.relay,
            relay,
            relay_crashes: 0,
            consumers: parts.consumers,
            max_rounds: parts.max_rounds,
            step_timeout: parts.step_timeout,
        })
    }

    /// The relay's process starts again (same instance id, nothing kept in memory).
    pub(super) fn restart_relay(&mut self) -> Result<(), TestKitError> {
        self.relay = build_relay(&self.db, &self.outbox, &self.broker, &self.configure_relay)?;
        Ok(())
    }

    /// The outbox under test.
    pub fn outbox(&self) -> &Outbox {
        &self.outbox
    }

    /// The database the relay and the consumers use.
    pub fn database(&self) -> &DatabaseConnection {
        &self.db
    }

    /// The broker: every envelope it accepted, duplicates included
    /// ([`InProcessBroker::published`]), and its failure switches.
    pub fn broker(&self) -> &InProcessBroker {
        &self.broker
    }

    /// The running consumer `name`, if the kit runs it (it is a new value after each of
    /// its crashes).
    pub fn consumer(&self, name: &str) -> Option<&Consumer> {
        self.consumers
            .iter()
            .find(|consumer| consumer.name == name)
            .map(|consumer| &consumer.consumer)
    }

    /// Arms `crash`: the next [`drain_until_idle`](Self::drain_until_idle) plays it at the
    /// first relay batch or delivery that reaches its point. Crashes add up: arming the
    /// same one twice plays it twice.
    ///
    /// # Errors
    /// [`TestKitError::UnknownConsumer`] for a consumer the kit does not run.
    pub fn crash(&mut self, crash: Crash) -> Result<(), TestKitError> {
        match crash {
            Crash::AfterPublishBeforeMark => {
                self.broker.crash_after_next_publish(AfterPublish::Hang);
                self.relay_crashes += 1;
            }
            Crash::AfterHandlerBeforeCommit { consumer } => {
                let Some(running) = self.consumers.iter().find(|c| c.name == consumer) else {
                    return Err(TestKitError::UnknownConsumer {
                        name: consumer,
                        configured: self.consumers.iter().map(|c| c.name.clone()).collect(),
                    });
                };
                running.crash_point.arm();
            }
        }
        Ok(())
    }

    /// The crashes armed and not played yet.
    pub fn armed_crashes(&self) -> Vec<Crash> {
        let relay = std::iter::repeat_n(Crash::AfterPublishBeforeMark, self.relay_crashes);
        let consumers = self.consumers.iter().flat_map(|consumer| {
            std::iter::repeat_n(
                Crash::after_handler_before_commit(consumer.name.clone()),
                consumer.crash_point.armed(),
            )
        });
        relay.chain(consumers).collect()
    }

    /// The distinct messages the broker accepted (a message published twice, after a
    /// crash, appears once), in the order it first accepted them.
    pub fn published_envelopes(&self) -> Vec<Envelope> {
        let mut seen = HashSet::new();
        self.broker
            .published()
            .into_iter()
            .filter(|envelope| seen.insert(envelope.message_id))
            .collect()
    }

    /// The distinct published messages of contract `C`, decoded, in publish order.
    ///
    /// # Errors
    /// [`TestKitError::Decode`] when a message of `C`'s event type does not decode as `C`
    /// (or breaks the outbox's envelope limits).
    pub fn published<C: IntegrationEvent>(&self) -> Result<Vec<C>, TestKitError> {
        self.published_envelopes()
            .iter()
            .filter(|envelope| envelope.event_type == C::EVENT_TYPE)
            .map(|envelope| {
                self.outbox
                    .envelope_config()
                    .decode::<C>(envelope)
                    .map_err(|source| TestKitError::Decode {
                        message_id: envelope.message_id,
                        event_type: C::EVENT_TYPE,
                        source,
                    })
            })
            .collect()
    }
}

fn build_relay(
    db: &DatabaseConnection,
    outbox: &Outbox,
    broker: &InProcessBroker,
    configure: &ConfigureRelay,
) -> Result<Relay<InProcessBroker>, TestKitError> {
    let builder =
        Relay::builder(db.clone(), outbox.clone(), broker.clone()).instance_id(RELAY_INSTANCE_ID);
    Ok(configure(builder).build()?)
}
