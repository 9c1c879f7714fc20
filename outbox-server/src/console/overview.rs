//! The overview: per relay its phase, pending rows, oldest claimable age, rows per status,
//! the relays alive with the leases each holds and their last heartbeat, and its log slots.
//! One tenant's database failing shows on its card; the others still show.

use std::time::Duration;

use axum::extract::{Query, State};
use maud::{Markup, html};
use outbox_seaorm::ops::{LogSlotStatus, RelayInstance, ScheduledSummary, StatusReport};
use serde::Deserialize;

use super::Console;
use super::auth::Operator;
use super::page::{Base, age, age_at, layout, short, time};
use super::tenant::Tenant;
use crate::relay::Phase;

/// Tenants per page of the overview: only theirs are read.
pub const PAGE: usize = 20;

/// The longest search text kept.
const MAX_SEARCH: usize = 100;

/// `GET /?q=…&after=…`: the tenants whose name contains `q`, from the one after `after`
/// (keyset paging by name).
#[derive(Debug, Default, Deserialize)]
pub struct OverviewQuery {
    /// Part of a tenant's name.
    pub q: Option<String>,
    /// The last tenant of the previous page.
    pub after: Option<String>,
}

/// How long one tenant's figures may take.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// What the overview read of one tenant.
struct Card<'a> {
    tenant: &'a Tenant,
    figures: Result<(StatusReport, Vec<RelayInstance>, ScheduledSummary), String>,
}

async fn read(tenant: &Tenant) -> Card<'_> {
    let figures = async {
        let ops = tenant.operations().map_err(|error| error.to_string())?;
        let status = ops.status().await.map_err(|error| error.to_string())?;
        let instances = ops
            .relay_instances()
            .await
            .map_err(|error| error.to_string())?;
        let scheduled = ops
            .scheduled_summary()
            .await
            .map_err(|error| error.to_string())?;
        Ok((status, instances, scheduled))
    };
    let figures = tokio::time::timeout(READ_TIMEOUT, figures)
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "the database did not answer within {READ_TIMEOUT:?}"
            ))
        });
    Card { tenant, figures }
}

/// `GET /`.
pub async fn page(
    State(console): State<Console>,
    operator: Operator,
    Query(query): Query<OverviewQuery>,
) -> Markup {
    let mut tenants = console.tenants();
    let total = tenants.len();
    tenants.sort_by(|a, b| a.name().cmp(b.name()));
    let search: Option<String> = query
        .q
        .as_deref()
        .map(str::trim)
        .filter(|q| !q.is_empty())
        .map(|q| q.chars().take(MAX_SEARCH).collect());
    tenants.retain(|t| search.as_deref().is_none_or(|q| t.name().contains(q)));
    let matching = tenants.len();
    let after = query.after.as_deref();
    let mut shown: Vec<&Tenant> = tenants
        .iter()
        .filter(|t| after.is_none_or(|after| t.name() > after))
        .take(PAGE + 1)
        .collect();
    let more = shown.len() > PAGE;
    shown.truncate(PAGE);
    // Only the tenants of this page are read.
    let cards = futures_util::future::join_all(shown.iter().map(|t| read(t))).await;
    let (problems, sources) = console.tenant_problems();
    let base = &operator.base;
    let encode =
        |text: &str| url::form_urlencoded::byte_serialize(text.as_bytes()).collect::<String>();
    let next = shown.last().filter(|_| more).map(|last| {
        let q = search
            .as_deref()
            .map(|q| format!("q={}&", encode(q)))
            .unwrap_or_default();
        base.at(&format!("/?{q}after={}", encode(last.name())))
    });
    let paged = total > PAGE || search.is_some() || after.is_some();
    let body = html! {
        @if paged {
            form.tenant-search method="get" action=(base.at("/")) {
                input type="search" name="q" value=(search.as_deref().unwrap_or("")) placeholder="tenant name" aria-label="Search tenants";
                button type="submit" { "Search" }
                " "
                span.tenant-count { (matching) " of " (total) " tenants" @if after.is_some() { " · after " code { (after.unwrap_or("")) } } }
                @if after.is_some() { " · " a.first-page href=(base.at(&search.as_deref().map_or_else(|| "/".to_owned(), |q| format!("/?q={}", encode(q))))) { "first page" } }
                @if let Some(next) = &next { " · " a.next-page href=(next) { "next page" } }
            }
        }
        @if !problems.is_empty() || !sources.is_empty() {
            section.tenant-problems role="alert" {
                h2 { "Tenants not applied" }
                ul {
                    @for source in &sources {
                        li.source-problem {
                            (source.source) ": " (short(&source.problem, 500))
                            @if source.running_last_good { " (its last good list keeps running)" }
                        }
                    }
                    @for problem in &problems {
                        li.tenant-problem data-tenant=(problem.tenant) {
                            strong { (problem.tenant) } " (" (problem.source) "): " (short(&problem.problem, 500))
                            @if problem.running { " (runs on its last good settings)" }
                        }
                    }
                }
            }
        }
        @for card in &cards {
            (tenant_card(base, card))
        }
    };
    layout(base, &operator.session, "Overview", body)
}

