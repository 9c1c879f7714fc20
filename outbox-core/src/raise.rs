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

/// A [`Raise`] that only records the events, in order. For unit tests of aggregates.
pub struct RecordedEvents<E> {
    events: Mutex<Vec<E>>,
}

impl<E> RecordedEvents<E> {
    /// An empty recorder.
    pub fn new() -> Self {
        Self {
            events: Mutex::new(Vec::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<E>> {
        // A panic while pushing cannot leave the vector inconsistent: ignore poisoning.
        self.events
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Removes and returns the events recorded so far, in the order they were raised.
    pub fn take(&self) -> Vec<E> {
        std::mem::take(&mut *self.lock())
    }

    /// Number of events recorded and not taken.
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
            .finish()
    }
}

impl<E> Raise<E> for RecordedEvents<E> {
    fn raise(&self, event: E) {
        self.lock().push(event);
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
