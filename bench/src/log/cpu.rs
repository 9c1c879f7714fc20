//! CPU time of this process, of the PostgreSQL server (every child of its postmaster,
//! walsenders included) and of the NATS server (`nats-server`), from `/proc` (the servers
//! run on this machine).

use std::collections::HashMap;
use std::time::Duration;

use sea_orm::sqlx::{self, PgPool};

use super::BoxError;
use crate::measure::task_cpu;

/// Where the CPU time of a measurement is read.
#[derive(Debug, Clone, Copy)]
pub(super) struct Cpu {
    /// The server's postmaster; `None` when it is not readable here.
    postmaster: Option<u32>,
}

/// CPU time so far of this process, and of each server process.
#[derive(Debug, Clone)]
pub(super) struct Sample {
    client: Option<Duration>,
    /// Per server process: its CPU, and whether it is a walsender.
    server: Option<HashMap<u32, (Duration, bool)>>,
    /// Every `nats-server` process.
    broker: Duration,
}

/// The parent of process `pid`, from `/proc/<pid>/stat`.
fn parent(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(1)?.parse().ok()
}

impl Cpu {
    /// Finds the postmaster of `pool`'s server (the parent of a backend).
    pub(super) async fn of(pool: &PgPool) -> Result<Self, BoxError> {
        let (backend,): (i32,) = sqlx::query_as("SELECT pg_backend_pid()")
            .fetch_one(pool)
            .await?;
        let postmaster = u32::try_from(backend).ok().and_then(parent);
        Ok(Self { postmaster })
    }

    /// CPU so far of this process and of every live server process. A server process
    /// that ends between two samples takes its time with it: take the end sample while the
    /// measured connections are still open.
    pub(super) fn sample(&self) -> Sample {
        let mut broker = Duration::ZERO;
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let path = entry.path();
            let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
            if comm.trim_end() == "nats-server" {
                broker += task_cpu(&entry.file_name().to_string_lossy()).unwrap_or_default();
            }
        }
        let server = self.postmaster.and_then(|postmaster| {
            let mut processes = HashMap::new();
            processes.insert(postmaster, (task_cpu(&postmaster.to_string())?, false));
            for entry in std::fs::read_dir("/proc").ok()?.flatten() {
                let name = entry.file_name();
                let Some(pid) = name.to_str().and_then(|name| name.parse::<u32>().ok()) else {
                    continue;
                };
                if parent(pid) != Some(postmaster) {
                    continue;
                }
                if let Some(cpu) = task_cpu(&pid.to_string()) {
                    // The process title: `postgres: walsender <user> <client> …`.
                    let title = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                    let walsender = title.windows(9).any(|word| word == b"walsender");
                    processes.insert(pid, (cpu, walsender));
                }
            }
            Some(processes)
        });
        Sample {
            client: task_cpu("self"),
            server,
            broker,
        }
    }
}

/// CPU per event of a measurement, in microseconds.
#[derive(Debug, Clone, Copy)]
pub(super) struct PerEvent {
    /// This process.
    pub(super) client: f64,
    /// Every server process.
    pub(super) server: f64,
    /// The server's walsenders (included in `server`).
    pub(super) walsender: f64,
    /// The NATS server.
    pub(super) broker: f64,
}

impl Sample {
    /// CPU per event of this process and of the server since `earlier` (the server: what
    /// each process live now used since then, all of it for a process started since).
    pub(super) fn per_event(&self, earlier: &Sample, events: usize) -> PerEvent {
        let per = |used: Option<Duration>| match used {
            Some(used) if events > 0 => used.as_secs_f64() * 1e6 / events as f64,
            _ => f64::NAN,
        };
        let client = match (self.client, earlier.client) {
            (Some(now), Some(then)) => Some(now.saturating_sub(then)),
            _ => None,
        };
        let server = |walsenders_only: bool| match (&self.server, &earlier.server) {
            (Some(now), Some(then)) => Some(
                now.iter()
                    .filter(|(_, (_, walsender))| *walsender || !walsenders_only)
                    .map(|(pid, (cpu, _))| {
                        let before = then.get(pid).map(|(cpu, _)| *cpu).unwrap_or_default();
                        cpu.saturating_sub(before)
                    })
                    .sum(),
            ),
            _ => None,
        };
        PerEvent {
            client: per(client),
            server: per(server(false)),
            walsender: per(server(true)),
            broker: per(Some(self.broker.saturating_sub(earlier.broker))),
        }
    }
}
