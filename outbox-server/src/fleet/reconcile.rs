//! [`Reconciler`]: reads the tenant sources every `refresh_interval` and makes the running
//! relays match them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::budgets::Budgets;
use super::source::{self, Catalog, Entry};
use super::{Fleet, SourceProblem, TenantProblem, View};
use crate::config::env::env_name;
use crate::config::{RelaySettings, ServerConfig, TenantsSettings};
use crate::relay::{self, RelayTask};

/// One running relay and how to stop it.
#[derive(Debug)]
struct Member {
    task: Arc<RelayTask>,
    stop: CancellationToken,
    handle: JoinHandle<()>,
    /// Its entry merged over the template: a different one is a changed tenant.
    merged: toml::Table,
}

impl Member {
    fn start(
        settings: RelaySettings,
        merged: toml::Table,
        parent: &CancellationToken,
        budgets: &mut Budgets,
    ) -> Self {
        let budget = budgets.of(&settings);
        let task = RelayTask::with_budget(settings, budget.as_ref().map(|(b, t)| (b, *t)));
        relay::register_metrics(task.settings());
        let stop = parent.child_token();
        let handle = tokio::spawn(task.clone().run(stop.clone()));
        Self {
            task,
            stop,
            handle,
            merged,
        }
    }
}

/// Keeps a [`Fleet`] matching the configuration's relays and tenant sources.
#[derive(Debug)]
pub struct Reconciler {
    fleet: Fleet,
    shutdown: CancellationToken,
    statics: Vec<Member>,
    tenants: Option<Arc<TenantsSettings>>,
    catalog: Option<Catalog>,
    /// The last good list of the directory, and of the catalog.
    directory: Option<Vec<Entry>>,
    catalog_list: Option<Vec<Entry>>,
    members: BTreeMap<String, Member>,
    budgets: Budgets,
    /// The problems last logged, by tenant or source: each is logged when it appears or
    /// changes, and its end once.
    logged: BTreeMap<String, String>,
}

impl Reconciler {
    /// The reconciler of `config`'s relays and tenants; nothing runs until [`Self::start`].
    pub fn new(config: &ServerConfig, shutdown: CancellationToken) -> Self {
        let mut budgets = Budgets::new(config.connections.clone());
        let statics = config
            .relays
            .iter()
            .cloned()
            .map(|settings| Member::start(settings, toml::Table::new(), &shutdown, &mut budgets))
            .collect();
        let tenants = config.tenants.clone().map(Arc::new);
        let catalog = tenants
            .as_ref()
            .and_then(|tenants| tenants.catalog.clone())
            .map(Catalog::new);
        let reconciler = Self {
            fleet: Fleet::default(),
            shutdown,
            statics,
            tenants,
            catalog,
            directory: None,
            catalog_list: None,
            members: BTreeMap::new(),
            budgets,
            logged: BTreeMap::new(),
        };
        reconciler.fleet.publish(View {
            relays: reconciler.running(),
            ..View::default()
        });
        reconciler
    }

    /// The fleet it keeps.
    pub fn fleet(&self) -> Fleet {
        self.fleet.clone()
    }

    /// Reads the sources once and applies them (what the service does before it serves).
    pub async fn start(&mut self) {
        self.refresh().await;
    }

    /// Refreshes every `refresh_interval` until shutdown; then waits for every relay to
    /// stop.
    pub async fn run(mut self) {
        if let Some(interval) = self.tenants.as_ref().map(|t| t.refresh_interval) {
            loop {
                tokio::select! {
                    () = self.shutdown.cancelled() => break,
                    () = tokio::time::sleep(interval) => self.refresh().await,
                }
            }
        }
        self.shutdown.cancelled().await;
        let members = std::mem::take(&mut self.members).into_values();
        let handles = self.statics.drain(..).chain(members).map(|m| m.handle);
        for joined in futures_util::future::join_all(handles).await {
            if let Err(join) = joined {
                tracing::error!(%join, "a relay task ended abnormally");
            }
        }
    }

    /// Reads the sources and applies what changed.
    async fn refresh(&mut self) {
        let Some(tenants) = self.tenants.clone() else {
            return;
        };
        let mut sources = Vec::new();
        let mut listed: Vec<Entry> = Vec::new();
        if let Some(directory) = tenants.directory.clone() {
            let origin = format!("directory {}", directory.display());
            let read = tokio::task::spawn_blocking(move || source::read_directory(&directory));
            let read = read
                .await
                .unwrap_or_else(|join| Err(format!("reading the directory failed: {join}")));
            listed.extend(take(&mut self.directory, read, origin, &mut sources));
        }
        if let Some(catalog) = &mut self.catalog {
            let read = catalog.read().await;
            let origin = catalog.origin();
            listed.extend(take(&mut self.catalog_list, read, origin, &mut sources));
        }
        let problems = self.apply(&tenants, listed).await;
        self.log_changes(&problems, &sources);
        self.fleet.publish(View {
            relays: self.running(),
            problems,
            sources,
        });
    }

