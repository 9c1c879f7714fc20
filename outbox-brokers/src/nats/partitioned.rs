//! [`NatsPartitionedRunner`]: a partitioned consumer on JetStream, one durable per
//! partition.

use outbox_seaorm::inbox::partitioned::{Partition, PartitionedConsumer};
use tokio_util::sync::CancellationToken;

use super::runner::{NatsConsumerRunner, RunnerReport};
use super::{NatsConsumerRunnerBuilder, NatsError};
use crate::partitioned::{PartitionedRunReport, mismatch, run_partitioned};
use crate::route::PartitionedRoute;

/// Several processes of one inbox consumer on one JetStream stream, each pulling the
/// partitions it holds a lease for
/// ([`PartitionedConsumer`](outbox_seaorm::inbox::partitioned)), so that each aggregate's
/// messages are applied in order and a killed process's partitions are taken over.
///
/// The publisher routes with [`Route::partitioned`](crate::route::Route::partitioned) and a
/// [`PartitionedRoute`] with [`with_event_type`](PartitionedRoute::with_event_type): partition
/// `p`'s messages go to `<prefix><p>.<event type>`, all captured by one stream. Partition `p`
/// is consumed through the durable `<durable>-p<p>` filtered by `<prefix><p>.>`, with the
/// settings of the [`NatsConsumerRunnerBuilder`] it was built from (one delivery outstanding
/// at a time, so order holds per partition). A partition runner owns its durable while it
/// holds the lease: at start, deliveries its predecessor left unacknowledged are not waited
/// for (one `ack_wait`) but restarted from the durable's ack floor at once.
///
/// Built with [`NatsConsumerRunnerBuilder::build_partitioned`].
#[derive(Debug)]
pub struct NatsPartitionedRunner {
    template: NatsConsumerRunner,
    partitioned: PartitionedConsumer,
    route: PartitionedRoute,
}

impl NatsConsumerRunnerBuilder {
    /// Builds a [`NatsPartitionedRunner`]: `partitioned` (whose consumer must be this
    /// builder's) decides which partitions this process pulls, `route` (the publisher's)
    /// where they are.
    ///
    /// # Errors
    /// [`NatsError::Config`] as [`build`](Self::build), and when a filter subject is set
    /// (each partition has its own), the route has no event type suffix (NATS filters
    /// `<prefix><p>.>`), or the partition counts or consumer names differ.
    pub fn build_partitioned(
        self,
        partitioned: PartitionedConsumer,
        route: PartitionedRoute,
    ) -> Result<NatsPartitionedRunner, NatsError> {
        let template = self.build()?;
        if template.filter().is_some() {
            return Err(NatsError::Config(
                "a partitioned runner filters each partition's subjects itself: set no filter subject".into(),
            ));
        }
        if !route.has_event_type() {
            return Err(NatsError::Config(
                "a partitioned NATS route needs `.with_event_type()`: subjects `<prefix><p>.<event type>`".into(),
            ));
        }
        if let Some(mismatch) = mismatch(&partitioned, &route, template.inbox_name()) {
            return Err(NatsError::Config(mismatch));
        }
        Ok(NatsPartitionedRunner {
            template,
            partitioned,
            route,
        })
    }
}

impl NatsPartitionedRunner {
    /// The durable consumer of partition `p`: `<durable>-p<p>`.
    pub fn durable_name(&self, partition: u32) -> String {
        durable_name(self.template.durable_name(), partition)
    }

    /// The filter subject of partition `p`: `<prefix><p>.>`.
    pub fn filter_subject(&self, partition: u32) -> String {
        filter_subject(&self.route, partition)
    }

    /// Runs until `shutdown` is cancelled: the partitioned consumer's leases, one
    /// [`NatsConsumerRunner`] loop per partition held, and the consumer's redelivery loop.
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
                durable_name(template.durable_name(), number),
                filter_subject(&route, number),
            );
            runner.subscription(partition.stop().clone())
        })
        .await
    }
}

fn durable_name(durable: &str, partition: u32) -> String {
    format!("{durable}-p{partition}")
}

fn filter_subject(route: &PartitionedRoute, partition: u32) -> String {
    format!("{}.>", route.partition_destination(partition))
}
