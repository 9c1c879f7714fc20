//! What every partitioned runner does: run a
//! [`outbox_seaorm::inbox::partitioned::PartitionedConsumer`], one
//! broker runner per partition it holds, with the redelivery loop beside it.

use std::future::Future;
use std::sync::{Arc, Mutex};

use outbox_seaorm::inbox::partitioned::{Partition, PartitionedConsumer, PartitionedReport};
use tokio_util::sync::CancellationToken;

use crate::route::PartitionedRoute;
use crate::settle::with_requeued_redelivery;

/// What a partitioned runner did until it was shut down: its leases, and the sum of its
/// partition runners' reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PartitionedRunReport<R> {
    /// Partitions started, handed over, lost.
    pub partitions: PartitionedReport,
    /// The partition runners' reports, summed.
    pub runners: R,
}

#[cfg_attr(
    not(any(feature = "nats", feature = "rabbitmq", feature = "redis")),
    allow(dead_code)
)]
/// Runs `partitioned` until `shutdown`, `runner(partition)` for each partition it holds, and
/// the consumer's redelivery loop (requeued dead letters, parked messages) once beside them;
/// returns the lease report and the sum of every partition runner's report.
pub(crate) async fn run_partitioned<R, F, Fut>(
    partitioned: PartitionedConsumer,
    shutdown: CancellationToken,
    mut runner: F,
) -> PartitionedRunReport<R>
where
    F: FnMut(Partition) -> Fut,
    Fut: Future<Output = R> + Send + 'static,
    R: std::ops::AddAssign + Default + Send + 'static,
{
    let consumer = partitioned.consumer().clone();
    let runners: Arc<Mutex<R>> = Arc::default();
    let sum = Arc::clone(&runners);
    let partitions = with_requeued_redelivery(
        &consumer,
        &shutdown,
        partitioned.run(shutdown.clone(), move |partition| {
            let run = runner(partition);
            let sum = Arc::clone(&sum);
            async move {
                let report = run.await;
                *sum.lock().unwrap_or_else(|p| p.into_inner()) += report;
            }
        }),
    )
    .await;
    let runners = std::mem::take(&mut *runners.lock().unwrap_or_else(|p| p.into_inner()));
    PartitionedRunReport {
        partitions,
        runners,
    }
}

#[cfg_attr(
    not(any(feature = "nats", feature = "rabbitmq", feature = "redis")),
    allow(dead_code)
)]
/// Why `partitioned` and `route` do not fit a runner of the inbox consumer `inbox`: their
/// partition counts or consumer names differ.
pub(crate) fn mismatch(
    partitioned: &PartitionedConsumer,
    route: &PartitionedRoute,
    inbox: &str,
) -> Option<String> {
    if route.partitions() != partitioned.partitions() {
        return Some(format!(
            "the route has {} partitions, the partitioned consumer {}",
            route.partitions(),
            partitioned.partitions()
        ));
    }
    if partitioned.consumer().name() != inbox {
        return Some(format!(
            "the partitioned consumer is `{}`, the runner's inbox consumer `{inbox}`",
            partitioned.consumer().name()
        ));
    }
    None
}