    /// Starts, stops and restarts relays so that they match `listed`; the problems of the
    /// entries that could not be applied.
    async fn apply(&mut self, tenants: &TenantsSettings, listed: Vec<Entry>) -> Vec<TenantProblem> {
        let mut problems = Vec::new();
        let mut taken: BTreeMap<String, String> = self
            .statics
            .iter()
            .map(|m| {
                (
                    env_name(m.task.name()),
                    "a [[relay]] of the file".to_owned(),
                )
            })
            .collect();
        let mut wanted = BTreeSet::new();
        let mut start = Vec::new();
        let mut stop = Vec::new();
        for entry in listed {
            let problem = |text: String, running: bool| TenantProblem {
                tenant: entry.name.clone(),
                source: entry.origin.clone(),
                problem: text,
                running,
            };
            if let Some(holder) = taken.get(&env_name(&entry.name)) {
                // The first entry of a name keeps it; a later one is reported.
                let running = false;
                problems.push(problem(
                    format!("the name is taken by {holder} (names are compared as in environment variables: upper case, `-` as `_`)"),
                    running,
                ));
                continue;
            }
            taken.insert(env_name(&entry.name), entry.origin.clone());
            wanted.insert(entry.name.clone());
            let running = self.members.contains_key(&entry.name);
            let body = match &entry.body {
                Ok(body) => body,
                Err(error) => {
                    problems.push(problem(error.clone(), running));
                    continue;
                }
            };
            let merged = tenants.merged(&entry.name, body);
            if self
                .members
                .get(&entry.name)
                .is_some_and(|member| member.merged == merged)
            {
                continue;
            }
            match tenants.check(&entry.name, body, merged.clone()) {
                Ok(settings) => {
                    if running {
                        tracing::info!(tenant = %entry.name, source = %entry.origin, "tenant changed: restarting its relay");
                        stop.push(entry.name.clone());
                    } else {
                        tracing::info!(tenant = %entry.name, source = %entry.origin, "tenant added: starting its relay");
                    }
                    start.push((settings, merged));
                }
                Err(error) => {
                    let text = error
                        .problems
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join("; ");
                    problems.push(problem(text, running));
                }
            }
        }
        for name in self.members.keys() {
            if !wanted.contains(name) {
                tracing::info!(tenant = %name, "tenant removed: draining its relay");
                stop.push(name.clone());
            }
        }
        let stopping: Vec<Member> = stop
            .iter()
            .filter_map(|name| self.members.remove(name))
            .collect();
        for member in &stopping {
            member.stop.cancel();
        }
        // They drain at once, each finishing its batch; the restarted ones start after.
        let stopped = stopping
            .into_iter()
            .map(|member| async move { (member.task, member.handle.await) });
        for (task, joined) in futures_util::future::join_all(stopped).await {
            if let Err(join) = joined {
                tracing::error!(tenant = %task.name(), %join, "a relay task ended abnormally");
            }
        }
        for (settings, merged) in start {
            let name = settings.name.clone();
            let member = Member::start(settings, merged, &self.shutdown, &mut self.budgets);
            self.members.insert(name, member);
        }
        problems
    }

    /// The relays running now: the file's, then the tenants' by name.
    fn running(&self) -> Vec<Arc<RelayTask>> {
        self.statics
            .iter()
            .chain(self.members.values())
            .map(|member| member.task.clone())
            .collect()
    }

    /// Logs the problems that appeared or changed, and the end of those that ended.
    fn log_changes(&mut self, problems: &[TenantProblem], sources: &[SourceProblem]) {
        let now: BTreeMap<String, String> = problems
            .iter()
            .map(|p| {
                (
                    format!("tenant {} ({})", p.tenant, p.source),
                    p.problem.clone(),
                )
            })
            .chain(
                sources
                    .iter()
                    .map(|p| (p.source.clone(), p.problem.clone())),
            )
            .collect();
        for (about, problem) in &now {
            if self.logged.get(about) != Some(problem) {
                tracing::warn!(%about, %problem, "tenant entry not applied");
            }
        }
        for about in self.logged.keys() {
            if !now.contains_key(about) {
                tracing::info!(%about, "tenant entry problem resolved");
            }
        }
        self.logged = now;
    }
}

/// The entries of a source's read: this read's when it succeeded (and it becomes the last
/// good one), the last good read's otherwise (with the failure in `sources`).
fn take(
    last_good: &mut Option<Vec<Entry>>,
    read: Result<Vec<Entry>, String>,
    origin: String,
    sources: &mut Vec<SourceProblem>,
) -> Vec<Entry> {
    match read {
        Ok(entries) => {
            *last_good = Some(entries.clone());
            entries
        }
        Err(problem) => {
            sources.push(SourceProblem {
                source: origin,
                problem,
                running_last_good: last_good.is_some(),
            });
            last_good.clone().unwrap_or_default()
        }
    }
}
