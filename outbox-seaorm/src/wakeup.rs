//! Waking relays up on PostgreSQL: how a committed unit of work tells listening relays that
//! the outbox has new rows.
//!
//! A relay polls the outbox table. On PostgreSQL it can also `LISTEN` on a channel
//! ([`OutboxBuilder::notify_channel`](crate::OutboxBuilder::notify_channel), default
//! `outbox_pending`) so that a commit wakes it up at once instead of at its next poll.
//! [`PostgresWakeup`] (set with
//! [`OutboxBuilder::postgres_wakeup`](crate::OutboxBuilder::postgres_wakeup)) chooses how the
//! `NOTIFY` is sent:
//!
//! | mode | `NOTIFY` sent | costs the committing caller | a listener hears of a commit |
//! |---|---|---|---|
//! | [`AfterCommit`](PostgresWakeup::AfterCommit) (default, 8 ms) | after `COMMIT`, by a background task, coalesced | nothing on its path (no I/O, no lock); one background `NOTIFY` per interval | within `min_interval` + one round trip, best effort |
//! | [`InTransaction`](PostgresWakeup::InTransaction) | inside the transaction, with the last `INSERT` | commits of notifying transactions are serialized | exactly when it commits, never if it does not |
//! | [`Off`](PostgresWakeup::Off) | never | nothing | at its next poll |
//!
//! **Polling is the authority in every mode.** A notification only shortens a relay's wait;
//! a relay must poll anyway (on start-up, after a reconnect of its listener, and every poll
//! interval). A missed notification — a failed `NOTIFY`, a process that crashes between
//! `COMMIT` and the after-commit `NOTIFY`, a listener that was disconnected — delays the
//! relay until its next poll and loses nothing: the rows are committed.
//!
//! # After commit (the default)
//!
//! Once `COMMIT` has succeeded, the unit of work signals the [`Outbox`](crate::Outbox)'s
//! notifier, which is synchronous and cheap (a mutex-protected map lookup, no I/O). The
//! notifier sends `SELECT pg_notify(channel, '')` as its own tiny autocommit statement on the
//! unit of work's pool, from a Tokio task, **at most once per `min_interval` per database**:
//!
//! - *leading edge*: when no notification went out in the last `min_interval`, one goes out
//!   at once;
//! - *trailing edge*: commits during a notification's round trip or during the
//!   `min_interval` after it are coalesced into one more notification at the end of the
//!   interval, so the last commit of a burst is always followed by a notification sent after
//!   it — within `min_interval` plus one round trip (plus the time to get a pooled
//!   connection).
//!
//! Per database and per [`Outbox`](crate::Outbox) value (and its clones) there is at most one
//! notifier task, and only while commits keep coming: it ends `min_interval` after its last
//! notification when nothing new was committed. Databases are told apart by their server
//! address and database name, so every database used with one `Outbox` gets its own
//! notifications, and several pools on one database share one rate limit. A failed
//! `NOTIFY` is logged (`tracing` warning) and counted in [`WakeupStats::failed`]; it is never
//! returned to the caller, whose transaction committed. The notifier needs a Tokio runtime
//! (SeaORM's `runtime-tokio`).
//!
//! The notifier needs a handle on the pool, which a unit of work gets from the connection it
//! begins on ([`UnitOfWorkConnection::wakeup_target`](crate::UnitOfWorkConnection::wakeup_target)):
//!
//! - begun on a [`DatabaseConnection`]: the notifier sends on that pool;
//! - begun on another [`UnitOfWork`](crate::UnitOfWork) (a savepoint): releasing the
//!   savepoint is no commit, so the nested unit of work hands the wake-up to the enclosing
//!   one, which requests it after its own `COMMIT`;
//! - begun on a plain `DatabaseTransaction`: nothing is sent (the caller commits the
//!   transaction, not the unit of work); relays find the rows at their next poll.
//!
//! **Why 8 ms.** The interval trades wake-up latency under a steady stream of commits (an
//! idle database is notified at once) against background load. Each `NOTIFY` is a
//! transaction of its own: a pooled connection (with sqlx's ping before acquire, two round
//! trips), a transaction id, a commit record and the notification-queue lock. Measured on a
//! 2-core machine running PostgreSQL 15 and the benchmark together:
//!
//! | `min_interval` | relay commit-to-publish p50 / p99 at 1 000 commits/s | single-writer throughput cost |
//! |---|---|---|
//! | 5 ms | 3.5 ms / 7.5 ms | about 5 % |
//! | 8 ms | 5.0 ms / 10 ms | about 2–3 % |
//! | 10 ms | 5.3 ms / 12 ms | about 2 % |
//! | 20 ms | 12.6 ms / 25 ms | within noise |
//!
//! (`outbox-bench relay --part latency`; `outbox-bench write --notify-interval-ms N`, against
//! `--notify off`.) 8 ms keeps the relay's median latency at its 5 ms target with at most
//! 125 `NOTIFY` transactions per second and database. Relays poll every 100 ms to a few
//! seconds, so even the worst case (8 ms plus a round trip) is far below a missed
//! notification's cost, and a relay woken up once per interval fetches everything committed
//! meanwhile in one batch.
//!
//! # In the transaction
//!
//! The last `INSERT` of the commit becomes
//! `WITH outbox_insert AS (INSERT INTO … VALUES …) SELECT pg_notify('channel', '')`: one
//! statement, no extra round trip (a data-modifying `WITH` runs to completion even though the
//! outer query does not read it). PostgreSQL delivers the notification when, and only if,
//! the transaction commits.
//!
//! The price is throughput under concurrency: PostgreSQL serializes the commits of all
//! transactions that executed `NOTIFY` — `PreCommit_Notify` takes a database-wide lock on
//! the notification queue and holds it until the commit (WAL flush included) is done. In the
//! write benchmark (16 clients, PostgreSQL 15) this mode reaches about 0.65× the
//! throughput of raw SQL without `NOTIFY`, against about 0.9× without it. It also ties
//! business commits to the notification queue: when the queue is full (a listening session
//! stuck in a long transaction keeps PostgreSQL from truncating it), `COMMIT` fails with "too
//! many notifications in the NOTIFY queue". Choose it when a wake-up must be tied to the
//! commit itself and the write rate is modest.

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use sea_orm::{ConnectionTrait, DatabaseConnection};

