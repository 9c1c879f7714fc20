//! `binlog --part drain`: N committed events published by the polling relay (a), by the
//! log relay on the binary log (b), and counted by the raw binlog dump (c); see the
//! [parent module](super).

use std::sync::Arc;
use std::time::{Duration, Instant};

use outbox_seaorm::Outbox;
use outbox_seaorm::relay::Relay;
use outbox_seaorm::relay::log::LogRelay;
use sea_orm::{ConnectionTrait, DatabaseConnection};
use tokio_util::sync::CancellationToken;

use super::server::{self, BenchServer};
use super::{BinlogArgs, raw};
use crate::log::publisher::{Recorder, Sink};
use crate::log::{BoxError, connect, events};
use crate::measure::median;

/// The log relay's and the raw dump's outbox, and its database.
const LOG_OUTBOX: &str = "log_outbox";
const LOG_DATABASE: &str = "bench_binlog";
/// The polling relay's outbox, in a database of its own.
const POLL_OUTBOX: &str = "poll_outbox";
const POLL_DATABASE: &str = "bench_polled";
/// The log relay's slot.
const SLOT: &str = "bench_binlog";
/// Longest wait for one measurement.
const LIMIT: Duration = Duration::from_secs(600);

/// The modes, in their column order.
const MODES: [&str; 3] = ["(a) polling", "(b) log relay", "(c) raw dump"];

/// One measurement: events/s, ms to the first event, CPU µs per event of this process and
/// of the server.
#[derive(Debug, Clone, Copy)]
struct Measured {
    rate: f64,
    first_ms: f64,
    client_us: f64,
    server_us: f64,
}

/// CPU time of this process and of the server at one instant.
struct Sample {
    client: Duration,
    server: Duration,
}

struct Bench<'a> {
    args: &'a BinlogArgs,
    server: &'a BenchServer,
    per_commit: usize,
    db: DatabaseConnection,
    url: String,
    outbox: Outbox,
    poll_db: DatabaseConnection,
    polled: Outbox,
}

fn outbox(table: &str, inbox: &str) -> Result<Outbox, BoxError> {
    Ok(Outbox::builder()
        .outbox_table(table)
        .inbox_table(inbox)
        .build()?)
}

