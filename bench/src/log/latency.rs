//! `log --part latency`: commit → publisher confirmation through the log relay at a fixed
//! rate, then the highest rate it sustains; see the [parent module](super).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use outbox_seaorm::relay::log::LogRelay;
use outbox_seaorm::{Outbox, PostgresWakeup};
use sea_orm::DatabaseConnection;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::publisher::{Recorder, Sink};
use super::{BoxError, LogArgs, connect, events, server};

/// The outbox of the latency benchmark.
const OUTBOX: &str = "lat_outbox";
/// Its log relay's slot.
const SLOT: &str = "bench_lat";
/// Most producers at once (each one commits at `rate / producers`).
pub(crate) const MAX_PRODUCERS: usize = 64;
/// Backlog samples per second.
const SAMPLES_PER_SECOND: u32 = 10;

pub(crate) use crate::measure::percentile;

pub(crate) fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

/// What one step at a fixed rate gave.
pub(crate) struct Step {
    pub(crate) target: u32,
    /// Commits per second the producers reached.
    pub(crate) achieved: f64,
    /// Commit → confirmation, sorted.
    pub(crate) latencies: Vec<Duration>,
    /// Committed events never confirmed within the wait.
    missing: usize,
    /// Events the publisher confirmed before their `commit()` returned to the producer
    /// (counted as 0 ms: the server wakes its walsenders as it answers the commit).
    early: usize,
    /// Growth of the backlog (committed − confirmed) over the step's second half, events/s.
    slope: f64,
    /// The backlog when the producers stopped.
    end_backlog: usize,
}

impl Step {
    /// Whether the producers reached the rate.
    pub(crate) fn reached(&self) -> bool {
        self.achieved >= 0.95 * f64::from(self.target)
    }

    /// Whether the relay fell behind: its backlog grew by more than 5 % of the rate per
    /// second and held more than 100 ms of events at the end, or events were left over.
    pub(crate) fn behind(&self) -> bool {
        let rate = f64::from(self.target);
        self.missing > 0 || (self.slope > 0.05 * rate && self.end_backlog as f64 > 0.1 * rate)
    }

    pub(crate) fn print(&self) {
        println!(
            "{:>8}  {:>9.0}  {:>8}  {:>6.1}  {:>8.2}  {:>8.2}  {:>8.2}  {:>9.0}  {:>8}  {}",
            self.target,
            self.achieved,
            self.latencies.len(),
            100.0 * self.early as f64 / self.latencies.len().max(1) as f64,
            ms(percentile(&self.latencies, 0.50)),
            ms(percentile(&self.latencies, 0.99)),
            ms(self.latencies.last().copied().unwrap_or_default()),
            if self.slope.abs() < 0.5 {
                0.0
            } else {
                self.slope
            },
            self.end_backlog,
            if self.behind() {
                "relay behind"
            } else if !self.reached() {
                "producers below the rate"
            } else {
                "kept up"
            }
        );
    }
}

/// Least-squares slope of `samples` (seconds, backlog).
fn slope(samples: &[(f64, f64)]) -> f64 {
    let n = samples.len() as f64;
    if samples.len() < 2 {
        return 0.0;
    }
    let (mean_t, mean_b) = samples
        .iter()
        .fold((0.0, 0.0), |(t, b), (ti, bi)| (t + ti / n, b + bi / n));
    let (num, den) = samples.iter().fold((0.0, 0.0), |(num, den), (t, b)| {
        (
            num + (t - mean_t) * (b - mean_b),
            den + (t - mean_t).powi(2),
        )
    });
    if den == 0.0 { 0.0 } else { num / den }
}

/// Producers commit one event per unit of work at `rate` in all for `seconds`, each
/// noting when its `commit()` returned; then waits for every event's confirmation.
pub(crate) async fn step(
    db: &DatabaseConnection,
    outbox: &Outbox,
    recorder: &Recorder,
    rate: u32,
    seconds: f64,
) -> Result<Step, BoxError> {
    recorder.take_arrivals();
    let base = recorder.confirmed();
    let producers = (rate as usize).div_ceil(100).clamp(8, MAX_PRODUCERS);
    let period = Duration::from_secs_f64(producers as f64 / f64::from(rate.max(1)));
    let committed = Arc::new(AtomicUsize::new(0));
    let start = tokio::time::Instant::now();
    let deadline = start + Duration::from_secs_f64(seconds);
    let mut tasks = Vec::with_capacity(producers);
    for producer in 0..producers {
        let (db, outbox, committed) = (db.clone(), outbox.clone(), Arc::clone(&committed));
        // Staggered: the producers' commits are spread over each period.
        let first = start + period.mul_f64(producer as f64 / producers as f64);
        tasks.push(tokio::spawn(async move {
            let mut done: Vec<(Uuid, Instant)> = Vec::new();
            let mut tick = tokio::time::interval_at(first, period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                if tokio::time::Instant::now() >= deadline {
                    return Ok::<_, BoxError>(done);
                }
                let ids = events::commit(&db, &outbox, 1).await?;
                let at = Instant::now();
                committed.fetch_add(ids.len(), Ordering::Relaxed);
                done.extend(ids.into_iter().map(|id| (id, at)));
            }
        }));
    }
    let mut samples = Vec::new();
    let every = Duration::from_secs(1) / SAMPLES_PER_SECOND;
    let mut sample_at = start + every;
    while sample_at < deadline {
        tokio::time::sleep_until(sample_at).await;
        let backlog = committed
            .load(Ordering::Relaxed)
            .saturating_sub(recorder.confirmed() - base);
        samples.push(((sample_at - start).as_secs_f64(), backlog as f64));
        sample_at += every;
    }
    let mut done = Vec::new();
    for task in tasks {
        done.extend(task.await??);
    }
    let end_backlog = done.len().saturating_sub(recorder.confirmed() - base);
    recorder
        .wait_for(base + done.len(), Duration::from_secs(60))
        .await;
    let arrivals = recorder.take_arrivals();
    let mut early = 0;
    let mut latencies: Vec<Duration> = done
        .iter()
        .filter_map(|(id, at)| {
            let got = arrivals.get(id)?;
            early += usize::from(got < at);
            Some(got.saturating_duration_since(*at))
        })
        .collect();
    latencies.sort();
    let second_half = &samples[samples.len() / 2..];
    Ok(Step {
        target: rate,
        achieved: done.len() as f64 / seconds,
        missing: done.len() - latencies.len(),
        early,
        latencies,
        slope: slope(second_half),
        end_backlog,
    })
}

