//! [`ConnectionBudget`]: the connections the relays of many databases on one server may
//! hold at once, shared between them.
//!
//! Each relay (a tenant's) takes a [`BudgetSeat`] of the server's budget, sized to its pool
//! (`connections`, its `max_connections`). It may hold connections only while its seat is
//! **open**: the seat opens when the relay needs the database (a turn of its loop, one
//! operation) and the budget has room; it stays open, *warm*, after the turn, so a relay
//! that comes back soon finds its connection; it closes — its idle connections are closed
//! — when it has been idle for the budget's `idle_timeout`, or at once when another relay
//! waits for room and no seat is free. Relays that wait are served first come, first
//! served: a relay that ends a turn while others wait closes its connections and hands the
//! room to the first of them, so a busy tenant takes its turn with the others instead of
//! starving them. The sum of the open seats never exceeds the budget.
//!
//! The relay enters its seat around each turn of its loop and every statement it sends
//! outside one (nested entries share the turn), and does not `LISTEN` (a listening
//! connection would be held for good): a budgeted relay polls.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use sea_orm::DatabaseConnection;
use tokio::sync::oneshot;

/// How long a seat waits for its own closing to end before it looks again.
const CLOSING_POLL: Duration = Duration::from_millis(5);

/// The connections the relays of one database server may hold at once (see the
/// [module documentation](self)). Cheap to clone: clones share the budget.
#[derive(Debug, Clone)]
pub struct ConnectionBudget {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    max: u32,
    idle_timeout: Duration,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Connections the open seats may hold.
    open: u32,
    /// The most `open` has been.
    peak: u32,
    next_id: u64,
    seats: BTreeMap<u64, Seat>,
    /// Seats waiting for room, first come first served.
    waiters: VecDeque<(u64, oneshot::Sender<()>)>,
    /// Whether the idle reaper runs.
    reaping: bool,
}

#[derive(Debug)]
struct Seat {
    connections: u32,
    phase: Phase,
    db: Option<DatabaseConnection>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Holds no connection.
    Closed,
    /// Open, nobody uses it; since when.
    Warm(Instant),
    /// Open, in use by this many.
    Busy(u32),
    /// Its connections are being closed.
    Closing,
    /// Its owner waits for room.
    Waiting,
}

impl ConnectionBudget {
    /// A budget of `max_connections` for one server; an open seat unused for
    /// `idle_timeout` is closed.
    pub fn new(max_connections: u32, idle_timeout: Duration) -> Self {
        Self {
            shared: Arc::new(Shared {
                max: max_connections,
                idle_timeout,
                state: Mutex::new(State::default()),
            }),
        }
    }

    /// The budget.
    pub fn max_connections(&self) -> u32 {
        self.shared.max
    }

    /// The connections the open seats may hold now.
    pub fn open_connections(&self) -> u32 {
        self.lock().open
    }

    /// The most the open seats could hold at once since the budget was made.
    pub fn peak_connections(&self) -> u32 {
        self.lock().peak
    }

