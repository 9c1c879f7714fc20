//! The loop of a [`PartitionedConsumer`]: heartbeat, rebalance, renew its leases, and
//! start or stop one partition runner per lease held.

use crate::outage::DatabaseOutage;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use chrono::TimeDelta;
use sea_orm::{ConnectionTrait as _, DbErr};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{Fence, LeaseHeld, Partition, PartitionedConsumer};
use crate::inbox::metric;
use crate::lease::owner_of;
use crate::sql::{Members, Store};

/// What a [`PartitionedConsumer`] did until it was shut down.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PartitionedReport {
    /// Partition runners started (a lease taken, or a runner restarted after it ended).
    pub started: u64,
    /// Partitions given up to another instance (rebalancing).
    pub handed_over: u64,
    /// Partitions whose lease was found lost (expired, or taken over) while running.
    pub lost: u64,
    /// Heartbeats that failed (database unavailable).
    pub failed_heartbeats: u64,
}

/// A partition runner's task, aborted when dropped: the runners of a supervisor whose
/// future is dropped (a task aborted, a `select!` that went elsewhere) die with it, as a
/// killed process's do, their leases left to expire.
struct Task(JoinHandle<()>);

impl Task {
    fn is_finished(&self) -> bool {
        self.0.is_finished()
    }
}

impl Drop for Task {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A partition runner.
struct Runner {
    token: i64,
    stop: CancellationToken,
    task: Task,
}

/// The supervisor's state between heartbeats.
struct Supervisor<'a> {
    partitioned: &'a PartitionedConsumer,
    store: Store,
    running: BTreeMap<u32, Runner>,
    /// Runners told to stop that have not ended yet; their leases are released (unless
    /// wanted again) once they have.
    stopping: BTreeMap<u32, Task>,
    /// Until when the leases renewed last count as held (see [`LeaseHeld`]).
    valid_until: Arc<Mutex<Option<Instant>>>,
    ensured: bool,
    report: PartitionedReport,
}

/// The supervisor's step, as [`DatabaseOutage`] names it.
const HEARTBEAT: &str = "heartbeat";

impl PartitionedConsumer {
    /// Runs this instance until `shutdown` is cancelled: every heartbeat interval it
    /// heartbeats, takes and gives up leases (see the [module documentation](super)), and
    /// calls `start` for each partition it newly holds, running what `start` returns as a
    /// task until it ends; a task that ends while its lease is held is started again at the
    /// next heartbeat. At shutdown it stops every runner, waits for them (up to one lease
    /// TTL), releases its leases and removes its instance row.
    ///
    /// Database errors are retried at the next heartbeat, or later while they repeat (the
    /// backoff of [`crate::outage`], at most 4 s), and logged by that module's rule; when
    /// the leases could not be renewed for longer than the lease TTL minus one heartbeat
    /// interval, every runner is stopped (the fence would refuse their commits anyway).
    pub async fn run<F, Fut>(self, shutdown: CancellationToken, mut start: F) -> PartitionedReport
    where
        F: FnMut(Partition) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let store = Store::new(
            self.consumer.outbox(),
            self.consumer.db().get_database_backend(),
        )
        .for_consumer_leases();
        let mut supervisor = Supervisor {
            partitioned: &self,
            store,
            running: BTreeMap::new(),
            stopping: BTreeMap::new(),
            valid_until: Arc::default(),
            ensured: false,
            report: PartitionedReport::default(),
        };
        tracing::info!(
            consumer = %self.consumer.name(),
            instance = %self.instance_id,
            partitions = self.leases.len(),
            "partitioned consumer started"
        );
        let outage = DatabaseOutage::new(
            "partitioned consumer",
            format!("{} ({})", self.consumer.name(), self.instance_id),
            vec![metrics::Label::new(
                "consumer",
                self.consumer.name().to_owned(),
            )],
        );
        while !shutdown.is_cancelled() {
            let (pause, failing) = match supervisor.tick(&mut start).await {
                Ok(()) => {
                    outage.succeeded(HEARTBEAT);
                    (self.heartbeat_interval, false)
                }
                Err(error) => {
                    supervisor.report.failed_heartbeats += 1;
                    supervisor.stop_if_expiring();
                    let pause = self
                        .heartbeat_interval
                        .max(outage.failed(HEARTBEAT, &error));
                    (pause, true)
                }
            };
            let wake = tokio::time::Instant::now() + pause;
            // While failing, the backoff may outlast the leases: the runners are stopped
            // when the leases may expire, not at the next attempt.
            if let Some(expiry) = supervisor.expiry().filter(|_| failing) {
                let expiry = tokio::time::Instant::from_std(expiry);
                if expiry < wake {
                    tokio::select! {
                        () = shutdown.cancelled() => break,
                        () = tokio::time::sleep_until(expiry) => supervisor.stop_if_expiring(),
                    }
                }
            }
            tokio::select! {
                () = shutdown.cancelled() => break,
                () = tokio::time::sleep_until(wake) => {}
            }
        }
        supervisor.shut_down().await;
        let report = supervisor.report;
        tracing::info!(
            consumer = %self.consumer.name(),
            instance = %self.instance_id,
            ?report,
            "partitioned consumer stopped"
        );
        report
    }
}

