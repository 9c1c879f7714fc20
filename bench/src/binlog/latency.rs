//! `binlog --part latency`: commit → publisher confirmation at a fixed rate through (a) the
//! polling relay and (b) the log relay on the binary log, in turn on the same server; see
//! the [parent module](super).

use std::sync::Arc;

use outbox_seaorm::Outbox;
use outbox_seaorm::relay::Relay;
use outbox_seaorm::relay::log::LogRelay;
use tokio_util::sync::CancellationToken;

use super::BinlogArgs;
use super::server::{self, BenchServer};
use crate::log::latency::{MAX_PRODUCERS, ms, percentile, step};
use crate::log::publisher::{Recorder, Sink};
use crate::log::{BoxError, connect};

/// The latency benchmark's database and outbox.
const DATABASE: &str = "bench_binlog_latency";
const OUTBOX: &str = "lat_outbox";
/// Its log relay's slot.
const SLOT: &str = "bench_binlog_lat";
/// The polling relay's poll interval: MariaDB has no wake-up, so its latency is about half
/// of it (its default, 1 s, would be measured as "behind").
const POLL_INTERVAL: std::time::Duration = std::time::Duration::from_millis(50);

/// The benchmark.
pub(super) async fn latency(args: &BinlogArgs, server: &BenchServer) -> Result<(), BoxError> {
    let url = server.database(DATABASE).await?;
    let db = connect(&url, u32::try_from(MAX_PRODUCERS + 8)?).await?;
    let outbox = Outbox::builder()
        .outbox_table(OUTBOX)
        .inbox_table("lat_inbox")
        .build()?;
    outbox_seaorm::schema::install(&db, &outbox).await?;
    for &kind in &args.publishers {
        let sink = Sink::connect(kind, &args.nats_url).await?;
        println!(
            "commit -> publisher confirmation, publisher {kind:?}, one event per unit of work, \
             {}/s for {} s, the log relay with its defaults, the polling relay polling every \
             {POLL_INTERVAL:?}",
            args.rate, args.seconds
        );
        println!(
            "{:>8}  {:>9}  {:>8}  {:>6}  {:>8}  {:>8}  {:>8}  {:>9}  {:>8}  verdict",
            "rate/s",
            "achieved",
            "events",
            "early%",
            "p50 ms",
            "p99 ms",
            "max ms",
            "backlog/s",
            "backlog"
        );
        for relay in ["(a) polling relay", "(b) log relay"] {
            let (publisher, destination) = sink.fresh().await?;
            let recorder = Arc::new(Recorder::new(publisher, true));
            let shutdown = CancellationToken::new();
            let running = if relay.starts_with("(a)") {
                let relay = Relay::builder(db.clone(), outbox.clone(), Arc::clone(&recorder))
                    .instance_id("bench-latency-poll")
                    .poll_interval(POLL_INTERVAL)
                    .build()?;
                let shutdown = shutdown.clone();
                tokio::spawn(
                    async move { relay.run(shutdown).await.map(drop).map_err(BoxError::from) },
                )
            } else {
                let relay = LogRelay::builder(db.clone(), outbox.clone(), Arc::clone(&recorder))
                    .slot(SLOT)
                    .connection_url(&url)
                    .build()?;
                let running = {
                    let shutdown = shutdown.clone();
                    tokio::spawn(async move {
                        relay.run(shutdown).await.map(drop).map_err(BoxError::from)
                    })
                };
                server::wait_backfilled(&db, &format!("{OUTBOX}_log_slots"), SLOT).await?;
                running
            };
            let result = async {
                // Warm-up: connections, prepared statements, the relay's first batches.
                step(&db, &outbox, &recorder, args.rate, 1.0).await?;
                let fixed = step(&db, &outbox, &recorder, args.rate, args.seconds).await?;
                fixed.print();
                println!(
                    "latency {relay} ({kind:?}) at {}/s for {} s: p50 {:.2} ms, p99 {:.2} ms, \
                     max {:.2} ms (target for the log relay: p99 <= 10 ms at 1 000/s)",
                    args.rate,
                    args.seconds,
                    ms(percentile(&fixed.latencies, 0.50)),
                    ms(percentile(&fixed.latencies, 0.99)),
                    ms(fixed.latencies.last().copied().unwrap_or_default()),
                );
                Ok::<_, BoxError>(())
            }
            .await;
            shutdown.cancel();
            running.await??;
            destination.delete().await?;
            result?;
        }
    }
    db.close().await?;
    Ok(())
}
