//! The killer: while the chaos lasts, every 1–3 s a random relay or consumer is killed
//! (`SIGKILL`) and started again (in the partitioned mode, the partitions a killed consumer
//! held are watched until another instance holds them: [`Takeovers`]); every 8–15 s the
//! producer is; every 10–20 s the broker server is killed and, 1–2 s later, started again;
//! every 3–6 s PostgreSQL terminates the relays' backends (with the log relay on MariaDB:
//! the server `KILL`s the binlog dump connection the active relay streams from). In the
//! partitioned mode (leases:
//! not Kafka), every 15–30 s a random consumer is also paused (`SIGSTOP`) for 4–6 s, past
//! its lease TTL, then resumed (`SIGCONT`): its partitions are taken over meanwhile, and on
//! resuming it must neither commit nor read behind their new owners. The schedule comes
//! from a seeded generator (`--seed`).

use std::time::{Duration, Instant};

use sea_orm::{ConnectionTrait as _, DatabaseConnection, DbBackend, Statement};
use serde::Serialize;

use crate::broker::BrokerServer;
use crate::error::SoakError;
use crate::process::{Kind, Processes};
use crate::relay::APPLICATION_NAME_PREFIX;
use crate::takeover::Takeovers;

/// Which faults the killer brings (the process kills and backend terminations always).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Faults {
    /// Whether the broker server is killed and restarted.
    pub broker_restarts: bool,
    /// Whether consumers are paused (`SIGSTOP`) past their lease TTL, then resumed
    /// (`SIGCONT`): the partitioned mode.
    pub consumer_pauses: bool,
}

/// How long a paused consumer stays stopped, in milliseconds: past the partitioned mode's
/// lease TTL (3 s), so that its partitions are taken over meanwhile.
const PAUSE_MS: (u64, u64) = (4_000, 6_000);

/// When the chaos ends, its schedule's seed and the faults it brings.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    /// The end of the chaos.
    pub until: Instant,
    /// The seed of the schedule.
    pub seed: u64,
    /// The faults.
    pub faults: Faults,
}

/// What the killer did.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct ChaosCounts {
    /// Relays killed.
    pub relay_kills: u64,
    /// Consumers killed.
    pub consumer_kills: u64,
    /// Producer kills.
    pub producer_kills: u64,
    /// Broker server kills, each followed by a restart.
    pub broker_restarts: u64,
    /// Relay backends PostgreSQL terminated.
    pub backend_terminations: u64,
    /// Consumers paused past their lease TTL and resumed.
    pub consumer_pauses: u64,
}

/// When each kind of fault comes next.
struct Schedule {
    rng: fastrand::Rng,
    kill: Instant,
    producer: Instant,
    broker: Instant,
    terminate: Instant,
    pause: Instant,
}

impl Schedule {
    fn new(seed: u64, now: Instant) -> Self {
        let mut schedule = Self {
            rng: fastrand::Rng::with_seed(seed),
            kill: now,
            producer: now,
            broker: now,
            terminate: now,
            pause: now,
        };
        schedule.kill = now + schedule.within(1_000, 3_000);
        schedule.producer = now + schedule.within(8_000, 15_000);
        schedule.broker = now + schedule.within(10_000, 20_000);
        schedule.terminate = now + schedule.within(3_000, 6_000);
        schedule.pause = now + schedule.within(15_000, 30_000);
        schedule
    }

    /// A delay between `low` and `high` milliseconds.
    fn within(&mut self, low: u64, high: u64) -> Duration {
        Duration::from_millis(self.rng.u64(low..=high))
    }
}

