//! [`BrokerKind`]: which broker a relay publishes to, and whether this build has its client.

/// The broker a relay publishes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BrokerKind {
    /// NATS JetStream (`nats://host:4222`).
    Nats,
    /// RabbitMQ with publisher confirms (`amqp://user:password@host:5672/vhost`).
    RabbitMq,
    /// Kafka, idempotent producer (bootstrap servers `host:9092,host:9092`).
    Kafka,
    /// Redis Streams (`redis://host:6379`).
    Redis,
}

impl BrokerKind {
    /// Whether this build has the broker's client (cargo features `nats`, `rabbitmq`,
    /// `kafka`, `redis`; all by default).
    pub const fn compiled(self) -> bool {
        match self {
            Self::Nats => cfg!(feature = "nats"),
            Self::RabbitMq => cfg!(feature = "rabbitmq"),
            Self::Kafka => cfg!(feature = "kafka"),
            Self::Redis => cfg!(feature = "redis"),
        }
    }

    /// `nats`, `rabbitmq`, `kafka` or `redis`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Nats => "nats",
            Self::RabbitMq => "rabbitmq",
            Self::Kafka => "kafka",
            Self::Redis => "redis",
        }
    }
}