/// How a unit of work on PostgreSQL wakes up the relays listening on the outbox's `NOTIFY`
/// channel. See the [module documentation](self). Other backends ignore it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PostgresWakeup {
    /// The default: after a successful `COMMIT`, a background task sends `NOTIFY` on the
    /// pool, at most once per `min_interval` per database, with a trailing notification
    /// after the last commit of a burst. Best effort; costs the caller nothing.
    AfterCommit {
        /// Minimum time between two notifications of one database (default 8 ms,
        /// [`PostgresWakeup::DEFAULT_MIN_INTERVAL`]). Zero still coalesces the commits made
        /// during one notification's round trip.
        min_interval: Duration,
    },
    /// `pg_notify` runs inside the transaction, in the statement of the last `INSERT`:
    /// delivered exactly when the transaction commits, but PostgreSQL serializes the commits
    /// of notifying transactions.
    InTransaction,
    /// No notification: relays rely on polling alone.
    Off,
}

impl PostgresWakeup {
    /// The default `min_interval` of [`AfterCommit`](Self::AfterCommit): 8 ms (see the
    /// [module documentation](self) for the measurements behind it).
    pub const DEFAULT_MIN_INTERVAL: Duration = Duration::from_millis(8);

    /// [`AfterCommit`](Self::AfterCommit) with the default `min_interval`.
    pub const fn after_commit() -> Self {
        Self::AfterCommit {
            min_interval: Self::DEFAULT_MIN_INTERVAL,
        }
    }
}

impl Default for PostgresWakeup {
    /// [`PostgresWakeup::after_commit`]: after commit, at most one `NOTIFY` per 8 ms.
    fn default() -> Self {
        Self::after_commit()
    }
}

/// Counters of an [`Outbox`](crate::Outbox)'s after-commit notifier
/// ([`Outbox::wakeup_stats`](crate::Outbox::wakeup_stats)), since the `Outbox` was built.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WakeupStats {
    /// Commits that requested a wake-up.
    pub requested: u64,
    /// `NOTIFY` statements that succeeded.
    pub sent: u64,
    /// Wake-ups that could not be sent: a failed `NOTIFY` (logged as a warning), a closed
    /// pool, or no Tokio runtime to run the notifier on.
    pub failed: u64,
}

