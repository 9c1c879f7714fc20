//! Which aggregates a consumer holds: those with parked messages ([`super::parked`]) and,
//! under [`DeadLetterPolicy::Block`], those with a `dead` or `requeued` dead letter. A new
//! message of a held aggregate is parked behind the others instead of being applied.
//!
//! The set lives in memory so that a message of an aggregate nothing holds (nearly every
//! message) costs no query. It is loaded from the database on first use and reloaded after
//! every redelivery round, and every write that starts a hold (a park, a dead letter) runs
//! under its lock together with the update of the set: a reload can then never miss a hold
//! that is being written, so a message is never applied ahead of one parked before it.
//! Holds written by other processes of the same consumer name are seen at the next reload.

use std::collections::{HashMap, HashSet};

use outbox_core::policy::DeadLetterPolicy;
use sea_orm::DbErr;
use tokio::sync::{Mutex, MutexGuard};

use crate::config::Outbox;
use crate::sql::inbox::hold::held_aggregates;
use crate::transaction::Pool;

/// An aggregate: type and id.
pub(crate) type Key<'a> = (&'a str, &'a str);

/// The held aggregates of one consumer.
#[derive(Debug, Default)]
pub(crate) struct Holds {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    loaded: bool,
    /// Aggregate type → ids.
    keys: HashMap<String, HashSet<String>>,
}

impl State {
    fn contains(&self, (aggregate_type, aggregate_id): Key<'_>) -> bool {
        self.keys
            .get(aggregate_type)
            .is_some_and(|ids| ids.contains(aggregate_id))
    }

    /// Marks an aggregate held.
    fn insert(&mut self, (aggregate_type, aggregate_id): Key<'_>) {
        self.keys
            .entry(aggregate_type.to_owned())
            .or_default()
            .insert(aggregate_id.to_owned());
    }

    fn len(&self) -> usize {
        self.keys.values().map(HashSet::len).sum()
    }
}

/// Where the holds of a consumer are read from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Source<'a> {
    pub(crate) db: &'a Pool,
    pub(crate) outbox: &'a Outbox,
    pub(crate) consumer: &'a str,
    pub(crate) policy: DeadLetterPolicy,
}

impl Source<'_> {
    async fn read(&self) -> Result<HashMap<String, HashSet<String>>, DbErr> {
        let mut keys: HashMap<String, HashSet<String>> = HashMap::new();
        let held = held_aggregates(
            self.db,
            self.outbox,
            self.consumer,
            self.policy == DeadLetterPolicy::Block,
        )
        .await?;
        for (aggregate_type, aggregate_id) in held {
            keys.entry(aggregate_type).or_default().insert(aggregate_id);
        }
        Ok(keys)
    }
}

impl Holds {
    /// The set, loaded from `source` on first use, locked.
    async fn locked(&self, source: Source<'_>) -> Result<MutexGuard<'_, State>, DbErr> {
        let mut state = self.state.lock().await;
        if !state.loaded {
            state.keys = source.read().await?;
            state.loaded = true;
        }
        Ok(state)
    }

    /// Whether `key` is held.
    pub(crate) async fn is_held(&self, source: Source<'_>, key: Key<'_>) -> Result<bool, DbErr> {
        Ok(self.locked(source).await?.contains(key))
    }

    /// Runs `write` under the lock, with whether `key` is held; `write` marks the key held
    /// (through the state it is given) when it starts a hold.
    pub(crate) async fn write<T, F>(
        &self,
        source: Source<'_>,
        key: Key<'_>,
        write: F,
    ) -> Result<T, DbErr>
    where
        F: AsyncFnOnce(bool) -> Result<(T, bool), DbErr>,
    {
        let mut state = self.locked(source).await?;
        let held = state.contains(key);
        let (value, hold) = write(held).await?;
        if hold {
            state.insert(key);
        }
        Ok(value)
    }

    /// Reloads the set from the database (holds released by a redelivery round or an
    /// operator's skip go away); returns how many aggregates are held.
    pub(crate) async fn reload(&self, source: Source<'_>) -> Result<usize, DbErr> {
        let mut state = self.state.lock().await;
        state.keys = source.read().await?;
        state.loaded = true;
        Ok(state.len())
    }
}
