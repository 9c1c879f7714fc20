//! Rows waiting for their due time (see `outbox_seaorm::schedule`): the list in due order
//! (all, or those of one key), and for operators, per row and per key, run now and cancel
//! with a reason — each recorded in the operator log. Below, the periodic jobs (see
//! `outbox_seaorm::periodic`): schedule, next run, last run; and the unique jobs' newest
//! keys (see `outbox_seaorm::job::Unique`): the job holding each, whether it still holds.

use axum::Form;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use maud::{Markup, html};
use outbox_seaorm::ops::ScheduledTarget;
use serde::Deserialize;
use uuid::Uuid;

use super::Console;
use super::action::{ActionForm, perform};
use super::auth::Operator;
use super::error::ConsoleError;
use super::page::{csrf_field, layout, short, time};
use crate::config::Role;

/// The most rows the list shows.
pub const LIST_LIMIT: u64 = 200;

/// The most unique keys the page shows (newest first; `outbox unique` lists more).
pub const UNIQUE_KEYS_LIMIT: u64 = 50;

/// The list's filter, and the key an action by key is for.
#[derive(Debug, Deserialize)]
pub struct KeyFilter {
    /// One key.
    #[serde(default)]
    key: Option<String>,
}

/// `GET /relays/{relay}/scheduled`.
pub async fn list(
    State(console): State<Console>,
    operator: Operator,
    Path(relay): Path<String>,
    Query(filter): Query<KeyFilter>,
) -> Result<Markup, ConsoleError> {
    let tenant = console.tenant(&relay)?;
    let ops = tenant.operations()?;
    let key = filter.key.as_deref().filter(|key| !key.is_empty());
    let rows = ops.scheduled(key, LIST_LIMIT).await?;
    let summary = ops.scheduled_summary().await?;
    let periodic = ops.periodic().await?;
    let unique_keys = ops.unique_keys(None, UNIQUE_KEYS_LIMIT).await?;
    let base = &operator.base;
    let page = base.at(&format!("/relays/{relay}/scheduled"));
    let operator_may_act = operator.session.role != Role::Reader;
    let body = html! {
        p.facts {
            @if summary.more { "more than " } (summary.waiting) " waiting"
            @if let Some(next) = summary.next_due { " · next due " (time(next)) }
        }
        form.filter method="get" {
            label { "Key " input type="text" name="key" value=(key.unwrap_or("")); }
            button type="submit" { "Filter" }
        }
        @if let (Some(key), true, false) = (key, operator_may_act, rows.is_empty()) {
            div.actions {
                form #run-key method="post" action=(format!("{page}/key/run-now?key={}", urlencoding(key))) data-confirm=(format!("Make every row of key {key} due now?")) {
                    (csrf_field(&operator.session))
                    button type="submit" { "Run all of this key now" }
                }
                form #cancel-key method="post" action=(format!("{page}/key/cancel?key={}", urlencoding(key))) data-confirm=(format!("Cancel every row of key {key}? They will never be published.")) {
                    (csrf_field(&operator.session))
                    input type="text" name="reason" placeholder="Why (required)" required maxlength="1000";
                    button type="submit" { "Cancel all of this key" }
                }
            }
        }
        @if rows.is_empty() {
            p.empty { "Nothing waits" @if let Some(key) = key { " under key " code { (key) } } "." }
        } @else {
            table #scheduled {
                thead { tr { th { "Due" } th { "Key" } th { "Message" } th { "Event type" } th { "Aggregate" } th { "Raised" } @if operator_may_act { th { "Actions" } } } }
                tbody {
                    @for row in &rows {
                        @let id = row.record.envelope.message_id;
                        tr data-message-id=(id) {
                            td.due { (time(row.due_at())) }
                            td { @if let Some(key) = &row.key { a href=(format!("{page}?key={}", urlencoding(key))) { code { (short(key, 60)) } } } @else { "–" } }
                            td { code { (id) } }
                            td { (row.record.envelope.event_type) }
                            td { (row.record.envelope.aggregate_type) " " code { (short(&row.record.envelope.aggregate_id, 60)) } }
                            td { (time(row.record.created_at)) }
                            @if operator_may_act {
                                td.actions {
                                    form.run-now method="post" action=(format!("{page}/{id}/run-now")) data-confirm="Make this row due now?" {
                                        (csrf_field(&operator.session))
                                        button type="submit" { "Run now" }
                                    }
                                    form.cancel method="post" action=(format!("{page}/{id}/cancel")) data-confirm="Cancel this row? It will never be published." {
                                        (csrf_field(&operator.session))
                                        input type="text" name="reason" placeholder="Why (required)" required maxlength="1000";
                                        button type="submit" { "Cancel" }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            @if rows.len() as u64 == LIST_LIMIT { p { "The first " (LIST_LIMIT) " rows by due time; filter by key to see others." } }
        }
        @if !operator_may_act { p.readonly { "Read-only: your role cannot cancel or run scheduled rows." } }
        @if !periodic.is_empty() {
            h2 { "Periodic jobs" }
            table #periodic {
                thead { tr { th { "Name" } th { "Schedule (UTC)" } th { "Next run" } th { "Last run" } th { "Last message" } } }
                tbody {
                    @for job in &periodic {
                        tr data-periodic=(job.name) {
                            td { code { (job.name) } }
                            td { code { (job.schedule) } }
                            td.next { (time(job.next_run_at)) }
                            td { @if let Some(at) = job.last_run_at { (time(at)) } @else { "–" } }
                            td { @if let Some(id) = job.last_message_id { code { (id) } } @else { "–" } }
                        }
                    }
                }
            }
        }
        @if !unique_keys.is_empty() {
            h2 { "Unique keys" }
            table #unique-keys {
                thead { tr { th { "Event type" } th { "Key" } th { "Held by" } th { "Until" } th { "Taken" } th { "Holds" } } }
                tbody {
                    @for unique in &unique_keys {
                        tr data-unique-key=(unique.key) {
                            td { (unique.event_type) }
                            td { code { (short(&unique.key, 60)) } }
                            td { code { (unique.message_id) } }
                            td { @if let Some(at) = unique.expires_at { (time(at)) } @else { "while pending" } }
                            td { (time(unique.created_at)) }
                            td.holds { @if unique.holding { "yes" } @else { "no" } }
                        }
                    }
                }
            }
            @if unique_keys.len() as u64 == UNIQUE_KEYS_LIMIT { p { "The newest " (UNIQUE_KEYS_LIMIT) " keys; " code { "outbox unique --event-type …" } " lists more." } }
        }
    };
    Ok(layout(
        base,
        &operator.session,
        &format!("{relay}: scheduled"),
        body,
    ))
}

/// A key as a query-string value.
fn urlencoding(key: &str) -> String {
    url::form_urlencoded::byte_serialize(key.as_bytes()).collect()
}

/// What an action is for: a row or a key.
enum Act {
    RunNow,
    Cancel,
}

async fn act(
    console: &Console,
    operator: &Operator,
    relay: &str,
    target: Result<ScheduledTarget, ConsoleError>,
    form: &ActionForm,
    act: Act,
) -> Result<Response, ConsoleError> {
    let page = operator.base.at(&format!("/relays/{relay}/scheduled"));
    perform(operator, &form.csrf, &page, async {
        let target = target?;
        let ops = console.tenant(relay)?.operations()?;
        let user = &operator.session.user;
        let reason = form.reason.trim();
        match act {
            Act::RunNow => {
                let reason = Some(reason).filter(|reason| !reason.is_empty());
                ops.run_scheduled_now(&target, user, reason).await?;
            }
            Act::Cancel => {
                ops.cancel_scheduled(&target, user, reason).await?;
            }
        }
        Ok(())
    })
    .await
}

fn row(message_id: &str) -> Result<ScheduledTarget, ConsoleError> {
    Uuid::parse_str(message_id)
        .map(ScheduledTarget::MessageId)
        .map_err(|_| {
            ConsoleError::BadRequest(format!("`{}` is not a message id", short(message_id, 60)))
        })
}

fn key(filter: KeyFilter) -> Result<ScheduledTarget, ConsoleError> {
    filter
        .key
        .filter(|key| !key.is_empty())
        .map(ScheduledTarget::Key)
        .ok_or_else(|| ConsoleError::BadRequest("a key is required".to_owned()))
}

/// `POST /relays/{relay}/scheduled/{message_id}/run-now`.
pub async fn run_now(
    State(console): State<Console>,
    operator: Operator,
    Path((relay, message_id)): Path<(String, String)>,
    Form(form): Form<ActionForm>,
) -> Result<Response, ConsoleError> {
    act(
        &console,
        &operator,
        &relay,
        row(&message_id),
        &form,
        Act::RunNow,
    )
    .await
}

/// `POST /relays/{relay}/scheduled/{message_id}/cancel`.
pub async fn cancel(
    State(console): State<Console>,
    operator: Operator,
    Path((relay, message_id)): Path<(String, String)>,
    Form(form): Form<ActionForm>,
) -> Result<Response, ConsoleError> {
    act(
        &console,
        &operator,
        &relay,
        row(&message_id),
        &form,
        Act::Cancel,
    )
    .await
}

/// `POST /relays/{relay}/scheduled/key/run-now?key=…`.
pub async fn run_key_now(
    State(console): State<Console>,
    operator: Operator,
    Path(relay): Path<String>,
    Query(filter): Query<KeyFilter>,
    Form(form): Form<ActionForm>,
) -> Result<Response, ConsoleError> {
    act(&console, &operator, &relay, key(filter), &form, Act::RunNow).await
}

/// `POST /relays/{relay}/scheduled/key/cancel?key=…`.
pub async fn cancel_key(
    State(console): State<Console>,
    operator: Operator,
    Path(relay): Path<String>,
    Query(filter): Query<KeyFilter>,
    Form(form): Form<ActionForm>,
) -> Result<Response, ConsoleError> {
    act(&console, &operator, &relay, key(filter), &form, Act::Cancel).await
}
