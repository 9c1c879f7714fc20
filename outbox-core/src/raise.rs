//! How aggregates announce what happened: [`Raise`].
//!
//! Domain code takes `&impl Raise<E>` and calls [`Raise::raise`]; it never names a database,
//! a transaction or a broker. In production the argument is a unit of work (`outbox-seaorm`'s
//! `UnitOfWork`), which buffers the events and maps them to contracts before commit. In unit
//! tests of aggregates it is a [`RecordedEvents`], which only keeps them.
//!
//! ```
//! use outbox_kernel::{Raise, RecordedEvents};
//!
//! #[derive(Debug, PartialEq)]
//! enum OrderingEvent {
//!     OrderPlaced { order_id: u64 },
//! }
//!
//! struct Order { id: u64 }
//!
//! impl Order {
//!     fn place(ctx: &impl Raise<OrderingEvent>, id: u64) -> Order {
//!         ctx.raise(OrderingEvent::OrderPlaced { order_id: id });
//!         Order { id }
//!     }
//! }
//!
//! let events = RecordedEvents::new();
//! let order = Order::place(&events, 7);
//! assert_eq!(order.id, 7);
//! assert_eq!(events.take(), vec![OrderingEvent::OrderPlaced { order_id: 7 }]);
//! assert!(events.is_empty());
//! ```

use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::schedule::Schedule;

/// Something that accepts the domain events of type `E` an aggregate raises.
///
/// Raising never fails and never performs I/O: the events are buffered and handled when the
/// surrounding unit of work commits (or dropped with it when it rolls back).
pub trait Raise<E> {
    /// Records that `event` happened.
    fn raise(&self, event: E);
}

impl<E, R: Raise<E> + ?Sized> Raise<E> for &R {
    fn raise(&self, event: E) {
        (**self).raise(event);
    }
}

/// Something that accepts domain events due later: "publish this at 09:00 tomorrow", "in 30
/// minutes". Implemented by the unit of work (the event commits with the business change
/// and becomes due at its time) and by [`RecordedEvents`].
///
/// ```
/// use std::time::Duration;
/// use outbox_kernel::{RaiseLater, RecordedEvents};
/// use outbox_kernel::schedule::Schedule;
///
/// #[derive(Debug, PartialEq)]
/// enum OrderingEvent { PaymentDeadlinePassed { order_id: u64 } }
///
/// fn place(ctx: &impl RaiseLater<OrderingEvent>, order_id: u64) {
///     ctx.raise_scheduled(
///         OrderingEvent::PaymentDeadlinePassed { order_id },
///         Schedule::after(Duration::from_secs(30 * 60)).key(format!("order-{order_id}/payment")),
///     );
/// }
///
/// let events = RecordedEvents::new();
/// place(&events, 42);
/// let scheduled = events.take_scheduled();
/// assert_eq!(scheduled[0].0, OrderingEvent::PaymentDeadlinePassed { order_id: 42 });
/// assert_eq!(scheduled[0].1.key_str(), Some("order-42/payment"));
/// assert!(events.is_empty()); // nothing due at once
/// ```
pub trait RaiseLater<E>: Raise<E> {
    /// Records that `event` happened and is to be published when `schedule` says.
    fn raise_scheduled(&self, event: E, schedule: Schedule);

    /// Records `event`, due at `at` (at once when `at` is not in the future).
    fn raise_at(&self, event: E, at: DateTime<Utc>) {
        self.raise_scheduled(event, Schedule::at(at));
    }

    /// Records `event`, due `delay` after now (the unit of work's clock).
    fn raise_after(&self, event: E, delay: Duration) {
        self.raise_scheduled(event, Schedule::after(delay));
    }
}

impl<E, R: RaiseLater<E> + ?Sized> RaiseLater<E> for &R {
    fn raise_scheduled(&self, event: E, schedule: Schedule) {
        (**self).raise_scheduled(event, schedule);
    }
}

/// A [`Raise`] that only records the events, in order. For unit tests of aggregates.
///
/// Events raised for later ([`RaiseLater`]) are kept apart, with their schedule:
/// [`take_scheduled`](Self::take_scheduled).
pub struct RecordedEvents<E> {
    events: Mutex<Vec<E>>,
    scheduled: Mutex<Vec<(E, Schedule)>>,
}

impl<E> RecordedEvents<E> {
    /// An empty recorder.
    pub fn new() -> Self {
        Self {
            events: Mutex::new(Vec::new()),
            scheduled: Mutex::new(Vec::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<E>> {
        // A panic while pushing cannot leave the vector inconsistent: ignore poisoning.
        self.events
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn lock_scheduled(&self) -> std::sync::MutexGuard<'_, Vec<(E, Schedule)>> {
        self.scheduled
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Removes and returns the events raised for later, with their schedules, in the order
    /// they were raised.
    pub fn take_scheduled(&self) -> Vec<(E, Schedule)> {
        std::mem::take(&mut *self.lock_scheduled())
    }

    /// Removes and returns the events recorded so far, in the order they were raised.
    pub fn take(&self) -> Vec<E> {
        std::mem::take(&mut *self.lock())
    }

    /// Number of events recorded for now and not taken (events raised for later are not
    /// counted: [`take_scheduled`](Self::take_scheduled)).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no event is recorded.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// The recorded events, consuming the recorder.
    pub fn into_inner(self) -> Vec<E> {
        self.events
            .into_inner()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl<E: Clone> RecordedEvents<E> {
    /// A copy of the events recorded so far, leaving them in place.
    pub fn snapshot(&self) -> Vec<E> {
        self.lock().clone()
    }
}

impl<E> Default for RecordedEvents<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E: fmt::Debug> fmt::Debug for RecordedEvents<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordedEvents")
            .field("events", &*self.lock())
            .field("scheduled", &*self.lock_scheduled())
            .finish()
    }
}

impl<E> Raise<E> for RecordedEvents<E> {
    fn raise(&self, event: E) {
        self.lock().push(event);
    }
}

impl<E> RaiseLater<E> for RecordedEvents<E> {
    fn raise_scheduled(&self, event: E, schedule: Schedule) {
        self.lock_scheduled().push((event, schedule));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raise_two(ctx: &impl Raise<u8>) {
        ctx.raise(1);
        ctx.raise(2);
    }

    #[test]
    fn records_in_order_and_takes() {
        let events = RecordedEvents::new();
        raise_two(&events);
        raise_two(&&events);
        assert_eq!(events.len(), 4);
        assert_eq!(events.snapshot(), vec![1, 2, 1, 2]);
        assert_eq!(events.take(), vec![1, 2, 1, 2]);
        assert!(events.is_empty());
        events.raise(3);
        assert_eq!(events.into_inner(), vec![3]);
    }

    #[test]
    fn is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<RecordedEvents<String>>();
    }
}