/// Brings chaos until `until`, restarting whatever it stops (and whatever stops by itself).
///
/// # Errors
/// When a process cannot be started again or the broker not restarted: the soak cannot go
/// on.
pub async fn run(
    window: Window,
    processes: &mut Processes,
    broker: &mut BrokerServer,
    admin: &DatabaseConnection,
    database: &str,
    takeovers: &Takeovers,
) -> Result<ChaosCounts, SoakError> {
    let Window {
        until,
        seed,
        faults,
    } = window;
    let mut counts = ChaosCounts::default();
    let mut schedule = Schedule::new(seed, Instant::now());
    // A paused consumer: its process id and when it is resumed.
    let mut paused: Option<(u32, Instant)> = None;
    loop {
        let now = Instant::now();
        if let Some((pid, resume_at)) = paused
            && (now >= resume_at || now >= until)
        {
            signal(pid, "-CONT").await;
            tracing::info!(pid, "consumer resumed");
            paused = None;
        }
        if now >= until {
            return Ok(counts);
        }
        processes.reap()?;
        if faults.consumer_pauses && paused.is_none() && now >= schedule.pause {
            let consumers = processes.running(|kind| matches!(kind, Kind::Consumer(_)));
            if !consumers.is_empty() {
                let victim = consumers[schedule.rng.usize(..consumers.len())];
                if let Some(pid) = processes.pid(victim) {
                    signal(pid, "-STOP").await;
                    counts.consumer_pauses += 1;
                    let stopped_for = schedule.within(PAUSE_MS.0, PAUSE_MS.1);
                    tracing::info!(?victim, pid, ?stopped_for, "consumer paused");
                    paused = Some((pid, now + stopped_for));
                }
            }
            schedule.pause = Instant::now() + schedule.within(15_000, 30_000);
        }

        if now >= schedule.kill {
            let victims =
                processes.running(|kind| matches!(kind, Kind::Relay(_) | Kind::Consumer(_)));
            if !victims.is_empty() {
                let victim = victims[schedule.rng.usize(..victims.len())];
                let pid = processes
                    .pid(victim)
                    .filter(|_| matches!(victim, Kind::Consumer(_)));
                let held = match pid {
                    Some(pid) => takeovers.held_by(pid).await,
                    None => Vec::new(),
                };
                processes.kill(victim).await?;
                if let Some(pid) = pid {
                    takeovers.watch(pid, held, Instant::now());
                }
                match victim {
                    Kind::Relay(_) => counts.relay_kills += 1,
                    _ => counts.consumer_kills += 1,
                }
                tracing::info!(?victim, "killed");
                tokio::time::sleep(schedule.within(0, 300)).await;
                processes.restart(victim)?;
            }
            schedule.kill = Instant::now() + schedule.within(1_000, 3_000);
        }
        if now >= schedule.producer {
            if !processes.running(|kind| kind == Kind::Producer).is_empty() {
                processes.kill(Kind::Producer).await?;
                counts.producer_kills += 1;
                tracing::info!("producer killed");
                processes.restart(Kind::Producer)?;
            }
            schedule.producer = Instant::now() + schedule.within(8_000, 15_000);
        }
        if faults.broker_restarts && now >= schedule.broker {
            broker.kill().await?;
            counts.broker_restarts += 1;
            tracing::info!("broker killed");
            let down = schedule.within(1_000, 2_000);
            tokio::time::sleep(down).await;
            broker.restart().await?;
            tracing::info!(?down, "broker restarted");
            schedule.broker = Instant::now() + schedule.within(10_000, 20_000);
        }
        if now >= schedule.terminate {
            counts.backend_terminations += terminate_relay_backends(admin, database).await;
            schedule.terminate = Instant::now() + schedule.within(3_000, 6_000);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Sends `kill <signal> <pid>` (`-STOP`, `-CONT`); a process that is gone meanwhile (killed
/// while paused) is fine.
async fn signal(pid: u32, signal: &str) {
    let sent = tokio::process::Command::new("kill")
        .arg(signal)
        .arg(pid.to_string())
        .stderr(std::process::Stdio::null())
        .status()
        .await;
    if let Err(error) = sent {
        tracing::warn!(pid, signal, %error, "cannot signal the consumer");
    }
}

/// Terminates every backend of a relay on `database` (PostgreSQL), or kills the binlog dump
/// connections (MariaDB: the log relay's stream); how many.
async fn terminate_relay_backends(admin: &DatabaseConnection, database: &str) -> u64 {
    if admin.get_database_backend() == DbBackend::MySql {
        return kill_binlog_dumps(admin).await;
    }
    let terminated = admin
        .query_all_raw(Statement::from_sql_and_values(
            DbBackend::Postgres,
            "SELECT pg_terminate_backend(pid) AS terminated FROM pg_stat_activity \
             WHERE datname = $1 AND starts_with(application_name, $2)",
            [database.into(), APPLICATION_NAME_PREFIX.into()],
        ))
        .await;
    match terminated {
        Ok(rows) => {
            let count = rows
                .iter()
                .filter(|row| row.try_get::<bool>("", "terminated").unwrap_or(false))
                .count() as u64;
            tracing::info!(count, "relay backends terminated");
            count
        }
        Err(error) => {
            tracing::warn!(%error, "cannot terminate the relays' backends");
            0
        }
    }
}

/// `KILL`s every binlog dump connection of the server (the soak's own: only its log relay
/// dumps); how many.
async fn kill_binlog_dumps(admin: &DatabaseConnection) -> u64 {
    let dumps = admin
        .query_all_raw(Statement::from_string(
            DbBackend::MySql,
            "SELECT CAST(ID AS SIGNED) AS dump FROM information_schema.PROCESSLIST \
             WHERE COMMAND LIKE 'Binlog Dump%'",
        ))
        .await;
    let ids: Vec<i64> = match dumps.and_then(|rows| {
        rows.iter()
            .map(|row| row.try_get::<i64>("", "dump"))
            .collect::<Result<_, _>>()
    }) {
        Ok(ids) => ids,
        Err(error) => {
            tracing::warn!(%error, "cannot list the binlog dumps");
            return 0;
        }
    };
    let mut killed = 0;
    for id in ids {
        match admin.execute_unprepared(&format!("KILL {id}")).await {
            Ok(_) => killed += 1,
            // Gone meanwhile.
            Err(error) => tracing::debug!(%error, id, "binlog dump not killed"),
        }
    }
    tracing::info!(killed, "binlog dumps killed");
    killed
}
