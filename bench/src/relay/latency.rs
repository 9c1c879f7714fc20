//! `relay --part latency`: commit-to-publish latency with `NOTIFY` and with polling only.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use outbox_core::Raise;
use outbox_core::in_process::InProcessBroker;
use outbox_seaorm::Outbox;
use outbox_seaorm::relay::Relay;
use sea_orm::DatabaseConnection;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::{BenchContracts, BenchEvent, BoxError, RelayArgs, placed};
use crate::measure::percentile;

pub(super) async fn latency(db: &DatabaseConnection, args: &RelayArgs) -> Result<(), BoxError> {
    let outbox = Outbox::builder()
        .outbox_table("lat_outbox")
        .inbox_table("lat_inbox")
        .notify_channel(Some("lat_outbox_pending"))
        .build()?;
    outbox_seaorm::schema::install(db, &outbox).await?;
    println!(
        "commit-to-publish latency at {} events/s for {} s (one event per commit), PostgreSQL",
        args.rate, args.seconds
    );
    println!(
        "{:>28}  {:>7}  {:>9}  {:>9}  {:>9}",
        "mode", "events", "p50", "p99", "max"
    );
    for (mode, listen, poll) in [
        ("NOTIFY (poll 1 s)", true, Duration::from_secs(1)),
        ("polling only", false, Duration::from_millis(args.poll_ms)),
    ] {
        let broker = InProcessBroker::new();
        let mut received = broker.subscribe();
        let arrivals: Arc<Mutex<HashMap<Uuid, Instant>>> = Arc::default();
        let collector = tokio::spawn({
            let arrivals = Arc::clone(&arrivals);
            async move {
                while let Ok(envelope) = received.recv().await {
                    let now = Instant::now();
                    if let Ok(mut arrivals) = arrivals.lock() {
                        arrivals.insert(envelope.message_id, now);
                    }
                }
            }
        });
        let shutdown = CancellationToken::new();
        let relay = Relay::builder(db.clone(), outbox.clone(), broker.clone())
            .poll_interval(poll)
            .listen(listen)
            .retention(None)
            .build()?;
        let running = tokio::spawn(relay.run(shutdown.clone()));
        tokio::time::sleep(Duration::from_millis(500)).await;
        let producers = 8u32;
        let per_producer =
            Duration::from_secs_f64(f64::from(producers) / f64::from(args.rate.max(1)));
        let deadline = Instant::now() + Duration::from_secs_f64(args.seconds);
        let mut tasks = Vec::new();
        for _ in 0..producers {
            let (db, outbox) = (db.clone(), outbox.clone());
            tasks.push(tokio::spawn(async move {
                let mut committed = Vec::new();
                let mut tick = tokio::time::interval(per_producer);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                while Instant::now() < deadline {
                    tick.tick().await;
                    let uow = outbox.begin(&db, &BenchContracts).await?;
                    uow.raise(BenchEvent::Placed(placed()));
                    let report = uow.commit().await?;
                    let at = Instant::now();
                    committed.extend(report.message_ids.into_iter().map(|id| (id, at)));
                }
                Ok::<_, BoxError>(committed)
            }));
        }
        let mut committed = Vec::new();
        for task in tasks {
            committed.extend(task.await??);
        }
        let _ = broker
            .wait_for_published(committed.len(), Duration::from_secs(10))
            .await;
        shutdown.cancel();
        running.await??;
        collector.abort();
        let arrivals = arrivals.lock().map_err(|_| "poisoned")?.clone();
        let mut latencies: Vec<Duration> = committed
            .iter()
            .filter_map(|(id, at)| {
                arrivals
                    .get(id)
                    .map(|got| got.saturating_duration_since(*at))
            })
            .collect();
        latencies.sort();
        let ms = |d: Duration| format!("{:.2} ms", d.as_secs_f64() * 1000.0);
        println!(
            "{mode:>28}  {:>7}  {:>9}  {:>9}  {:>9}",
            latencies.len(),
            ms(percentile(&latencies, 0.50)),
            ms(percentile(&latencies, 0.99)),
            ms(latencies.last().copied().unwrap_or_default())
        );
        if latencies.len() != committed.len() {
            println!(
                "  ({} of {} events not published)",
                committed.len() - latencies.len(),
                committed.len()
            );
        }
    }
    println!("latency targets with NOTIFY: p50 <= 5 ms, p99 <= 25 ms");
    Ok(())
}
