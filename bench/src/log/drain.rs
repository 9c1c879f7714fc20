//! `log --part drain`: N committed events published by the polling relay (a), by the log
//! relay (b), and consumed by the raw pgoutput loop (c); see the [parent module](super).

use std::sync::Arc;
use std::time::{Duration, Instant};

use outbox_seaorm::relay::Relay;
use outbox_seaorm::relay::log::LogRelay;
use outbox_seaorm::{Outbox, PostgresWakeup};
use sea_orm::DatabaseConnection;
use sea_orm::sqlx::{self, PgPool};
use tokio_util::sync::CancellationToken;

use super::cpu::{Cpu, PerEvent, Sample};
use super::publisher::{AnyPublisher, Recorder, Sink};
use super::raw::RawStream;
use super::{BoxError, LogArgs, connect, events, raw, server};
use crate::measure::median;

/// The log relay's and the raw loop's outbox (in the slots' database).
const LOG_OUTBOX: &str = "log_outbox";
/// The polling relay's outbox (in a database of its own).
const POLL_OUTBOX: &str = "poll_outbox";
/// The log relay's slot.
const SLOT: &str = "bench_log";
/// Longest wait for one measurement.
const LIMIT: Duration = Duration::from_secs(600);

/// The modes, in their column order.
const MODES: [&str; 3] = ["(a) polling", "(b) log relay", "(c) raw pgoutput"];

/// One measurement: events/s, the time to the first event, CPU per event.
#[derive(Debug, Clone, Copy)]
struct Measured {
    rate: f64,
    /// From the start to the first event confirmed (counted, for the raw loop), in ms.
    first_ms: f64,
    /// Events per `publish` call (NaN for the raw loop).
    per_call: f64,
    cpu: PerEvent,
}

impl Measured {
    fn new(
        events: usize,
        (started, first, ended): (Instant, Option<Instant>, Instant),
        before: &Sample,
        after: &Sample,
    ) -> Self {
        let first_ms = first.map_or(f64::NAN, |first| {
            first.saturating_duration_since(started).as_secs_f64() * 1000.0
        });
        Self {
            rate: events as f64 / ended.duration_since(started).as_secs_f64(),
            first_ms,
            per_call: f64::NAN,
            cpu: after.per_event(before, events),
        }
    }
}

/// `client+server(walsender)[+broker]` µs per event, the ms to the first event, and the
/// events per `publish` call.
fn cpu_text(cpu: &PerEvent, first_ms: f64, per_call: f64) -> String {
    let PerEvent {
        client,
        server,
        walsender,
        broker,
    } = cpu;
    let broker = if *broker > 0.0 {
        format!("+{broker:.1}")
    } else {
        String::new()
    };
    let per_call = if per_call.is_nan() {
        String::new()
    } else {
        format!(" {per_call:.0}/call")
    };
    format!("{client:.1}+{server:.1}({walsender:.1}){broker} {first_ms:.0}ms{per_call}")
}

struct Bench<'a> {
    args: &'a LogArgs,
    db: DatabaseConnection,
    pool: PgPool,
    outbox: Outbox,
    poll_db: DatabaseConnection,
    poll_pool: PgPool,
    polled: Outbox,
    cpu: Cpu,
    url: String,
}

fn outbox(table: &str, inbox: &str) -> Result<Outbox, BoxError> {
    Ok(Outbox::builder()
        .outbox_table(table)
        .inbox_table(inbox)
        .postgres_wakeup(PostgresWakeup::Off)
        .build()?)
}

