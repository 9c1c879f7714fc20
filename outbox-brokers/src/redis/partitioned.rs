//! [`RedisPartitionedRunner`]: a partitioned consumer on Redis Streams, one stream per
//! partition.

use outbox_seaorm::inbox::partitioned::{Partition, PartitionedConsumer};
use tokio_util::sync::CancellationToken;

use super::runner::{RedisConsumerRunner, RunnerReport};
use super::{RedisConsumerRunnerBuilder, RedisError};
use crate::partitioned::{PartitionedRunReport, mismatch, run_partitioned};
use crate::route::PartitionedRoute;

/// Several processes of one inbox consumer, each reading the Redis streams of the
/// partitions it holds a lease for
/// ([`PartitionedConsumer`](outbox_seaorm::inbox::partitioned)), so that each aggregate's
/// messages are applied in order and a killed process's partitions are taken over.
///
/// The publisher routes with [`Route::partitioned`](crate::route::Route::partitioned) and a
/// [`PartitionedRoute`] without event type: partition `p`'s entries go to the stream
/// `<prefix><p>`. Partition `p` is read by the consumer group of the
/// [`RedisConsumerRunnerBuilder`] under the consumer name `partition-<p>` — the same for
/// every owner, so that a new owner reads the entries its predecessor left pending first,
/// in order, at once (no claim, no idle time to wait: the lease says nobody else reads the
/// stream). A partition runner settles entries from that pending list only (a `>` read just
/// moves new entries into it), so an entry a predecessor took after its lease was gone — a
/// process paused between its lease check and its read — is settled before the entries
/// after it, not skipped. That costs one more read per batch.
///
/// Built with [`RedisConsumerRunnerBuilder::build_partitioned`].
#[derive(Debug)]
pub struct RedisPartitionedRunner {
    template: RedisConsumerRunner,
    partitioned: PartitionedConsumer,
    route: PartitionedRoute,
}

impl RedisConsumerRunnerBuilder {
    /// Builds a [`RedisPartitionedRunner`]: `partitioned` (whose consumer must be this
    /// builder's) decides which partitions this process reads, `route` (the publisher's)
    /// where they are. The builder's stream must be the route's prefix (the streams are
    /// `<prefix><p>`); its consumer name and claim settings are not used.
    ///
    /// # Errors
    /// [`RedisError::Config`] as [`build`](Self::build), and when the stream is not the
    /// route's prefix, the route has an event type suffix (one stream per partition keeps
    /// an aggregate's events in order), or the partition counts or consumer names differ.
    pub fn build_partitioned(
        self,
        partitioned: PartitionedConsumer,
        route: PartitionedRoute,
    ) -> Result<RedisPartitionedRunner, RedisError> {
        let template = self.build()?;
        if template.stream() != route.prefix() {
            return Err(RedisError::Config(format!(
                "the runner's stream `{}` must be the partitioned route's prefix `{}`",
                template.stream(),
                route.prefix()
            )));
        }
        if route.has_event_type() {
            return Err(RedisError::Config(
                "a partitioned Redis route has one stream per partition: no `.with_event_type()`"
                    .into(),
            ));
        }
        if let Some(mismatch) = mismatch(&partitioned, &route, template.inbox_name()) {
            return Err(RedisError::Config(mismatch));
        }
        Ok(RedisPartitionedRunner {
            template,
            partitioned,
            route,
        })
    }
}

impl RedisPartitionedRunner {
    /// The stream of partition `p`: `<prefix><p>`.
    pub fn stream(&self, partition: u32) -> String {
        self.route.partition_destination(partition)
    }

    /// The consumer name every owner of partition `p` reads it under: `partition-<p>`.
    pub fn consumer_name(partition: u32) -> String {
        format!("partition-{partition}")
    }

    /// Runs until `shutdown` is cancelled: the partitioned consumer's leases, one
    /// [`RedisConsumerRunner`] loop per partition held, and the consumer's redelivery loop.
    pub async fn run(self, shutdown: CancellationToken) -> PartitionedRunReport<RunnerReport> {
        let Self {
            template,
            partitioned,
            route,
        } = self;
        run_partitioned(partitioned, shutdown, move |partition: Partition| {
            let number = partition.number();
            let runner = template.for_partition(
                partition.consumer().clone(),
                partition.held().clone(),
                route.partition_destination(number),
                Self::consumer_name(number),
            );
            runner.subscription(partition.stop().clone())
        })
        .await
    }
}
