//! [`Tenant`]: one outbox the console shows — its name, its configuration, and where its
//! database connection comes from (a connection of the embedding service's, or the relay
//! task of the `outbox` service once it connected).

use std::sync::Arc;

use outbox_core::policy::{DeadLetterPolicy, Ordering};
use outbox_seaorm::Outbox;
use outbox_seaorm::ops::Operations;
use sea_orm::DatabaseConnection;

use super::error::ConsoleError;
use crate::config::RelayMethod;
use crate::fleet::{Fleet, SourceProblem, TenantProblem};
use crate::relay::RelayTask;

/// The outboxes a console shows, read at every request: a fixed list (`Vec<Tenant>`, a
/// service of one's own) or the relay service's [`Fleet`], whose tenants change while it
/// runs.
pub trait Tenants: std::fmt::Debug + Send + Sync + 'static {
    /// The tenants now.
    fn tenants(&self) -> Vec<Tenant>;

    /// The tenant entries that could not be applied.
    fn problems(&self) -> Vec<TenantProblem> {
        Vec::new()
    }

    /// The tenant sources that could not be read.
    fn source_problems(&self) -> Vec<SourceProblem> {
        Vec::new()
    }
}

impl Tenants for Vec<Tenant> {
    fn tenants(&self) -> Vec<Tenant> {
        self.clone()
    }
}

impl Tenants for Fleet {
    fn tenants(&self) -> Vec<Tenant> {
        self.relays().into_iter().map(Tenant::of_relay).collect()
    }

    fn problems(&self) -> Vec<TenantProblem> {
        Fleet::problems(self)
    }

    fn source_problems(&self) -> Vec<SourceProblem> {
        Fleet::source_problems(self)
    }
}

/// One outbox in the console.
#[derive(Debug, Clone)]
pub struct Tenant {
    name: String,
    outbox: Outbox,
    database: Database,
    ordering: Ordering,
    dead_letter_policy: DeadLetterPolicy,
}

#[derive(Debug, Clone)]
enum Database {
    Connected(DatabaseConnection),
    Relay(Arc<RelayTask>),
}

impl Tenant {
    /// An outbox in a database the embedding service is connected to, shown as `name`.
    pub fn new(name: impl Into<String>, db: DatabaseConnection, outbox: Outbox) -> Self {
        Self {
            name: name.into(),
            outbox,
            database: Database::Connected(db),
            ordering: Ordering::default(),
            dead_letter_policy: DeadLetterPolicy::default(),
        }
    }

    /// The outbox of a relay of the service.
    pub fn of_relay(task: Arc<RelayTask>) -> Self {
        let settings = task.settings();
        let (ordering, dead_letter_policy) = match &settings.method {
            RelayMethod::Polling => (settings.relay.ordering, settings.relay.dead_letter_policy),
            RelayMethod::Log(log) => (Ordering::PerAggregate, log.dead_letter_policy),
        };
        Self {
            name: settings.name.clone(),
            outbox: settings.outbox.clone(),
            ordering,
            dead_letter_policy,
            database: Database::Relay(task),
        }
    }

    /// The relay task, when the service runs one for this outbox.
    pub fn relay(&self) -> Option<&Arc<RelayTask>> {
        match &self.database {
            Database::Relay(task) => Some(task),
            Database::Connected(_) => None,
        }
    }

    /// Its name (the `{relay}` of the console's paths).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its configuration.
    pub fn outbox(&self) -> &Outbox {
        &self.outbox
    }

    /// The operations on it.
    ///
    /// # Errors
    /// [`ConsoleError::NotConnected`] while the relay has not connected to its database.
    pub fn operations(&self) -> Result<Operations, ConsoleError> {
        let ops = match &self.database {
            Database::Connected(db) => Operations::new(db.clone(), self.outbox.clone()),
            Database::Relay(task) => {
                task.operations()
                    .ok_or_else(|| ConsoleError::NotConnected {
                        relay: self.name.clone(),
                    })?
            }
        };
        Ok(ops.with_relay_policy(self.ordering, self.dead_letter_policy))
    }
}
