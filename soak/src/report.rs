//! The soak's report: what ran, what the killer did, what the verifier found.

use std::fmt;
use std::time::Duration;

use serde::Serialize;

use crate::chaos::{ChaosCounts, Faults};
use crate::takeover::TakeoverStats;
use crate::verify::Verdict;

/// The partitioned mode of a soak (`--partitions`).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Partitioned {
    /// The partitions.
    pub partitions: u32,
    /// The consumer processes sharing them.
    pub consumers: u32,
    /// How long killed consumers' partitions took to be held by another instance (`None`:
    /// Kafka, whose group assignment the soak does not watch).
    pub takeovers: Option<TakeoverStats>,
}

/// One soak's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The broker.
    pub broker: String,
    /// The relay method.
    pub relay: String,
    /// The faults brought.
    pub faults: Faults,
    /// The seed of the chaos schedule (repeat a run with `--seed`).
    pub seed: u64,
    /// How long the chaos lasted, in seconds.
    pub chaos_seconds: f64,
    /// Time from the end of the chaos until the system was quiet, in seconds (`None`: it
    /// was not quiet within the bound).
    pub quiesce_seconds: Option<f64>,
    /// What the killer did.
    pub chaos: ChaosCounts,
    /// Children that exited without being killed (each restarted).
    pub unexpected_exits: u64,
    /// What the verifier found.
    pub verdict: Verdict,
    /// Orders committed per second of chaos.
    pub orders_per_second: f64,
    /// Effects applied per second, from the start until quiet.
    pub effects_per_second: f64,
    /// The partitioned mode, when it ran.
    pub partitioned: Option<Partitioned>,
}

impl Report {
    /// Builds the report; throughput from the counts and the durations.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        broker: &str,
        relay: &str,
        faults: Faults,
        seed: u64,
        chaos: Duration,
        quiesce: Option<Duration>,
        counts: ChaosCounts,
        unexpected_exits: u64,
        verdict: Verdict,
    ) -> Self {
        let chaos_seconds = chaos.as_secs_f64();
        let until_quiet = chaos_seconds + quiesce.map_or(0.0, |q| q.as_secs_f64());
        Self {
            broker: broker.to_owned(),
            relay: relay.to_owned(),
            faults,
            seed,
            chaos_seconds,
            quiesce_seconds: quiesce.map(|q| q.as_secs_f64()),
            chaos: counts,
            unexpected_exits,
            orders_per_second: verdict.orders as f64 / chaos_seconds.max(0.001),
            effects_per_second: verdict.effects as f64 / until_quiet.max(0.001),
            verdict,
            partitioned: None,
        }
    }

    /// Whether the soak passed: quiet in time and every count that must be 0 is (in the
    /// partitioned mode, every killed consumer's partitions were taken over).
    pub fn passed(&self) -> bool {
        self.quiesce_seconds.is_some()
            && self.verdict.passed()
            && self
                .partitioned
                .and_then(|p| p.takeovers)
                .is_none_or(|t| t.unseen == 0)
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = &self.verdict;
        let c = &self.chaos;
        writeln!(
            f,
            "soak: {} broker, {} relay, seed {}",
            self.broker, self.relay, self.seed
        )?;
        writeln!(f, "  chaos                {:.1} s", self.chaos_seconds)?;
        match self.quiesce_seconds {
            Some(q) => writeln!(f, "  time to quiesce      {q:.1} s")?,
            None => writeln!(f, "  time to quiesce      NOT QUIET within the bound")?,
        }
        writeln!(f, "  orders committed     {}", v.orders)?;
        writeln!(f, "  effects applied      {}", v.effects)?;
        writeln!(f, "  duplicate effects    {}", v.duplicates)?;
        writeln!(f, "  missing effects      {}", v.missing)?;
        writeln!(f, "  phantom effects      {}", v.phantoms)?;
        writeln!(f, "  order violations     {}", v.order_violations)?;
        writeln!(f, "  unpublished rows     {}", v.unpublished)?;
        writeln!(f, "  dead letters         {}", v.dead_letters)?;
        writeln!(
            f,
            "  kills                {} relay, {} consumer, {} producer",
            c.relay_kills, c.consumer_kills, c.producer_kills
        )?;
        if self.faults.broker_restarts {
            writeln!(f, "  broker restarts      {}", c.broker_restarts)?;
        } else {
            writeln!(f, "  broker restarts      off (--no-broker-restarts)")?;
        }
        writeln!(
            f,
            "  backend terminations {} (PostgreSQL backends, or MariaDB binlog dumps KILLed)",
            c.backend_terminations
        )?;
        if self.faults.consumer_pauses {
            writeln!(
                f,
                "  consumer pauses      {} (SIGSTOP past the lease TTL, then SIGCONT)",
                c.consumer_pauses
            )?;
        }
        writeln!(f, "  unexpected exits     {}", self.unexpected_exits)?;
        if let Some(p) = &self.partitioned {
            writeln!(
                f,
                "  partitioned          {} partitions over {} consumers",
                p.partitions, p.consumers
            )?;
            match &p.takeovers {
                Some(t) => writeln!(
                    f,
                    "  takeovers            {} measured (median {:.1} s, max {:.1} s), {} not seen",
                    t.measured, t.median_seconds, t.max_seconds, t.unseen
                )?,
                None => writeln!(
                    f,
                    "  takeovers            not watched (the consumer group assigns partitions)"
                )?,
            }
        }
        writeln!(
            f,
            "  throughput           {:.0} orders/s placed, {:.0} effects/s applied",
            self.orders_per_second, self.effects_per_second
        )?;
        write!(
            f,
            "  result               {}",
            if self.passed() { "PASSED" } else { "FAILED" }
        )
    }
}