fn tenant_card(base: &Base, card: &Card<'_>) -> Markup {
    let tenant = card.tenant;
    let name = tenant.name();
    let link = |path: &str| base.at(&format!("/relays/{name}{path}"));
    html! {
        section.tenant data-relay=(name) {
            h2 { (name) }
            p.facts {
                @if let Some(task) = tenant.relay() {
                    @let (phase, since) = task.phase();
                    span.phase data-phase=(phase.as_str()) { (phase.as_str()) } " for " (age(since)) " · "
                    (task.settings().method.as_str()) " relay · "
                    (task.settings().broker.kind.as_str()) " · "
                    @if let Phase::Retrying { error, failures } = &phase {
                        span.error { "failed " (failures) "×: " (short(error, 300)) } " · "
                    } @else if let Some(failure) = task.database_failure() {
                        span.error { (failure.step) " failing " (failure.failures) "×: " (short(&failure.error, 300)) } " · "
                    }
                }
                "outbox " code { (tenant.outbox().outbox_table()) } " · write mode "
                (tenant.outbox().write_mode().as_str())
            }
            @match &card.figures {
                Err(error) => p.error role="alert" { (error) },
                Ok((status, instances, scheduled)) => {
                    table.figures {
                        tr { th { "Pending" } td.pending { (status.pending) } }
                        tr { th { "Oldest claimable" } td { (status.oldest_claimable_age.map_or_else(|| "–".to_owned(), age)) } }
                        tr { th { "In backoff" } td { (status.in_backoff) } }
                        tr { th { "Held back" } td { (status.held) } }
                        tr { th { "Dead" } td.dead { a href=(link("/dead-letters")) { (status.dead()) } } }
                        tr { th { "Failed jobs" } td { a href=(link("/dead-letters?status=failed")) { (status.failed()) } } }
                        tr { th { "Skipped" } td { (status.skipped) } }
                        tr { th { "Scheduled" } td.scheduled {
                            a href=(link("/scheduled")) { @if scheduled.more { "more than " } (scheduled.waiting) }
                            @if let Some(next) = scheduled.next_due { " · next due " (time(next)) }
                        } }
                    }
                    @if !status.dead_by_event_type.is_empty() || !status.failed_by_event_type.is_empty() {
                        ul.by-type {
                            @for (event_type, count) in &status.dead_by_event_type {
                                li { a href=(link(&format!("/dead-letters?event_type={event_type}"))) { (count) " dead " (event_type) } }
                            }
                            @for (event_type, count) in &status.failed_by_event_type {
                                li { a href=(link(&format!("/dead-letters?status=failed&event_type={event_type}"))) { (count) " failed " (event_type) } }
                            }
                        }
                    }
                    h3 { "Relays alive" }
                    @if instances.is_empty() {
                        p { "None: no relay has a live lease on this outbox." }
                    } @else {
                        table.instances {
                            thead { tr { th { "Instance" } th { "Last heartbeat" } th { "Leases" } } }
                            tbody {
                                @for instance in instances {
                                    tr {
                                        td { code { (instance.instance_id) } }
                                        td { (age_at(instance.heartbeat_at, chrono::Utc::now())) " ago" }
                                        td { (leases(&instance.leases)) }
                                    }
                                }
                            }
                        }
                    }
                    @if let Some(log) = &status.log_relay {
                        h3 { "Log slots" }
                        table.slots {
                            thead { tr { th { "Slot" } th { "Active relay" } th { "Lag" } th { "WAL status" } th { "Backfilled" } th { "Acknowledged" } } }
                            tbody {
                                @for slot in &log.slots {
                                    tr {
                                        td { code { (slot.slot) } }
                                        td { (slot.active_relay.as_deref().unwrap_or("–")) }
                                        td.lag { (slot_lag(slot)) }
                                        td { (slot.wal_status.as_deref().unwrap_or("–")) }
                                        td { (if slot.backfilled { "yes" } else { "no" }) }
                                        td { code { (slot.acknowledged_lsn.as_deref().unwrap_or("–")) } }
                                    }
                                }
                            }
                        }
                        p { a href=(link("/log-dead-letters")) { (log.dead) " dead, " (log.parked) " parked" } " in the log relay's dead letters" }
                    }
                }
            }
            p.links {
                a href=(link("/dead-letters")) { "Dead letters" } " · "
                a href=(link("/log-dead-letters")) { "Log relay dead letters" } " · "
                a href=(link("/inbox-dead-letters")) { "Consumer dead letters" } " · "
                a href=(link("/scheduled")) { "Scheduled" } " · "
                a href=(link("/operator-log")) { "Operator log" }
            }
        }
    }
}

