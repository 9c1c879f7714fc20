//! [`Route`]: where a message goes — a NATS subject, an AMQP routing key, a Kafka topic, a
//! Redis stream key — derived from its event type by a documented, configurable rule.

use std::fmt;
use std::sync::Arc;

use outbox_core::Envelope;
use outbox_core::name::EventType;

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
            Self::Fixed(destination) => destination.clone(),
            Self::Custom(route) => route(envelope),
        }
    }
}
