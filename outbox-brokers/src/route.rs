//! [`Route`]: where a message goes — a NATS subject, an AMQP routing key, a Kafka topic, a
//! Redis stream key — derived from its event type by a documented, configurable rule.

use std::fmt;
use std::sync::Arc;

use outbox_core::Envelope;
use outbox_core::name::EventType;
use outbox_seaorm::partition::partition_of;

/// How the destination of an envelope is derived.
///
/// ```
/// use outbox_brokers::route::Route;
/// use outbox_core::Envelope;
/// # use outbox_core::IntegrationEvent;
/// # use schemars::JsonSchema;
/// # use serde::{Deserialize, Serialize};
/// # #[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
/// # #[integration_event(name = "bookstore.ordering.order-placed.v1", key = order_id)]
/// # struct OrderPlacedV1 { order_id: String }
///
/// let envelope = Envelope::from_event(&OrderPlacedV1 { order_id: "o-1".into() })?;
/// assert_eq!(
///     Route::event_type("events.").destination(&envelope),
///     "events.bookstore.ordering.order-placed.v1"
/// );
/// assert_eq!(Route::context("").destination(&envelope), "bookstore.ordering");
/// assert_eq!(Route::fixed("orders").destination(&envelope), "orders");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub enum Route {
    /// `<prefix><event type>`, e.g. `events.bookstore.ordering.order-placed.v1`: one subject
    /// (routing key) per contract version. Every event of a context still shares one ordered
    /// stream when the broker orders across subjects (a JetStream stream, a RabbitMQ queue).
    EventType {
        /// Prepended as is (include the separator).
        prefix: String,
    },
    /// `<prefix><context>`, the event type without its event name and version, e.g.
    /// `bookstore.ordering`: every event of a bounded context in one topic / stream, which
    /// is what per-aggregate order needs on brokers that order only within a topic
    /// (Kafka, Redis Streams).
    Context {
        /// Prepended as is (include the separator).
        prefix: String,
    },
    /// One destination per partition of the aggregate id, for partitioned consumers (see
    /// [`PartitionedRoute`]).
    Partitioned(PartitionedRoute),
    /// Always the same destination.
    Fixed(String),
    /// A function of the envelope.
    Custom(Arc<dyn Fn(&Envelope) -> String + Send + Sync>),
}

impl fmt::Debug for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::EventType { prefix } => {
                f.debug_struct("EventType").field("prefix", prefix).finish()
            }
            Self::Context { prefix } => f.debug_struct("Context").field("prefix", prefix).finish(),
            Self::Partitioned(route) => f.debug_tuple("Partitioned").field(route).finish(),
            Self::Fixed(name) => f.debug_tuple("Fixed").field(name).finish(),
            Self::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

impl Route {
    /// [`Route::EventType`] with `prefix`.
    pub fn event_type(prefix: impl Into<String>) -> Self {
        Self::EventType {
            prefix: prefix.into(),
        }
    }

    /// [`Route::Context`] with `prefix`.
    pub fn context(prefix: impl Into<String>) -> Self {
        Self::Context {
            prefix: prefix.into(),
        }
    }

    /// [`Route::Partitioned`].
    pub fn partitioned(route: PartitionedRoute) -> Self {
        Self::Partitioned(route)
    }

    /// [`Route::Fixed`].
    pub fn fixed(destination: impl Into<String>) -> Self {
        Self::Fixed(destination.into())
    }

    /// [`Route::Custom`].
    pub fn custom(route: impl Fn(&Envelope) -> String + Send + Sync + 'static) -> Self {
        Self::Custom(Arc::new(route))
    }