/// `partitions 0–63` for a run of partition leases, the names otherwise.
fn leases(names: &[String]) -> String {
    let mut partitions: Vec<u32> = names
        .iter()
        .filter_map(|name| name.strip_prefix("partition/")?.parse().ok())
        .collect();
    partitions.sort_unstable();
    let mut parts = Vec::new();
    let mut runs: Vec<(u32, u32)> = Vec::new();
    for partition in partitions {
        match runs.last_mut() {
            Some((_, end)) if *end + 1 == partition => *end = partition,
            _ => runs.push((partition, partition)),
        }
    }
    if !runs.is_empty() {
        let text: Vec<String> = runs
            .iter()
            .map(|(start, end)| {
                if start == end {
                    start.to_string()
                } else {
                    format!("{start}–{end}")
                }
            })
            .collect();
        parts.push(format!("partitions {}", text.join(", ")));
    }
    parts.extend(
        names
            .iter()
            .filter(|name| !name.starts_with("partition/"))
            .cloned(),
    );
    if parts.is_empty() {
        "none".to_owned()
    } else {
        parts.join(", ")
    }
}

/// A slot's lag: WAL bytes (PostgreSQL) or binlogged transactions (MariaDB).
fn slot_lag(slot: &LogSlotStatus) -> String {
    match (slot.lag_bytes, slot.lag_transactions) {
        (Some(count), _) => bytes(count),
        (None, Some(1)) => "1 transaction".to_owned(),
        (None, Some(count)) => format!("{count} transactions"),
        (None, None) => "–".to_owned(),
    }
}

/// `12.3 MiB`.
fn bytes(count: i64) -> String {
    #[allow(clippy::cast_precision_loss)]
    let value = count as f64;
    if count < 1024 {
        format!("{count} B")
    } else if count < 1_048_576 {
        format!("{:.1} KiB", value / 1024.0)
    } else {
        format!("{:.1} MiB", value / 1_048_576.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_and_bytes_read_short() {
        let names: Vec<String> = [0, 1, 2, 3, 7, 9, 10]
            .iter()
            .map(|n| format!("partition/{n}"))
            .chain(["relay".to_owned()])
            .collect();
        assert_eq!(leases(&names), "partitions 0–3, 7, 9–10, relay");
        assert_eq!(leases(&[]), "none");
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(3 * 1_048_576), "3.0 MiB");
    }
}