impl Bench<'_> {
    fn log_relay(&self, publisher: Arc<Recorder>) -> Result<LogRelay<Arc<Recorder>>, BoxError> {
        Ok(
            LogRelay::builder(self.db.clone(), self.outbox.clone(), publisher)
                .slot(SLOT)
                .batch_size(self.args.batch_size)
                .build()?,
        )
    }

    /// Creates the log relay's slot: a first run on the empty outbox, stopped once it
    /// streams.
    async fn create_slot(&self) -> Result<(), BoxError> {
        let recorder = Arc::new(Recorder::new(AnyPublisher::Noop, false));
        let shutdown = CancellationToken::new();
        let running = tokio::spawn(self.log_relay(recorder)?.run(shutdown.clone()));
        let streaming = server::wait_streaming(&self.pool, SLOT).await;
        shutdown.cancel();
        running.await??;
        streaming?;
        server::wait_released(&self.pool, SLOT).await
    }

    /// The events of one round: N fresh rows in the polled table (vacuumed); the two slots
    /// moved past that WAL (it belongs to another database, and to the benchmark rather than
    /// to the log relay: each stream then starts right before its N events); N inserts in
    /// the log outbox; a checkpoint.
    async fn write_events(&self) -> Result<(), BoxError> {
        let args = self.args;
        let clients = args.clients.iter().copied().max().unwrap_or(16);
        sqlx::query("TRUNCATE poll_outbox")
            .execute(&self.poll_pool)
            .await?;
        events::write(
            &self.poll_db,
            &self.polled,
            args.rows,
            clients,
            args.events_per_commit,
        )
        .await?;
        sqlx::query("VACUUM ANALYZE poll_outbox")
            .execute(&self.poll_pool)
            .await?;
        sqlx::query("TRUNCATE log_outbox")
            .execute(&self.pool)
            .await?;
        // The checkpoint logs the running transactions, from where the slots' restart
        // position can move on too.
        server::checkpoint(&self.pool).await?;
        for slot in [SLOT, raw::SLOT] {
            server::advance_slot(&self.pool, slot).await?;
        }
        events::write(
            &self.db,
            &self.outbox,
            args.rows,
            clients,
            args.events_per_commit,
        )
        .await?;
        server::checkpoint(&self.pool).await
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
        .listen(false)
        .retention(Some(Duration::ZERO))
        .build()?;
        relay.refresh_leases().await?;
        let before = self.cpu.sample();
        let started = Instant::now();
        let report = relay.drain().await?;
        let ended = Instant::now();
        let after = self.cpu.sample();
        destination.delete().await?;
        if report.published != self.args.rows {
            return Err(format!(
                "polling relay: published {} of {}",
                report.published, self.args.rows
            )
            .into());
        }
        let times = (started, recorder.first(), ended);
        Ok(Measured {
            per_call: recorder.confirmed() as f64 / recorder.calls().max(1) as f64,
            ..Measured::new(self.args.rows, times, &before, &after)
        })
    }

    /// (b): the log relay from its start until the publisher confirmed N events.
    async fn log(
        &self,
        sink: &Sink,
        round_start: chrono::DateTime<chrono::Utc>,
    ) -> Result<Measured, BoxError> {
        let (publisher, destination) = sink.fresh().await?;
        let recorder = Arc::new(Recorder::new(publisher, false));
        recorder.not_before(round_start);
        let relay = self.log_relay(Arc::clone(&recorder))?;
        let shutdown = CancellationToken::new();
        let before = self.cpu.sample();
        let started = Instant::now();
        let running = tokio::spawn(relay.run(shutdown.clone()));
        let done = recorder.wait_for(self.args.rows, LIMIT).await;
        let ended = Instant::now();
        let after = self.cpu.sample();
        shutdown.cancel();
        let report = running.await??;
        server::wait_released(&self.pool, SLOT).await?;
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
        let times = (started, recorder.first(), ended);
        Ok(Measured {
            per_call: recorder.confirmed() as f64 / recorder.calls().max(1) as f64,
            ..Measured::new(self.args.rows, times, &before, &after)
        })
    }

    /// (c): the raw loop from its connection until it counted N inserts.
    async fn raw(&self) -> Result<Measured, BoxError> {
        let before = self.cpu.sample();
        let started = Instant::now();
        let mut stream = RawStream::start(&self.url).await?;
        stream.count(LOG_OUTBOX, self.args.rows).await?;
        let ended = Instant::now();
        let after = self.cpu.sample();
        let times = (started, stream.first(), ended);
        stream.close().await?;
        server::wait_released(&self.pool, raw::SLOT).await?;
        Ok(Measured::new(self.args.rows, times, &before, &after))
    }
}