/// Where the after-commit wake-up of a unit of work goes; returned by
/// [`UnitOfWorkConnection::wakeup_target`](crate::UnitOfWorkConnection::wakeup_target).
#[derive(Clone)]
pub struct WakeupTarget(pub(crate) Target);

#[derive(Clone)]
pub(crate) enum Target {
    /// Nowhere: relays find the rows at their next poll.
    None,
    /// Notify on this PostgreSQL pool after `COMMIT`.
    Pool(DatabaseConnection),
    /// A savepoint of another unit of work: raise the flag it checks when it commits.
    Enclosing(Arc<AtomicBool>),
}

impl WakeupTarget {
    /// No after-commit wake-up: relays find the rows at their next poll.
    pub fn none() -> Self {
        Self(Target::None)
    }

    /// Notify on `db`'s pool after `COMMIT` (PostgreSQL pools only; for any other connection
    /// this is [`none`](Self::none)).
    pub fn pool(db: &DatabaseConnection) -> Self {
        if is_postgres_pool(db) {
            Self(Target::Pool(db.clone()))
        } else {
            Self::none()
        }
    }
}

impl fmt::Debug for WakeupTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.0 {
            Target::None => "WakeupTarget::None",
            Target::Pool(_) => "WakeupTarget::Pool",
            Target::Enclosing(_) => "WakeupTarget::Enclosing",
        })
    }
}

/// Whether `db` is a PostgreSQL pool (never without the `postgres` feature: no
/// after-commit wake-up is then ever signalled).
fn is_postgres_pool(db: &DatabaseConnection) -> bool {
    #[cfg(feature = "postgres")]
    return matches!(
        db.inner,
        sea_orm::DatabaseConnectionType::SqlxPostgresPoolConnection(_)
    );
    #[cfg(not(feature = "postgres"))]
    {
        let _ = db;
        false
    }
}

/// Which database a pool talks to: notifications are per database.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct DatabaseKey {
    host: String,
    port: u16,
    socket: Option<PathBuf>,
    database: String,
}

impl DatabaseKey {
    /// Only for PostgreSQL pools ([`is_postgres_pool`]).
    #[cfg(feature = "postgres")]
    fn of(db: &DatabaseConnection) -> Self {
        let options = db.get_postgres_connection_pool().connect_options();
        Self {
            host: options.get_host().to_owned(),
            port: options.get_port(),
            socket: options.get_socket().cloned(),
            // PostgreSQL's default database is the user's name.
            database: options
                .get_database()
                .unwrap_or(options.get_username())
                .to_owned(),
        }
    }
}

/// The after-commit notifier of one [`Outbox`](crate::Outbox): a slot per database with a
/// running task.
pub(crate) struct Notifier {
    shared: Arc<Shared>,
}

struct Shared {
    channel: Option<String>,
    min_interval: Duration,
    /// A slot exists exactly while a task runs for its database.
    slots: Mutex<HashMap<DatabaseKey, Slot>>,
    requested: AtomicU64,
    sent: AtomicU64,
    failed: AtomicU64,
}

struct Slot {
    /// A commit happened since the task last started a `NOTIFY`.
    pending: bool,
    /// The pool of the latest commit.
    db: DatabaseConnection,
}

impl Shared {
    fn slots(&self) -> MutexGuard<'_, HashMap<DatabaseKey, Slot>> {
        // Two plain fields per slot, updated atomically under the lock: ignore poisoning.
        self.slots
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    async fn send(&self, db: &DatabaseConnection) {
        let Some(channel) = &self.channel else {
            return;
        };
        #[cfg(feature = "postgres")]
        if db.get_postgres_connection_pool().is_closed() {
            self.failed.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(channel, "pool closed: outbox wake-up not sent");
            return;
        }
        // The simple protocol, one message: whole on one server connection behind a
        // transaction pooler too. The channel is a validated identifier (no quote).
        let statement = format!("SELECT pg_notify('{channel}', '')");
        match db.execute_unprepared(&statement).await {
            Ok(_) => {
                self.sent.fetch_add(1, Ordering::Relaxed);
            }
            Err(error) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    %error,
                    channel,
                    "outbox wake-up NOTIFY failed; relays will find the rows at their next poll"
                );
            }
        }
    }
}