impl Supervisor<'_> {
    fn me(&self) -> &str {
        &self.partitioned.owner
    }

    fn lease(&self, partition: u32) -> &str {
        self.partitioned
            .leases
            .get(partition as usize)
            .map_or("", String::as_str)
    }

    fn ttl(&self) -> TimeDelta {
        TimeDelta::from_std(self.partitioned.lease_ttl).unwrap_or(TimeDelta::MAX)
    }

    /// One heartbeat: see [`PartitionedConsumer::run`].
    async fn tick<F, Fut>(&mut self, start: &mut F) -> Result<(), DbErr>
    where
        F: FnMut(Partition) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let consumer = &self.partitioned.consumer;
        let db = consumer.db();
        let name = consumer.name();
        let renewal = Instant::now();
        let now = consumer.outbox().clock().now();
        let ttl = self.ttl();
        if !self.ensured {
            self.store
                .ensure_leases(db, &self.partitioned.leases)
                .await?;
            self.ensured = true;
        }
        let description = format!("pid {} consumer {name}", std::process::id());
        self.store
            .heartbeat(db, self.me(), &description, Some(name), now, now + ttl)
            .await?;
        let mut live = self
            .store
            .live_instances(db, now, Members::Group(name))
            .await?;
        if !live.iter().any(|id| id == self.me()) {
            live.push(self.me().to_owned());
            live.sort();
        }
        let desired: Vec<u32> = (0..self.partitioned.partitions())
            .filter(|&p| owner_of(self.lease(p), &live) == Some(self.me()))
            .collect();
        // Give up what another instance should hold: stop its runner first, release the
        // lease once the runner has ended (below, or at a later heartbeat).
        let unwanted: Vec<u32> = self
            .running
            .keys()
            .copied()
            .filter(|p| !desired.contains(p))
            .collect();
        for partition in unwanted {
            self.report.handed_over += 1;
            self.stop(partition);
        }
        let ended: Vec<u32> = self
            .stopping
            .iter()
            .filter(|(_, task)| task.is_finished())
            .map(|(p, _)| *p)
            .collect();
        let mut release = Vec::new();
        for partition in ended {
            self.stopping.remove(&partition);
            if !desired.contains(&partition) {
                release.push(self.lease(partition).to_owned());
            }
        }
        self.store
            .release(db, self.me(), Some(&release), now)
            .await?;
        let wanted: Vec<String> = desired
            .iter()
            .filter(|p| !self.stopping.contains_key(p))
            .map(|&p| self.lease(p).to_owned())
            .collect();
        self.store
            .acquire(db, self.me(), &wanted, now, now + ttl)
            .await?;
        let owned: BTreeMap<String, i64> = self
            .store
            .owned_tokens(db, self.me(), &wanted, now)
            .await?
            .into_iter()
            .collect();
        let margin = self
            .partitioned
            .lease_ttl
            .saturating_sub(self.partitioned.heartbeat_interval);
        *self
            .valid_until
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(renewal + margin);
        for &partition in &desired {
            let token = owned.get(self.lease(partition)).copied();
            match (self.running.get(&partition), token) {
                (Some(runner), Some(token))
                    if runner.token == token && !runner.task.is_finished() => {}
                (Some(runner), _) => {
                    if !runner.task.is_finished() {
                        self.report.lost += 1;
                        tracing::warn!(
                            consumer = %name,
                            partition,
                            "partition lease lost: stopping its runner"
                        );
                    }
                    self.stop(partition);
                }
                (None, Some(token)) if !self.stopping.contains_key(&partition) => {
                    self.start(partition, token, start);
                }
                (None, _) => {}
            }
        }
        metrics::gauge!(
            metric::PARTITIONS_OWNED,
            vec![metrics::Label::new("consumer", name.to_owned())]
        )
        .set(self.running.len() as f64);
        self.store
            .remove_instances(db, None, now - ttl * 10)
            .await?;
        tracing::debug!(
            consumer = %name,
            instance = %self.me(),
            live = live.len(),
            running = ?self.running.keys().collect::<Vec<_>>(),
            stopping = ?self.stopping.keys().collect::<Vec<_>>(),
            "partitioned consumer heartbeat"
        );
        Ok(())
    }

    /// Starts the runner of `partition`, fenced by its lease with `token`.
    fn start<F, Fut>(&mut self, partition: u32, token: i64, start: &mut F)
    where
        F: FnMut(Partition) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let consumer = &self.partitioned.consumer;
        let stop = CancellationToken::new();
        let fence = Fence::new(
            self.store.clone(),
            consumer.outbox().clone(),
            self.lease(partition).to_owned(),
            self.me().to_owned(),
            token,
            stop.clone(),
        );
        let task = Task(tokio::spawn(start(Partition {
            number: partition,
            token,
            consumer: consumer.fenced(fence),
            stop: stop.clone(),
            held: LeaseHeld {
                valid_until: Arc::clone(&self.valid_until),
                stop: stop.clone(),
            },
        })));
        self.report.started += 1;
        tracing::info!(
            consumer = %consumer.name(),
            instance = %self.me(),
            partition,
            token,
            "partition runner started"
        );
        self.running.insert(partition, Runner { token, stop, task });
    }

    /// Tells the runner of `partition` to stop; it is waited for at later heartbeats.
    fn stop(&mut self, partition: u32) {
        if let Some(runner) = self.running.remove(&partition) {
            runner.stop.cancel();
            self.stopping.insert(partition, runner.task);
        }
    }

    /// When the leases renewed last may expire, while runners hold them; `None` when no
    /// runner runs.
    fn expiry(&self) -> Option<Instant> {
        if self.running.is_empty() {
            return None;
        }
        *self
            .valid_until
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// After a failed heartbeat: stops every runner once the leases may have expired.
    fn stop_if_expiring(&mut self) {
        let valid_until = *self
            .valid_until
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if valid_until.is_some_and(|until| Instant::now() < until) {
            return;
        }
        let partitions: Vec<u32> = self.running.keys().copied().collect();
        if !partitions.is_empty() {
            tracing::warn!(
                consumer = %self.partitioned.consumer.name(),
                ?partitions,
                "leases not renewed: stopping every partition runner"
            );
        }
        for partition in partitions {
            self.report.lost += 1;
            self.stop(partition);
        }
    }

    /// Stops every runner, waits for them (up to one lease TTL; one still running then is
    /// aborted), releases the leases and removes the instance row.
    async fn shut_down(&mut self) {
        let partitions: Vec<u32> = self.running.keys().copied().collect();
        for partition in partitions {
            self.stop(partition);
        }
        let deadline = tokio::time::Instant::now() + self.partitioned.lease_ttl;
        for (partition, mut task) in std::mem::take(&mut self.stopping) {
            if tokio::time::timeout_at(deadline, &mut task.0)
                .await
                .is_err()
            {
                tracing::warn!(
                    consumer = %self.partitioned.consumer.name(),
                    partition,
                    "partition runner did not stop in time"
                );
            }
        }
        let consumer = &self.partitioned.consumer;
        let db = consumer.db();
        let now = consumer.outbox().clock().now();
        let leases = &self.partitioned.leases;
        if let Err(error) = self.store.release(db, self.me(), Some(leases), now).await {
            tracing::warn!(%error, "partition leases not released: they expire after the TTL");
        }
        if let Err(error) = self.store.remove_instances(db, Some(self.me()), now).await {
            tracing::warn!(%error, "consumer instance not removed: it expires after the TTL");
        }
    }
}
