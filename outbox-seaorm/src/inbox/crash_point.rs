//! Where a test plays a consumer process that dies after its handler returned and before the
//! inbox transaction committed (feature `testing`, used by [`crate::testing`]).
//!
//! A [`CrashPoint`] is armed by the test kit and installed for the duration of one delivery
//! with [`scope`] (a Tokio task-local, so concurrent tests and other consumers never see it).
//! [`before_commit`], called by the inbox wrapper between the handler and `COMMIT`, takes one
//! armed crash, tells the kit, and never returns: the kit drops the delivery, which drops the
//! open transaction — the handler's writes and the inbox row roll back, exactly as when the
//! process is killed there. Without a scope, or with nothing armed, it returns at once.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::Notify;

tokio::task_local! {
    static CRASH_POINT: std::sync::Arc<CrashPoint>;
}

/// Crashes armed for one consumer, and the signal that one was reached.
#[derive(Debug, Default)]
pub(crate) struct CrashPoint {
    armed: AtomicUsize,
    reached: Notify,
}

impl CrashPoint {
    /// Arms one more crash: the next delivery that reaches [`before_commit`] takes it.
    pub(crate) fn arm(&self) {
        self.armed.fetch_add(1, Ordering::SeqCst);
    }

    /// Crashes armed and not reached yet.
    pub(crate) fn armed(&self) -> usize {
        self.armed.load(Ordering::SeqCst)
    }

    /// Completes once a delivery reached [`before_commit`] with a crash armed (a permit is
    /// kept when it was reached before this is awaited).
    pub(crate) async fn reached(&self) {
        self.reached.notified().await;
    }

    /// Takes one armed crash, if any.
    fn take(&self) -> bool {
        self.armed
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |armed| {
                armed.checked_sub(1)
            })
            .is_ok()
    }
}

/// Runs `delivery` with `point` installed as the crash point of this task.
pub(crate) fn scope<F: Future>(
    point: std::sync::Arc<CrashPoint>,
    delivery: F,
) -> impl Future<Output = F::Output> {
    CRASH_POINT.scope(point, delivery)
}

/// The point between a handler's success and the inbox `COMMIT`: never returns when a crash
/// is armed for the current delivery (see the [module documentation](self)).
pub(crate) async fn before_commit() {
    let crash = CRASH_POINT
        .try_with(|point| point.take().then(|| std::sync::Arc::clone(point)))
        .ok()
        .flatten();
    if let Some(point) = crash {
        tracing::warn!("test kit: consumer crashes after its handler, before the inbox commit");
        point.reached.notify_one();
        std::future::pending::<()>().await;
    }
}