    /// The destination of `envelope`. An event type that breaks the grammar (it cannot
    /// come from a unit of work) is used whole.
    pub fn destination(&self, envelope: &Envelope) -> String {
        match self {
            Self::EventType { prefix } => format!("{prefix}{}", envelope.event_type),
            Self::Context { prefix } => {
                let context = EventType::parse(&envelope.event_type)
                    .map_or(envelope.event_type.as_str(), |parsed| parsed.context());
                format!("{prefix}{context}")
            }
            Self::Partitioned(route) => route.destination(envelope),
            Self::Fixed(destination) => destination.clone(),
            Self::Custom(route) => route(envelope),
        }
    }
}

impl From<PartitionedRoute> for Route {
    fn from(route: PartitionedRoute) -> Self {
        Self::Partitioned(route)
    }
}

/// Where partitioned messages go: partition `p` of `partitions` is
/// `<prefix><p>` (a Redis stream key, a RabbitMQ routing key), or with
/// [`with_event_type`](Self::with_event_type) `<prefix><p>.<event type>` (NATS subjects,
/// which a consumer of partition `p` filters with `<prefix><p>.>`). The partition is
/// `fnv1a_64(aggregate_id) % partitions`
/// ([`outbox_seaorm::partition::partition_of`], the outbox's function), so each
/// aggregate's messages share one destination and stay in order there.
///
/// Give the same value to the publisher ([`Route::partitioned`]) and to the broker's
/// partitioned runner, whose
/// [`PartitionedConsumer`](outbox_seaorm::inbox::partitioned::PartitionedConsumer) must
/// have the same partition count. The count is part of the topology: changing it moves
/// aggregates to other partitions, so drain first (book: Scaling consumers).
///
/// ```
/// use outbox_brokers::route::{PartitionedRoute, Route};
/// use outbox_core::Envelope;
/// # use outbox_core::IntegrationEvent;
/// # use schemars::JsonSchema;
/// # use serde::{Deserialize, Serialize};
/// # #[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
/// # #[integration_event(name = "bookstore.ordering.order-placed.v1", key = order_id)]
/// # struct OrderPlacedV1 { order_id: String }
///
/// let envelope = Envelope::from_event(&OrderPlacedV1 { order_id: "o-1".into() })?;
/// let partitioned = PartitionedRoute::new("orders.p", 16);
/// let p = outbox_seaorm::partition::partition_of("o-1", 16);
/// assert_eq!(partitioned.partition_of(&envelope), p);
/// assert_eq!(Route::partitioned(partitioned.clone()).destination(&envelope), format!("orders.p{p}"));
/// assert_eq!(
///     partitioned.with_event_type().destination(&envelope),
///     format!("orders.p{p}.bookstore.ordering.order-placed.v1")
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionedRoute {
    prefix: String,
    partitions: u32,
    event_type: bool,
}

impl PartitionedRoute {
    /// Partition `p` of `partitions` (at least 1; 0 counts as 1) is `<prefix><p>`.
    pub fn new(prefix: impl Into<String>, partitions: u32) -> Self {
        Self {
            prefix: prefix.into(),
            partitions: partitions.max(1),
            event_type: false,
        }
    }

    /// Appends `.<event type>` to each destination (NATS subjects).
    #[must_use]
    pub fn with_event_type(mut self) -> Self {
        self.event_type = true;
        self
    }

    /// The partition count.
    pub fn partitions(&self) -> u32 {
        self.partitions
    }

    /// The prefix of every destination.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Whether destinations end in `.<event type>`.
    pub fn has_event_type(&self) -> bool {
        self.event_type
    }

    /// The partition of `envelope`: of its aggregate id.
    pub fn partition_of(&self, envelope: &Envelope) -> u32 {
        partition_of(&envelope.aggregate_id, self.partitions)
    }

    /// `<prefix><p>`: partition `p`'s destination (without the event type).
    pub fn partition_destination(&self, partition: u32) -> String {
        format!("{}{partition}", self.prefix)
    }

    /// The destination of `envelope`.
    pub fn destination(&self, envelope: &Envelope) -> String {
        let base = self.partition_destination(self.partition_of(envelope));
        if self.event_type {
            format!("{base}.{}", envelope.event_type)
        } else {
            base
        }
    }
}