    /// A seat for a relay whose pool holds at most `connections` (at least 1, at most the
    /// budget).
    pub fn seat(&self, connections: u32) -> BudgetSeat {
        let connections = connections.clamp(1, self.shared.max.max(1));
        let mut state = self.lock();
        let id = state.next_id;
        state.next_id += 1;
        state.seats.insert(
            id,
            Seat {
                connections,
                phase: Phase::Closed,
                db: None,
            },
        );
        BudgetSeat {
            inner: Arc::new(SeatHandle {
                budget: self.clone(),
                id,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.shared
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Gives the room there is to the seats that wait, first come first served.
    fn grant(&self, state: &mut State) {
        while let Some((id, _)) = state.waiters.front() {
            let id = *id;
            let Some(need) = state.seats.get(&id).map(|seat| seat.connections) else {
                state.waiters.pop_front();
                continue;
            };
            if state.open + need > self.shared.max {
                break;
            }
            let Some((_, sender)) = state.waiters.pop_front() else {
                break;
            };
            if sender.send(()).is_ok() {
                state.open += need;
                state.peak = state.peak.max(state.open);
                if let Some(seat) = state.seats.get_mut(&id) {
                    seat.phase = Phase::Busy(1);
                }
            } else if let Some(seat) = state.seats.get_mut(&id) {
                // Its owner stopped waiting.
                seat.phase = Phase::Closed;
            }
        }
    }

    /// Closes seat `id`'s connections (it is `Closing`), then frees its room.
    async fn close(&self, id: u64, db: Option<DatabaseConnection>) {
        if let Some(db) = db {
            close_idle(&db).await;
        }
        let mut state = self.lock();
        let connections = state.seats.get(&id).map_or(0, |seat| seat.connections);
        state.open = state.open.saturating_sub(connections);
        if let Some(seat) = state.seats.get_mut(&id)
            && seat.phase == Phase::Closing
        {
            seat.phase = Phase::Closed;
        }
        self.grant(&mut state);
    }

    /// Closes the seats idle for longer than the timeout, while any seat exists.
    fn start_reaper(&self, state: &mut State) {
        if state.reaping {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        state.reaping = true;
        let budget = self.clone();
        runtime.spawn(async move {
            let period = (budget.shared.idle_timeout / 2).max(Duration::from_millis(10));
            loop {
                tokio::time::sleep(period).await;
                let idle: Vec<(u64, Option<DatabaseConnection>)> = {
                    let mut state = budget.lock();
                    if state.seats.is_empty() {
                        state.reaping = false;
                        return;
                    }
                    let timeout = budget.shared.idle_timeout;
                    state
                        .seats
                        .iter_mut()
                        .filter_map(|(id, seat)| match seat.phase {
                            Phase::Warm(since) if since.elapsed() >= timeout => {
                                seat.phase = Phase::Closing;
                                Some((*id, seat.db.clone()))
                            }
                            _ => None,
                        })
                        .collect()
                };
                for (id, db) in idle {
                    budget.close(id, db).await;
                }
            }
        });
    }
}

/// A relay's seat in a [`ConnectionBudget`]. Clones share the seat; the last one dropped
/// gives it up.
#[derive(Debug, Clone)]
pub struct BudgetSeat {
    inner: Arc<SeatHandle>,
}

#[derive(Debug)]
struct SeatHandle {
    budget: ConnectionBudget,
    id: u64,
}

impl Drop for SeatHandle {
    fn drop(&mut self) {
        let mut state = self.budget.lock();
        if let Some(seat) = state.seats.remove(&self.id)
            && matches!(seat.phase, Phase::Warm(_) | Phase::Busy(_))
        {
            // Its pool goes with its relay; if not closed yet, it is by the pool's drop.
            state.open = state.open.saturating_sub(seat.connections);
            let budget = self.budget.clone();
            budget.grant(&mut state);
        }
    }
}

impl BudgetSeat {
    /// The pool whose connections the seat holds (the relay's; a new one after a
    /// reconnect).
    pub fn attach(&self, db: &DatabaseConnection) {
        let budget = &self.inner.budget;
        if let Some(seat) = budget.lock().seats.get_mut(&self.inner.id) {
            seat.db = Some(db.clone());
        }
    }

    /// The budget it is a seat of.
    pub fn budget(&self) -> &ConnectionBudget {
        &self.inner.budget
    }

    /// Waits until the seat is open and in use by the caller; the connections may be used
    /// until the guard drops.
    pub async fn enter(&self) -> SeatGuard {
        let budget = &self.inner.budget;
        let id = self.inner.id;
        loop {
            let step = {
                let mut state = budget.lock();
                budget.start_reaper(&mut state);
                let max = budget.shared.max;
                let waiting = !state.waiters.is_empty();
                let open = state.open;
                let Some(seat) = state.seats.get_mut(&id) else {
                    // Not a seat any more (cannot happen while a handle lives).
                    return self.guard();
                };
                match seat.phase {
                    Phase::Busy(users) => {
                        seat.phase = Phase::Busy(users + 1);
                        return self.guard();
                    }
                    Phase::Warm(_) => {
                        seat.phase = Phase::Busy(1);
                        return self.guard();
                    }
                    Phase::Closing | Phase::Waiting => Step::Later,
                    Phase::Closed if !waiting && open + seat.connections <= max => {
                        seat.phase = Phase::Busy(1);
                        let connections = seat.connections;
                        state.open += connections;
                        state.peak = state.peak.max(state.open);
                        return self.guard();
                    }
                    Phase::Closed => {
                        seat.phase = Phase::Waiting;
                        let (sender, receiver) = oneshot::channel();
                        state.waiters.push_back((id, sender));
                        // Room for the first waiter: the least recently used idle seat.
                        let victim = state
                            .seats
                            .iter_mut()
                            .filter_map(|(victim, seat)| match seat.phase {
                                Phase::Warm(since) => Some((since, *victim, seat)),
                                _ => None,
                            })
                            .min_by_key(|(since, _, _)| *since)
                            .map(|(_, victim, seat)| {
                                seat.phase = Phase::Closing;
                                (victim, seat.db.clone())
                            });
                        Step::Wait(receiver, victim)
                    }
                }
            };
            match step {
                Step::Later => tokio::time::sleep(CLOSING_POLL).await,
                Step::Wait(receiver, victim) => {
                    let mut cancelled = WaitGuard {
                        budget,
                        id,
                        armed: true,
                    };
                    if let Some((victim, db)) = victim {
                        budget.close(victim, db).await;
                    }
                    if receiver.await.is_ok() {
                        cancelled.armed = false;
                        return self.guard();
                    }
                }
            }
        }
    }

    fn guard(&self) -> SeatGuard {
        SeatGuard {
            seat: self.inner.clone(),
        }
    }
}

enum Step {
    Later,
    Wait(
        oneshot::Receiver<()>,
        Option<(u64, Option<DatabaseConnection>)>,
    ),
}

/// Undoes a wait whose caller went away: its seat is closed again, or, if room was
/// granted meanwhile, given back.
struct WaitGuard<'a> {
    budget: &'a ConnectionBudget,
    id: u64,
    armed: bool,
}

impl Drop for WaitGuard<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let mut state = self.budget.lock();
        state.waiters.retain(|(waiter, _)| *waiter != self.id);
        let Some(seat) = state.seats.get_mut(&self.id) else {
            return;
        };
        match seat.phase {
            Phase::Waiting => seat.phase = Phase::Closed,
            // Granted as it went away: no connection was opened yet.
            Phase::Busy(1) => {
                seat.phase = Phase::Closed;
                let connections = seat.connections;
                state.open = state.open.saturating_sub(connections);
                self.budget.grant(&mut state);
            }
            _ => {}
        }
    }
}

/// A use of an open seat: the connections may be used until it drops.
#[derive(Debug)]
pub struct SeatGuard {
    seat: Arc<SeatHandle>,
}

impl Drop for SeatGuard {
    fn drop(&mut self) {
        let budget = &self.seat.budget;
        let id = self.seat.id;
        let mut state = budget.lock();
        let waiting = !state.waiters.is_empty();
        let Some(seat) = state.seats.get_mut(&id) else {
            return;
        };
        match seat.phase {
            Phase::Busy(users) if users > 1 => seat.phase = Phase::Busy(users - 1),
            Phase::Busy(_) if waiting => {
                // Others wait: this turn ends, and its room goes to the first of them.
                seat.phase = Phase::Closing;
                let db = seat.db.clone();
                let budget = budget.clone();
                match tokio::runtime::Handle::try_current() {
                    Ok(runtime) => {
                        runtime.spawn(async move { budget.close(id, db).await });
                    }
                    Err(_) => seat.phase = Phase::Warm(Instant::now()),
                }
            }
            Phase::Busy(_) => seat.phase = Phase::Warm(Instant::now()),
            _ => {}
        }
    }
}

/// How long closing a seat waits for its connections to come back to their pool (sqlx
/// returns a connection on a task of its own after its user drops it).
#[cfg(any(feature = "postgres", feature = "mysql"))]
const CLOSE_WAIT: Duration = Duration::from_secs(5);

/// Closes every connection of `db`'s pool, waiting for those on their way back to it.
async fn close_idle(db: &DatabaseConnection) {
    #[cfg(any(feature = "postgres", feature = "mysql"))]
    macro_rules! close_all {
        ($pool:expr) => {{
            let pool = $pool;
            let deadline = Instant::now() + CLOSE_WAIT;
            loop {
                while let Some(connection) = pool.try_acquire() {
                    let _ = connection.close().await;
                }
                if pool.size() == 0 {
                    break;
                }
                if Instant::now() >= deadline {
                    tracing::warn!(
                        connections = pool.size(),
                        "a budget seat closed while its pool still lent connections"
                    );
                    break;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }};
    }
    match db.get_database_backend() {
        #[cfg(feature = "postgres")]
        sea_orm::DbBackend::Postgres => close_all!(db.get_postgres_connection_pool()),
        #[cfg(feature = "mysql")]
        sea_orm::DbBackend::MySql => close_all!(db.get_mysql_connection_pool()),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn seats_wait_their_turn_and_never_exceed_the_budget() {
        let budget = ConnectionBudget::new(2, Duration::from_secs(60));
        let seats: Vec<BudgetSeat> = (0..4).map(|_| budget.seat(1)).collect();
        let a = seats[0].enter().await;
        let b = seats[1].enter().await;
        assert_eq!(budget.open_connections(), 2);
        // Nested use of an open seat takes no more room.
        let a2 = seats[0].enter().await;
        assert_eq!(budget.open_connections(), 2);
        let c_seat = seats[2].clone();
        let c = tokio::spawn(async move { c_seat.enter().await });
        let d_seat = seats[3].clone();
        tokio::task::yield_now().await;
        let d = tokio::spawn(async move { d_seat.enter().await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!c.is_finished() && !d.is_finished());
        drop(a2);
        drop(a);
        // a's turn ended while c waits: a closes, c goes first.
        let c = c.await.unwrap();
        assert!(!d.is_finished());
        drop(b);
        let d = d.await.unwrap();
        assert_eq!(budget.open_connections(), 2);
        assert_eq!(budget.peak_connections(), 2);
        drop((c, d));
        // Warm seats are taken over when someone waits.
        let a = seats[0].enter().await;
        assert_eq!(budget.open_connections(), 2);
        drop(a);
        assert_eq!(budget.peak_connections(), 2);
    }

    #[tokio::test]
    async fn idle_seats_close_after_the_timeout_and_a_cancelled_wait_gives_nothing_away() {
        let budget = ConnectionBudget::new(1, Duration::from_millis(30));
        let a = budget.seat(1);
        let b = budget.seat(1);
        drop(a.enter().await);
        assert_eq!(budget.open_connections(), 1);
        tokio::time::sleep(Duration::from_millis(120)).await;
        assert_eq!(budget.open_connections(), 0, "an idle seat closes");
        let held = a.enter().await;
        let waiting = tokio::time::timeout(Duration::from_millis(20), b.enter()).await;
        assert!(waiting.is_err(), "no room for b");
        drop(held);
        assert_eq!(budget.open_connections(), 1);
        let b_in = tokio::time::timeout(Duration::from_millis(200), b.enter()).await;
        assert!(b_in.is_ok(), "b gets the warm seat's room");
        assert_eq!(budget.peak_connections(), 1);
    }
}
