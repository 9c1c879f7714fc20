//! `[relay.broker] route`: how an event type becomes a destination.

use outbox_brokers::route::{PartitionedRoute, Route};

use super::broker_kind::BrokerKind;
use super::file::FileRoute;
use super::problem::Problems;
use super::value::choice;

/// How an event type becomes a destination (see [`Route`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RouteSettings {
    /// `<prefix><event type>`: the default for NATS and RabbitMQ.
    EventType {
        /// Prepended as is.
        prefix: String,
    },
    /// `<prefix><context>`: the default for Kafka and Redis, which order within one
    /// topic or stream only.
    Context {
        /// Prepended as is.
        prefix: String,
    },
    /// Always `destination`.
    Fixed {
        /// The subject, routing key, topic or stream.
        destination: String,
    },
    /// `<prefix><partition>` (or `<prefix><context>.<partition>` with
    /// `with_event_type`), for partitioned consumers.
    Partitioned {
        /// Prepended as is.
        prefix: String,
        /// How many partitions.
        partitions: u32,
        /// Whether the destination names the context before the partition.
        with_event_type: bool,
    },
}

impl RouteSettings {
    /// The broker route.
    pub fn route(&self) -> Route {
        match self {
            Self::EventType { prefix } => Route::event_type(prefix.clone()),
            Self::Context { prefix } => Route::context(prefix.clone()),
            Self::Fixed { destination } => Route::fixed(destination.clone()),
            Self::Partitioned {
                prefix,
                partitions,
                with_event_type,
            } => {
                let mut route = PartitionedRoute::new(prefix.clone(), *partitions);
                if *with_event_type {
                    route = route.with_event_type();
                }
                Route::partitioned(route)
            }
        }
    }
}

/// Checks `route`; without one, the broker's default.
pub(crate) fn check_route(
    file: Option<&FileRoute>,
    kind: BrokerKind,
    path: &str,
    problems: &mut Problems,
) -> Option<RouteSettings> {
    let Some(file) = file else {
        return Some(match kind {
            BrokerKind::Nats | BrokerKind::RabbitMq => RouteSettings::EventType {
                prefix: String::new(),
            },
            BrokerKind::Kafka | BrokerKind::Redis => RouteSettings::Context {
                prefix: String::new(),
            },
        });
    };
    #[derive(Clone, Copy)]
    enum Kind {
        EventType,
        Context,
        Fixed,
        Partitioned,
    }
    let route_kind = match &file.kind {
        Some(text) => choice(
            problems,
            &format!("{path}.kind"),
            text,
            &[
                ("event_type", Kind::EventType),
                ("context", Kind::Context),
                ("fixed", Kind::Fixed),
                ("partitioned", Kind::Partitioned),
            ],
        )?,
        None => {
            problems.add(
                format!("{path}.kind"),
                "missing: `event_type`, `context`, `fixed` or `partitioned`",
            );
            return None;
        }
    };
    let prefix = file.prefix.clone().unwrap_or_default();
    let unused = |problems: &mut Problems, key: &str, present: bool, kinds: &str| {
        if present {
            problems.add(format!("{path}.{key}"), format!("only for {kinds} routes"));
        }
    };
    match route_kind {
        Kind::EventType | Kind::Context | Kind::Fixed => {
            unused(
                problems,
                "partitions",
                file.partitions.is_some(),
                "`partitioned`",
            );
            unused(
                problems,
                "with_event_type",
                file.with_event_type.is_some(),
                "`partitioned`",
            );
        }
        Kind::Partitioned => {}
    }
    if !matches!(route_kind, Kind::Fixed) {
        unused(
            problems,
            "destination",
            file.destination.is_some(),
            "`fixed`",
        );
    } else {
        unused(
            problems,
            "prefix",
            file.prefix.is_some(),
            "`event_type`, `context` and `partitioned`",
        );
    }
    match route_kind {
        Kind::EventType => Some(RouteSettings::EventType { prefix }),
        Kind::Context => Some(RouteSettings::Context { prefix }),
        Kind::Fixed => match &file.destination {
            Some(destination) if !destination.is_empty() => Some(RouteSettings::Fixed {
                destination: destination.clone(),
            }),
            _ => {
                problems.add(
                    format!("{path}.destination"),
                    "missing: where every event goes",
                );
                None
            }
        },
        Kind::Partitioned => match file.partitions {
            Some(partitions) if partitions > 0 => Some(RouteSettings::Partitioned {
                prefix,
                partitions,
                with_event_type: file.with_event_type.unwrap_or(false),
            }),
            _ => {
                problems.add(
                    format!("{path}.partitions"),
                    "missing or zero: how many partitions",
                );
                None
            }
        },
    }
}