/// The rates of the search after `first`: ×1.5, ×4/3, alternately (1 000, 1 500, 2 000,
/// 3 000, 4 000, …), up to `max`.
pub(crate) fn ladder(first: u32, max: u32) -> Vec<u32> {
    let mut rates = Vec::new();
    let mut rate = u64::from(first.max(1));
    let mut half = true;
    loop {
        rate = if half { rate * 3 / 2 } else { rate * 4 / 3 };
        half = !half;
        match u32::try_from(rate) {
            Ok(next) if next <= max => rates.push(next),
            _ => return rates,
        }
    }
}

/// The benchmark.
pub(super) async fn latency(args: &LogArgs, url: &str) -> Result<(), BoxError> {
    let db = connect(url, u32::try_from(MAX_PRODUCERS + 8)?).await?;
    let pool = db.get_postgres_connection_pool().clone();
    let outbox = Outbox::builder()
        .outbox_table(OUTBOX)
        .inbox_table("lat_inbox")
        .postgres_wakeup(PostgresWakeup::Off)
        .build()?;
    outbox_seaorm::schema::install(&db, &outbox).await?;
    for &kind in &args.publishers {
        let sink = Sink::connect(kind, &args.nats_url).await?;
        let (publisher, destination) = sink.fresh().await?;
        let recorder = Arc::new(Recorder::new(publisher, true));
        let relay = LogRelay::builder(db.clone(), outbox.clone(), Arc::clone(&recorder))
            .slot(SLOT)
            .build()?;
        let shutdown = CancellationToken::new();
        let running = tokio::spawn(relay.run(shutdown.clone()));
        let result = async {
            server::wait_streaming(&pool, SLOT).await?;
            // Warm-up: connections, prepared statements, the relay's first batches.
            step(&db, &outbox, &recorder, args.rate, 1.0).await?;
            println!(
                "commit -> publisher confirmation through the log relay (default settings), \
                 publisher {kind:?}, one event per unit of work"
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
            let fixed = step(&db, &outbox, &recorder, args.rate, args.seconds).await?;
            fixed.print();
            println!(
                "latency ({kind:?}) at {}/s for {} s: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms \
                 (target p99 <= 10 ms at 1 000/s)",
                args.rate,
                args.seconds,
                ms(percentile(&fixed.latencies, 0.50)),
                ms(percentile(&fixed.latencies, 0.99)),
                ms(fixed.latencies.last().copied().unwrap_or_default()),
            );
            let mut best = (!fixed.behind() && fixed.reached()).then_some(fixed);
            let mut limit = "the last rate tried";
            for rate in ladder(args.rate, args.max_rate) {
                let step = step(&db, &outbox, &recorder, rate, args.step_seconds).await?;
                step.print();
                if step.behind() {
                    limit = "the relay fell behind at the next step";
                    break;
                }
                if !step.reached() {
                    limit = "the producers could not reach the next step's rate";
                    break;
                }
                best = Some(step);
            }
            match best {
                Some(best) => println!(
                    "highest sustained rate ({kind:?}): {}/s (achieved {:.0}/s), p50 {:.2} ms, \
                     p99 {:.2} ms, max {:.2} ms; {limit}",
                    best.target,
                    best.achieved,
                    ms(percentile(&best.latencies, 0.50)),
                    ms(percentile(&best.latencies, 0.99)),
                    ms(best.latencies.last().copied().unwrap_or_default()),
                ),
                None => println!("highest sustained rate ({kind:?}): below {}/s", args.rate),
            }
            Ok::<_, BoxError>(())
        }
        .await;
        shutdown.cancel();
        let report = running.await??;
        server::wait_released(&pool, SLOT).await?;
        destination.delete().await?;
        result?;
        println!(
            "log relay: {} published, {} transactions acknowledged, {} heartbeats, {} restarts",
            report.published, report.transactions, report.heartbeats, report.restarts
        );
    }
    db.close().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ladder_steps_up() {
        assert_eq!(
            ladder(1_000, 8_000),
            vec![1_500, 2_000, 3_000, 4_000, 6_000, 8_000]
        );
    }

    #[test]
    fn a_growing_backlog_has_a_positive_slope() {
        let samples: Vec<(f64, f64)> = (0..10)
            .map(|i| (f64::from(i), 3.0 * f64::from(i)))
            .collect();
        assert!((slope(&samples) - 3.0).abs() < 1e-9);
    }
}