impl Bench<'_> {
    fn sample(&self) -> Sample {
        Sample {
            client: crate::measure::task_cpu("self").unwrap_or_default(),
            server: self.server.cpu(),
        }
    }

    fn measured(&self, times: (Instant, Instant, Instant), before: &Sample) -> Measured {
        let after = self.sample();
        let (started, first, ended) = times;
        let events = self.args.rows as f64;
        let us = |later: Duration, earlier: Duration| {
            later.saturating_sub(earlier).as_secs_f64() * 1e6 / events
        };
        Measured {
            rate: events / ended.duration_since(started).as_secs_f64(),
            first_ms: first.saturating_duration_since(started).as_secs_f64() * 1000.0,
            client_us: us(after.client, before.client),
            server_us: us(after.server, before.server),
        }
    }

    fn log_relay(&self, publisher: Arc<Recorder>) -> Result<LogRelay<Arc<Recorder>>, BoxError> {
        Ok(
            LogRelay::builder(self.db.clone(), self.outbox.clone(), publisher)
                .slot(SLOT)
                .connection_url(&self.url)
                .batch_size(self.args.batch_size)
                .build()?,
        )
    }

    fn slots_table(&self) -> String {
        format!("{LOG_OUTBOX}_log_slots")
    }

    /// The slot's first start on the empty outbox (its backfill), stopped once done.
    async fn create_slot(&self) -> Result<(), BoxError> {
        let recorder = Arc::new(Recorder::new(
            crate::log::publisher::AnyPublisher::Noop,
            false,
        ));
        let shutdown = CancellationToken::new();
        let running = tokio::spawn(self.log_relay(recorder)?.run(shutdown.clone()));
        let backfilled = server::wait_backfilled(&self.db, &self.slots_table(), SLOT).await;
        shutdown.cancel();
        running.await??;
        backfilled
    }

    /// The events of one round: N fresh rows in the polled table, then N inserts in the
    /// log outbox; returns the binlog position right before the latter.
    async fn write_events(&self) -> Result<String, BoxError> {
        self.poll_db
            .execute_unprepared(&format!("TRUNCATE {POLL_OUTBOX}"))
            .await?;
        events::write(
            &self.poll_db,
            &self.polled,
            self.args.rows,
            self.args.clients,
            self.per_commit,
        )
        .await?;
        self.db
            .execute_unprepared(&format!("TRUNCATE {LOG_OUTBOX}"))
            .await?;
        let position = server::binlog_position(&self.db).await?;
        events::write(
            &self.db,
            &self.outbox,
            self.args.rows,
            self.args.clients,
            self.per_commit,
        )
        .await?;
        Ok(position)
    }

    /// (a): `Relay::drain()` on the polled table.
    async fn polling(&self, sink: &Sink) -> Result<Measured, BoxError> {
        let (publisher, destination) = sink.fresh().await?;
        let recorder = Arc::new(Recorder::new(publisher, false));
        let mut relay = Relay::builder(
            self.poll_db.clone(),
            self.polled.clone(),
            Arc::clone(&recorder),
        )
        .instance_id("bench-poll")
        .batch_size(self.args.poll_batch_size)
        .retention(Some(Duration::ZERO))
        .build()?;
        relay.refresh_leases().await?;
        let before = self.sample();
        let started = Instant::now();
        let report = relay.drain().await?;
        let ended = Instant::now();
        let measured = self.measured((started, recorder.first().unwrap_or(ended), ended), &before);
        destination.delete().await?;
        if report.published != self.args.rows {
            return Err(format!(
                "polling relay: published {} of {}",
                report.published, self.args.rows
            )
            .into());
        }
        Ok(measured)
    }

    /// (b): the log relay from `position` until the publisher confirmed N events.
    async fn log(
        &self,
        sink: &Sink,
        position: &str,
        round_start: chrono::DateTime<chrono::Utc>,
    ) -> Result<Measured, BoxError> {
        server::store_position(&self.db, &self.slots_table(), SLOT, position).await?;
        let (publisher, destination) = sink.fresh().await?;
        let recorder = Arc::new(Recorder::new(publisher, false));
        recorder.not_before(round_start);
        let relay = self.log_relay(Arc::clone(&recorder))?;
        let shutdown = CancellationToken::new();
        let before = self.sample();
        let started = Instant::now();
        let running = tokio::spawn(relay.run(shutdown.clone()));
        let done = recorder.wait_for(self.args.rows, LIMIT).await;
        let ended = Instant::now();
        let measured = self.measured((started, recorder.first().unwrap_or(ended), ended), &before);
        shutdown.cancel();
        let report = running.await??;
        destination.delete().await?;
        if !done || recorder.stale() > 0 {
            return Err(format!(
                "log relay: confirmed {} of {} ({} of an earlier round); {report:?}",
                recorder.confirmed(),
                self.args.rows,
                recorder.stale()
            )
            .into());
        }
        Ok(measured)
    }

    /// (c): the raw dump from `position` until it decoded N inserted rows.
    async fn raw(&self, position: &str) -> Result<Measured, BoxError> {
        let before = self.sample();
        let started = Instant::now();
        let (first, ended) = raw::count(
            &self.url,
            position,
            LOG_DATABASE,
            LOG_OUTBOX,
            self.args.rows,
        )
        .await?;
        Ok(self.measured((started, first, ended), &before))
    }
}