/// The benchmark.
pub(super) async fn drain(args: &LogArgs, url: &str, poll_url: &str) -> Result<(), BoxError> {
    let clients = args.clients.iter().copied().max().unwrap_or(16);
    let connections = u32::try_from(clients + 8)?;
    let db = connect(url, connections).await?;
    let poll_db = connect(poll_url, connections).await?;
    let bench = Bench {
        args,
        pool: db.get_postgres_connection_pool().clone(),
        poll_pool: poll_db.get_postgres_connection_pool().clone(),
        outbox: outbox(LOG_OUTBOX, "log_inbox")?,
        polled: outbox(POLL_OUTBOX, "poll_inbox")?,
        cpu: Cpu::of(db.get_postgres_connection_pool()).await?,
        url: url.to_owned(),
        db,
        poll_db,
    };
    outbox_seaorm::schema::install(&bench.db, &bench.outbox).await?;
    outbox_seaorm::schema::install(&bench.poll_db, &bench.polled).await?;
    bench.create_slot().await?;
    raw::create(&bench.pool, LOG_OUTBOX).await?;
    for &kind in &args.publishers {
        let sink = Sink::connect(kind, &args.nats_url).await?;
        println!(
            "drain {} events ({} per unit of work, written by {clients} clients before each \
             round), publisher {kind:?}; log relay batch {}, polling relay batch {} \
             (published rows deleted); events/s from each start to the last confirmation",
            args.rows, args.events_per_commit, args.batch_size, args.poll_batch_size
        );
        println!(
            "{:>5}  {:>16}  {:>16}  {:>16}  {:>6}  {:>6}   CPU µs/event client+server(walsender)+NATS, to the 1st event, events/publish: a | b | c",
            "round", MODES[0], MODES[1], MODES[2], "b/a", "b/c"
        );
        let mut ratios = (Vec::new(), Vec::new());
        let mut all: [Vec<Measured>; 3] = Default::default();
        for round in 0..args.rounds.max(1) {
            let round_start = chrono::Utc::now();
            bench.write_events().await?;
            let mut measured = [None; 3];
            for step in 0..MODES.len() {
                let which = (round + step) % MODES.len();
                measured[which] = Some(match which {
                    0 => bench.polling(&sink).await?,
                    1 => bench.log(&sink, round_start).await?,
                    _ => bench.raw().await?,
                });
            }
            let [Some(a), Some(b), Some(c)] = measured else {
                return Err("a mode did not run".into());
            };
            ratios.0.push(b.rate / a.rate);
            ratios.1.push(b.rate / c.rate);
            let cpu = [a, b, c].map(|m| cpu_text(&m.cpu, m.first_ms, m.per_call));
            println!(
                "{round:>5}  {:>16.0}  {:>16.0}  {:>16.0}  {:>6.3}  {:>6.3}   {}",
                a.rate,
                b.rate,
                c.rate,
                b.rate / a.rate,
                b.rate / c.rate,
                cpu.join(" | ")
            );
            for (which, value) in [a, b, c].into_iter().enumerate() {
                all[which].push(value);
            }
        }
        let med = |values: &[Measured], field: fn(&Measured) -> f64| {
            median(&mut values.iter().map(field).collect::<Vec<_>>()).unwrap_or(f64::NAN)
        };
        let cpu = all.each_ref().map(|values| {
            let cpu = PerEvent {
                client: med(values, |m| m.cpu.client),
                server: med(values, |m| m.cpu.server),
                walsender: med(values, |m| m.cpu.walsender),
                broker: med(values, |m| m.cpu.broker),
            };
            cpu_text(
                &cpu,
                med(values, |m| m.first_ms),
                med(values, |m| m.per_call),
            )
        });
        println!(
            "{:>5}  {:>16.0}  {:>16.0}  {:>16.0}  {:>6.3}  {:>6.3}   {}",
            "med",
            med(&all[0], |m| m.rate),
            med(&all[1], |m| m.rate),
            med(&all[2], |m| m.rate),
            median(&mut ratios.0).unwrap_or(f64::NAN),
            median(&mut ratios.1).unwrap_or(f64::NAN),
            cpu.join(" | ")
        );
        println!(
            "drain ({kind:?}): median b/a = {:.3} (target >= 1.5 with the no-op publisher), \
             median b/c = {:.3} (target >= 0.9)",
            median(&mut ratios.0).unwrap_or(f64::NAN),
            median(&mut ratios.1).unwrap_or(f64::NAN)
        );
    }
    bench.db.close().await?;
    bench.poll_db.close().await?;
    Ok(())
}
