//! [`Fleet`]: the relays the service runs now — the file's `[[relay]]`s and the tenants its
//! `[tenants]` sources list — with the problems of the entries it could not apply. The
//! [`Reconciler`] keeps it current while the service runs; `/readyz`, `/metrics` and the
//! console read it.
//!
//! A refresh reads every source ([`source`]), then per tenant: a new entry starts a relay;
//! a removed one drains (the relay finishes its batch and releases its leases) and stops; a
//! changed one (its entry merged over the template differs) drains and starts again on its
//! own, the others untouched. An entry that cannot be read or checked is a
//! [`TenantProblem`] and is skipped; a tenant whose entry turns bad keeps running on its
//! last good settings until the entry is fixed or removed. A source that cannot be read is
//! a [`SourceProblem`], and its last good list keeps running.

mod budgets;
mod reconcile;
pub mod source;

use std::sync::{Arc, PoisonError, RwLock};

use serde::Serialize;

use crate::relay::RelayTask;

pub use reconcile::Reconciler;

/// An entry the service could not apply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct TenantProblem {
    /// The tenant's name.
    pub tenant: String,
    /// Where its entry comes from: `file <path>` or `catalog <table>`.
    pub source: String,
    /// What is wrong: every problem, with its key path.
    pub problem: String,
    /// Whether the tenant still runs on its last good settings.
    pub running: bool,
}

/// A source the service could not read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct SourceProblem {
    /// `directory <path>` or `catalog <table>`.
    pub source: String,
    /// Why.
    pub problem: String,
    /// Whether its last good list keeps running (false: it was never read).
    pub running_last_good: bool,
}

/// The relays running now, and the problems of what could not run.
#[derive(Debug, Clone, Default)]
pub struct Fleet {
    view: Arc<RwLock<View>>,
}

#[derive(Debug, Clone, Default)]
struct View {
    relays: Vec<Arc<RelayTask>>,
    problems: Vec<TenantProblem>,
    sources: Vec<SourceProblem>,
}

impl Fleet {
    /// A fleet of these relays, which never changes (a service of one's own).
    pub fn fixed(relays: Vec<Arc<RelayTask>>) -> Self {
        let fleet = Self::default();
        fleet.publish(View {
            relays,
            ..View::default()
        });
        fleet
    }

    /// The relays, the file's first (in file order), then the tenants by name.
    pub fn relays(&self) -> Vec<Arc<RelayTask>> {
        self.read().relays.clone()
    }

    /// The relay named `name`.
    pub fn relay(&self, name: &str) -> Option<Arc<RelayTask>> {
        self.read()
            .relays
            .iter()
            .find(|relay| relay.name() == name)
            .cloned()
    }

    /// The entries that could not be applied, by tenant.
    pub fn problems(&self) -> Vec<TenantProblem> {
        self.read().problems.clone()
    }

    /// The sources that could not be read.
    pub fn source_problems(&self) -> Vec<SourceProblem> {
        self.read().sources.clone()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, View> {
        self.view.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn publish(&self, view: View) {
        *self.view.write().unwrap_or_else(PoisonError::into_inner) = view;
    }
}