/// The drain with `per_commit` events per unit of work.
pub(super) async fn drain(
    args: &BinlogArgs,
    server: &BenchServer,
    per_commit: usize,
) -> Result<(), BoxError> {
    let connections = u32::try_from(args.clients + 8)?;
    let url = server.database(LOG_DATABASE).await?;
    let poll_url = server.database(POLL_DATABASE).await?;
    let bench = Bench {
        args,
        server,
        per_commit,
        db: connect(&url, connections).await?,
        url,
        outbox: outbox(LOG_OUTBOX, "log_inbox")?,
        poll_db: connect(&poll_url, connections).await?,
        polled: outbox(POLL_OUTBOX, "poll_inbox")?,
    };
    outbox_seaorm::schema::install(&bench.db, &bench.outbox).await?;
    outbox_seaorm::schema::install(&bench.poll_db, &bench.polled).await?;
    bench.create_slot().await?;
    for &kind in &args.publishers {
        let sink = Sink::connect(kind, &args.nats_url).await?;
        println!(
            "drain {} events ({per_commit} per unit of work, written by {} clients before each \
             round), publisher {kind:?}; log relay batch {}, polling relay batch {} \
             (published rows deleted); events/s from each start to the last confirmation",
            args.rows, args.clients, args.batch_size, args.poll_batch_size
        );
        println!(
            "{:>5}  {:>14}  {:>14}  {:>14}  {:>6}  {:>6}   CPU µs/event client+mariadbd, ms to the 1st event: a | b | c",
            "round", MODES[0], MODES[1], MODES[2], "b/a", "b/c"
        );
        let mut ratios = (Vec::new(), Vec::new());
        let mut all: [Vec<Measured>; 3] = Default::default();
        for round in 0..args.rounds.max(1) {
            let round_start = chrono::Utc::now();
            let position = bench.write_events().await?;
            let mut measured = [None; 3];
            for step in 0..MODES.len() {
                let which = (round + step) % MODES.len();
                measured[which] = Some(match which {
                    0 => bench.polling(&sink).await?,
                    1 => bench.log(&sink, &position, round_start).await?,
                    _ => bench.raw(&position).await?,
                });
            }
            let [Some(a), Some(b), Some(c)] = measured else {
                return Err("a mode did not run".into());
            };
            ratios.0.push(b.rate / a.rate);
            ratios.1.push(b.rate / c.rate);
            println!(
                "{round:>5}  {:>14.0}  {:>14.0}  {:>14.0}  {:>6.3}  {:>6.3}   {}",
                a.rate,
                b.rate,
                c.rate,
                b.rate / a.rate,
                b.rate / c.rate,
                [a, b, c].map(|m| cpu_text(&m)).join(" | ")
            );
            for (which, value) in [a, b, c].into_iter().enumerate() {
                all[which].push(value);
            }
        }
        let med = |values: &[Measured], field: fn(&Measured) -> f64| {
            median(&mut values.iter().map(field).collect::<Vec<_>>()).unwrap_or(f64::NAN)
        };
        let cpu = all.each_ref().map(|values| {
            cpu_text(&Measured {
                rate: med(values, |m| m.rate),
                first_ms: med(values, |m| m.first_ms),
                client_us: med(values, |m| m.client_us),
                server_us: med(values, |m| m.server_us),
            })
        });
        let (ba, bc) = (
            median(&mut ratios.0).unwrap_or(f64::NAN),
            median(&mut ratios.1).unwrap_or(f64::NAN),
        );
        println!(
            "{:>5}  {:>14.0}  {:>14.0}  {:>14.0}  {ba:>6.3}  {bc:>6.3}   {}",
            "med",
            med(&all[0], |m| m.rate),
            med(&all[1], |m| m.rate),
            med(&all[2], |m| m.rate),
            cpu.join(" | ")
        );
        println!(
            "binlog drain ({kind:?}, {per_commit}/unit of work): median b/a = {ba:.3} (target >= \
             1.0 with ten events per unit of work), median b/c = {bc:.3}"
        );
    }
    bench.db.close().await?;
    bench.poll_db.close().await?;
    Ok(())
}

/// `client+mariadbd` µs per event and the ms to the first event.
fn cpu_text(m: &Measured) -> String {
    format!("{:.1}+{:.1} {:.0}ms", m.client_us, m.server_us, m.first_ms)
}
