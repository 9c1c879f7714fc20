//! What every process of one soak shares: where the databases and the broker are, the
//! names of the soak's own stream, subjects, tables and consumer, and the workload. The
//! conductor writes it; the child roles read it from `OUTBOX_SOAK_PLAN` (JSON).

use clap::ValueEnum;
use outbox_brokers::route::PartitionedRoute;
use serde::{Deserialize, Serialize};

use crate::error::SoakError;

/// The environment variable that carries the plan to the child roles.
pub const PLAN_VARIABLE: &str = "OUTBOX_SOAK_PLAN";

/// The inbox consumer name of both consumer processes (shares of one logical consumer).
pub const CONSUMER: &str = "soak.orders";

/// The broker the relays publish to and the consumers read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
pub enum Broker {
    /// NATS JetStream: one stream, a subject per share, a durable consumer per share.
    Nats,
    /// Redis Streams: a stream per share, one consumer group, a consumer name per share.
    Redis,
    /// RabbitMQ: one topic exchange, a durable queue per share bound to the share's
    /// routing keys, a single active consumer on it.
    Rabbitmq,
    /// Kafka (a tansu broker storing in an SQLite file): a topic per share, a consumer
    /// group per share.
    Kafka,
}

impl Broker {
    /// The broker's name in reports and file names.
    pub fn name(self) -> &'static str {
        match self {
            Self::Nats => "nats",
            Self::Redis => "redis",
            Self::Rabbitmq => "rabbitmq",
            Self::Kafka => "kafka",
        }
    }
}

/// How the relays read the outbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize, Default)]
pub enum RelayMethod {
    /// Polling with leases, the producer's database on PostgreSQL.
    #[default]
    Polling,
    /// The log relay on MariaDB's binary log: the producer's database on a MariaDB of the
    /// soak's own with its binary log on; one relay streams, the others stand by on the
    /// slot's lease.
    Log,
}

impl RelayMethod {
    /// The method's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Polling => "polling",
            Self::Log => "log (MariaDB binlog)",
        }
    }
}

/// One soak's shared facts.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Plan {
    /// The producer's and the relays' database: PostgreSQL for the polling relay, the
    /// soak's binlog-enabled MariaDB for the log relay.
    pub producer_url: String,
    /// How the relays read the outbox.
    #[serde(default)]
    pub relay: RelayMethod,
    /// The consumers' database (MariaDB).
    pub mariadb_url: String,
    /// The broker.
    pub broker: Broker,
    /// The soak's own broker server.
    pub broker_url: String,
    /// The JetStream stream, capturing `<subject_prefix>.>` (NATS).
    pub stream: String,
    /// The first token of every subject (NATS) and stream key (Redis).
    pub subject_prefix: String,
    /// Customers (the aggregates) the producer spreads orders over.
    pub customers: u32,
    /// Orders the producer places at most, in all (across its restarts).
    pub orders: u64,
    /// Orders per second the producer places at most.
    pub rate: u32,
    /// Consumer processes: each consumes the aggregates of its share (or, partitioned,
    /// the partitions it holds leases for).
    pub shares: u32,
    /// Partitions of the partitioned mode (`--partitions`): every consumer process is an
    /// instance of one partitioned consumer; 0: the share mode, one consumer per share.
    #[serde(default)]
    pub partitions: u32,
}

impl Plan {
    /// The plan a child role was started with.
    ///
    /// # Errors
    /// [`SoakError::Plan`] when the variable is missing or not a plan.
    pub fn from_env() -> Result<Self, SoakError> {
        let json = std::env::var(PLAN_VARIABLE).map_err(|_| {
            SoakError::Plan(format!(
                "{PLAN_VARIABLE} is not set (run `outbox-soak run`)"
            ))
        })?;
        serde_json::from_str(&json).map_err(|error| SoakError::Plan(error.to_string()))
    }

    /// The plan as the child roles receive it.
    pub fn to_json(&self) -> String {
        // A struct of strings and numbers always serialises.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The share of the aggregates `customer` belongs to: its outbox partition modulo the
    /// shares, so that a share is a set of whole partitions.
    pub fn share_of(&self, customer: &str, partitions: u32) -> u32 {
        outbox_seaorm::partition::partition_of(customer, partitions) % self.shares.max(1)
    }

    /// The subject (NATS) or routing key (RabbitMQ) of a message of `share`:
    /// `<prefix>.s<share>.<event type>`.
    pub fn share_subject(&self, share: u32, event_type: &str) -> String {
        format!("{}.s{share}.{event_type}", self.subject_prefix)
    }

    /// The subjects of one share: `<prefix>.s<share>.>` (NATS).
    pub fn share_filter(&self, share: u32) -> String {
        format!("{}.s{share}.>", self.subject_prefix)
    }

    /// The queue (RabbitMQ) or topic (Kafka) of one share: `<prefix>.s<share>`. The
    /// RabbitMQ queue is bound to `<prefix>.s<share>.#` on the exchange `<prefix>`.
    pub fn share_name(&self, share: u32) -> String {
        format!("{}.s{share}", self.subject_prefix)
    }

    /// The stream of one share: `<prefix>:s<share>` (Redis).
    pub fn share_stream(&self, share: u32) -> String {
        format!("{}:s{share}", self.subject_prefix)
    }
}

impl Plan {
    /// The partitioned mode's route: partition `p`'s messages go to the subject (NATS) or
    /// routing key (RabbitMQ, bound as `<prefix>.p<p>.#`) `<prefix>.p<p>.<event type>`, or
    /// to the stream `<prefix>:p<p>` (Redis). (Kafka's partitioned mode is one topic of
    /// [`partitioned_queue`](Self::partitioned_queue)'s name, partitioned by the key.)
    pub fn partitioned_route(&self) -> PartitionedRoute {
        match self.broker {
            Broker::Redis => PartitionedRoute::new(self.partitioned_stream(), self.partitions),
            _ => PartitionedRoute::new(format!("{}.p", self.subject_prefix), self.partitions)
                .with_event_type(),
        }
    }

    /// The prefix of the partitioned mode's Redis streams: `<prefix>:p`.
    pub fn partitioned_stream(&self) -> String {
        format!("{}:p", self.subject_prefix)
    }

    /// The partitioned mode's Kafka topic (`<prefix>.partitioned`, one partition per
    /// partition: the consumer group assigns them), and the prefix of its RabbitMQ queues
    /// (`<prefix>.partitioned.p<p>`).
    pub fn partitioned_queue(&self) -> String {
        format!("{}.partitioned", self.subject_prefix)
    }
}

/// The instance id of the partitioned consumer in process `pid`: `soak-consumer-<pid>`,
/// new per start, so that a killed process's partitions are taken over through their
/// leases' expiry.
pub fn consumer_instance(pid: u32) -> String {
    format!("soak-consumer-{pid}")
}

/// The lease owner of [`consumer_instance`]: `<consumer>/soak-consumer-<pid>`.
pub fn consumer_owner(pid: u32) -> String {
    format!("{CONSUMER}/{}", consumer_instance(pid))
}

/// The name of customer `n` (an aggregate id).
pub fn customer(n: u32) -> String {
    format!("customer-{n:04}")
}
