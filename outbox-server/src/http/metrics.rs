//! The Prometheus recorder of the `metrics` facade: every metric the relays record, in the
//! exposition format on `/metrics`.

use std::time::Duration;

use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder, PrometheusHandle};
use outbox_core::metric;
use tokio_util::sync::CancellationToken;

/// The buckets of the duration histograms, in seconds: from a millisecond to a minute.
pub const SECONDS_BUCKETS: [f64; 14] = [
    0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0,
];

/// The buckets of the batch-size histogram, in rows.
pub const ROWS_BUCKETS: [f64; 10] = [
    1.0, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 5000.0,
];

/// How often the recorder's histograms are compacted.
const UPKEEP_INTERVAL: Duration = Duration::from_secs(5);

/// Installs the Prometheus recorder as the process's global `metrics` recorder, with
/// histogram buckets for the outbox's histograms.
///
/// # Errors
/// [`BuildError`]: a recorder is installed already.
pub fn install() -> Result<PrometheusHandle, BuildError> {
    PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &SECONDS_BUCKETS)?
        .set_buckets_for_metric(Matcher::Full(metric::BATCH_SIZE.into()), &ROWS_BUCKETS)?
        .install_recorder()
}

/// Compacts the histograms every few seconds until `shutdown` (the recorder has no
/// listener of its own that would do it).
pub async fn upkeep(handle: PrometheusHandle, shutdown: CancellationToken) {
    let mut interval = tokio::time::interval(UPKEEP_INTERVAL);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => break,
            _ = interval.tick() => handle.run_upkeep(),
        }
    }
}
