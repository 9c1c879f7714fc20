//! [`Operations`]: the operations API of one outbox; its methods live one concern per file
//! beside it (status, outbox rows and operator actions, consumer dead letters, purge).

use outbox_core::policy::{DeadLetterPolicy, Ordering};
use sea_orm::DatabaseConnection;

use outbox_core::publish::Publisher;

use crate::config::Outbox;
use crate::relay::Relay;
use crate::sql::Store;
use crate::table::RelayTables;
use crate::transaction::Pool;

/// The operations API for one outbox. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Operations {
    pub(super) db: Pool,
    pub(super) outbox: Outbox,
    pub(super) store: Store,
    pub(super) labels: Vec<metrics::Label>,
    pub(super) ordering: Ordering,
    pub(super) dead_letter_policy: DeadLetterPolicy,
}

impl Operations {
    /// Operations on `outbox` in `db`.
    pub fn new(db: DatabaseConnection, outbox: Outbox) -> Self {
        let store = Store::new(&outbox, db.get_database_backend());
        let labels = outbox.metric_labels().to_vec();
        Self {
            db: Pool::new(db, outbox.transaction_pooling()),
            outbox,
            store,
            labels,
            ordering: Ordering::PerAggregate,
            dead_letter_policy: DeadLetterPolicy::Block,
        }
    }

    /// The ordering and dead-letter policy of the relays, which decide what
    /// [`status`](Self::status) counts as held back (default: the relay's defaults,
    /// [`Ordering::PerAggregate`] and [`DeadLetterPolicy::Block`]).
    #[must_use]
    pub fn with_relay_policy(mut self, ordering: Ordering, dead_letters: DeadLetterPolicy) -> Self {
        self.ordering = ordering;
        self.dead_letter_policy = dead_letters;
        self
    }

    /// The same operations, holding connections only while `seat` is open (the seat of
    /// the relay of this outbox in a server's
    /// [`ConnectionBudget`](crate::budget::ConnectionBudget)).
    #[must_use]
    pub fn with_budget_seat(mut self, seat: crate::budget::BudgetSeat) -> Self {
        self.db = self.db.with_seat(Some(seat));
        self
    }

    /// The names of the relay tables.
    pub fn tables(&self) -> &RelayTables {
        self.store.tables()
    }
}

impl<P: Publisher + 'static> Relay<P> {
    /// The operations API on the same database and outbox, with this relay's ordering and
    /// dead-letter policy.
    pub fn operations(&self) -> Operations {
        Operations::new(self.database().clone(), self.outbox().clone())
            .with_relay_policy(self.config().ordering, self.config().dead_letter_policy)
    }
}
