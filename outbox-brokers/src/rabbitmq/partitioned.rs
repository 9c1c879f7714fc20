//! [`RabbitPartitionedRunner`]: a partitioned consumer on RabbitMQ, one queue per
//! partition.

use outbox_seaorm::inbox::partitioned::{Partition, PartitionedConsumer};
use tokio_util::sync::CancellationToken;

use super::runner::RabbitConsumerRunner;
use super::{RabbitConsumerRunnerBuilder, RabbitError};
use crate::partitioned::{PartitionedRunReport, mismatch, run_partitioned};
use crate::route::PartitionedRoute;

/// Several processes of one inbox consumer, each consuming the RabbitMQ queues of the
/// partitions it holds a lease for
/// ([`PartitionedConsumer`](outbox_seaorm::inbox::partitioned)), so that each aggregate's
/// messages are applied in order and a killed process's partitions are taken over.
///
/// The publisher routes with [`Route::partitioned`](crate::route::Route::partitioned): a
/// message of partition `p` has the routing key `<prefix><p>` (or `<prefix><p>.<event type>`
/// with [`with_event_type`](PartitionedRoute::with_event_type)) on the topic exchange.
/// Partition `p` is the durable queue `<queue>.p<p>`, bound with `<prefix><p>` (or
/// `<prefix><p>.#`) and declared with `x-single-active-consumer`, consumed with the
/// settings of the [`RabbitConsumerRunnerBuilder`] it was built from. The broker requeues
/// a killed owner's unacknowledged messages, in their order, when its connection closes;
/// single active consumer keeps a process that lost its lease but still has its channel
/// open from sharing the queue with the new owner.
///
/// Built with [`RabbitConsumerRunnerBuilder::build_partitioned`].
#[derive(Debug)]
pub struct RabbitPartitionedRunner {
    template: RabbitConsumerRunner,
    partitioned: PartitionedConsumer,
    route: PartitionedRoute,
}

impl RabbitConsumerRunnerBuilder {
    /// Builds a [`RabbitPartitionedRunner`]: `partitioned` (whose consumer must be this
    /// builder's) decides which partitions this process consumes, `route` (the publisher's)
    /// where they are. The builder's queue names the partition queues (`<queue>.p<p>`).
    ///
    /// # Errors
    /// [`RabbitError::Config`] as [`build`](Self::build), and when bindings are given (each
    /// partition queue has its own) or the partition counts or consumer names differ.
    pub fn build_partitioned(
        self,
        partitioned: PartitionedConsumer,
        route: PartitionedRoute,
    ) -> Result<RabbitPartitionedRunner, RabbitError> {
        let given_bindings = self.has_bindings();
        let template = self.build()?;
        if given_bindings {
            return Err(RabbitError::Config(
                "a partitioned runner binds each partition's queue itself: give no bindings".into(),
            ));
        }
        if let Some(mismatch) = mismatch(&partitioned, &route, template.consumer().name()) {
            return Err(RabbitError::Config(mismatch));
        }
        Ok(RabbitPartitionedRunner {
            template,
            partitioned,
            route,
        })
    }
}

impl RabbitPartitionedRunner {
    /// The queue of partition `p`: `<queue>.p<p>`.
    pub fn queue(&self, partition: u32) -> String {
        queue(self.template.queue(), partition)
    }

    /// The binding of partition `p`'s queue: `<prefix><p>`, or `<prefix><p>.#` when the
    /// route appends the event type.
    pub fn binding(&self, partition: u32) -> String {
        binding(&self.route, partition)
    }

    /// The exchange.
    pub fn exchange(&self) -> &str {
        self.template.exchange()
    }

    /// Declares the exchange and every partition's queue and binding, then disconnects: run
    /// it before the relay publishes, so that messages of a partition whose runner has not
    /// started yet are not unroutable.
    ///
    /// # Errors
    /// A [`RabbitError`] when the broker cannot be reached or refuses the topology.
    pub async fn declare_topology(&self) -> Result<(), RabbitError> {
        for partition in 0..self.partitioned.partitions() {
            self.template
                .for_partition(
                    self.partitioned.consumer().clone(),
                    None,
                    self.queue(partition),
                    self.binding(partition),
                )
                .declare_topology()
                .await?;
        }
        Ok(())
    }

    /// Runs until `shutdown` is cancelled: the partitioned consumer's leases, one
    /// [`RabbitConsumerRunner`] loop per partition held, and the consumer's redelivery loop.
    /// The report's runner part counts the partition runners that stopped on an error
    /// (each restarted at the next heartbeat while the lease is held).
    pub async fn run(self, shutdown: CancellationToken) -> PartitionedRunReport<u64> {
        let Self {
            template,
            partitioned,
            route,
        } = self;
        run_partitioned(partitioned, shutdown, move |partition: Partition| {
            let number = partition.number();
            let runner = template.for_partition(
                partition.consumer().clone(),
                Some(partition.held().clone()),
                queue(template.queue(), number),
                binding(&route, number),
            );
            let subscription = runner.subscription(partition.stop().clone());
            async move { u64::from(subscription.await.is_err()) }
        })
        .await
    }
}

fn queue(queue: &str, partition: u32) -> String {
    format!("{queue}.p{partition}")
}

fn binding(route: &PartitionedRoute, partition: u32) -> String {
    let destination = route.partition_destination(partition);
    if route.has_event_type() {
        format!("{destination}.#")
    } else {
        destination
    }
}