/// Removes the slot of its database when the task ends, however it ends (also when the
/// runtime drops the task before it ran), so that the next commit starts a new task.
struct SlotGuard {
    shared: Arc<Shared>,
    key: DatabaseKey,
    armed: bool,
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        if self.armed {
            self.shared.slots().remove(&self.key);
        }
    }
}

impl SlotGuard {
    /// The task's loop: notify while commits keep coming, at most once per `min_interval`.
    async fn run(mut self) {
        loop {
            let db = {
                let mut slots = self.shared.slots();
                match slots.get_mut(&self.key) {
                    Some(slot) if slot.pending => {
                        slot.pending = false;
                        slot.db.clone()
                    }
                    _ => {
                        // Nothing committed since the last notification (which was at least
                        // `min_interval` ago): done. The next commit starts a new task.
                        slots.remove(&self.key);
                        self.armed = false;
                        return;
                    }
                }
            };
            let started = tokio::time::Instant::now();
            self.shared.send(&db).await;
            drop(db);
            tokio::time::sleep_until(started + self.shared.min_interval).await;
        }
    }
}

impl Notifier {
    pub(crate) fn new(channel: Option<String>, wakeup: PostgresWakeup) -> Self {
        let min_interval = match wakeup {
            PostgresWakeup::AfterCommit { min_interval } => min_interval,
            _ => PostgresWakeup::DEFAULT_MIN_INTERVAL,
        };
        Self {
            shared: Arc::new(Shared {
                channel,
                min_interval,
                slots: Mutex::new(HashMap::new()),
                requested: AtomicU64::new(0),
                sent: AtomicU64::new(0),
                failed: AtomicU64::new(0),
            }),
        }
    }

    /// A unit of work committed on `db` (a PostgreSQL pool): make sure a `NOTIFY` follows.
    /// Synchronous and cheap; never fails.
    pub(crate) fn signal(&self, db: DatabaseConnection) {
        let shared = &self.shared;
        shared.requested.fetch_add(1, Ordering::Relaxed);
        // Only PostgreSQL pools are signalled (`is_postgres_pool`).
        #[cfg(feature = "postgres")]
        self.signal_pool(db);
        #[cfg(not(feature = "postgres"))]
        let _ = db;
    }

    /// [`signal`](Self::signal) on a PostgreSQL pool.
    #[cfg(feature = "postgres")]
    fn signal_pool(&self, db: DatabaseConnection) {
        let shared = &self.shared;
        let key = DatabaseKey::of(&db);
        let guard = {
            let mut slots = shared.slots();
            if let Some(slot) = slots.get_mut(&key) {
                // A task runs: it notifies again at the end of its interval.
                slot.pending = true;
                slot.db = db;
                return;
            }
            let Ok(runtime) = tokio::runtime::Handle::try_current() else {
                drop(slots);
                shared.failed.fetch_add(1, Ordering::Relaxed);
                tracing::warn!("no Tokio runtime: outbox wake-up not sent");
                return;
            };
            slots.insert(key.clone(), Slot { pending: true, db });
            (
                runtime,
                SlotGuard {
                    shared: Arc::clone(shared),
                    key,
                    armed: true,
                },
            )
        };
        // Spawned with the lock released: a runtime that is shutting down drops the task at
        // once, and the guard's `drop` takes the lock.
        let (runtime, guard) = guard;
        drop(runtime.spawn(guard.run()));
    }

    pub(crate) fn stats(&self) -> WakeupStats {
        WakeupStats {
            requested: self.shared.requested.load(Ordering::Relaxed),
            sent: self.shared.sent.load(Ordering::Relaxed),
            failed: self.shared.failed.load(Ordering::Relaxed),
        }
    }
}

impl fmt::Debug for Notifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Notifier")
            .field("min_interval", &self.shared.min_interval)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_after_commit_every_8_ms() {
        assert_eq!(
            PostgresWakeup::default(),
            PostgresWakeup::AfterCommit {
                min_interval: Duration::from_millis(8)
            }
        );
    }
}
