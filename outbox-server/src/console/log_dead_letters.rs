//! The log relay's dead letters and the events parked behind them: the list, one with its
//! envelope and error, requeue and skip with a reason (recorded in the operator log). A
//! requeued dead letter goes out at the active log relay's next heartbeat, then the events
//! parked behind it, in order.

use axum::Form;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use maud::{Markup, html};
use outbox_seaorm::record::log_dead_letter::LogDeadLetterStatus;
use serde::Deserialize;

use super::Console;
use super::action::{ActionForm, Offer, changed, forms, perform};
use super::auth::Operator;
use super::dead_letters::{LIST_LIMIT, envelope_view};
use super::error::ConsoleError;
use super::page::{layout, short, time};

/// The list's filter.
#[derive(Debug, Deserialize)]
pub struct Filter {
    /// `dead`, `parked`, `requeued`, `skipped`, `published`; all when absent.
    #[serde(default)]
    status: Option<String>,
    /// One event type.
    #[serde(default)]
    event_type: Option<String>,
}

/// `GET /relays/{relay}/log-dead-letters`.
pub async fn list(
    State(console): State<Console>,
    operator: Operator,
    Path(relay): Path<String>,
    Query(filter): Query<Filter>,
) -> Result<Markup, ConsoleError> {
    let ops = console.tenant(&relay)?.operations()?;
    let status = filter
        .status
        .as_deref()
        .and_then(LogDeadLetterStatus::parse);
    let event_type = filter.event_type.as_deref().filter(|text| !text.is_empty());
    let letters = ops
        .log_dead_letters(None, event_type, status, LIST_LIMIT)
        .await;
    let base = &operator.base;
    let body = html! {
        form.filter method="get" {
            label { "Status "
                select name="status" {
                    option value="" selected[status.is_none()] { "all" }
                    @for choice in ["dead", "parked", "requeued", "skipped", "published"] {
                        option value=(choice) selected[status.map(LogDeadLetterStatus::as_str) == Some(choice)] { (choice) }
                    }
                }
            }
            label { " Event type " input type="text" name="event_type" value=(event_type.unwrap_or("")); }
            button type="submit" { "Filter" }
        }
        @match &letters {
            Err(error) => p.error { "Cannot read the log relay's dead letters (an outbox without a log relay has none): " (error) },
            Ok(letters) if letters.is_empty() => p.empty { "No log relay dead letters." },
            Ok(letters) => table #log-dead-letters {
                thead { tr { th { "Id" } th { "Status" } th { "Slot" } th { "Event type" } th { "Aggregate" } th { "Attempts" } th { "Error" } th { "Dead at" } } }
                tbody {
                    @for letter in letters {
                        tr {
                            td { a href=(base.at(&format!("/relays/{relay}/log-dead-letters/{}", letter.id))) { (letter.id) } }
                            td { (letter.status.as_str()) }
                            td { code { (letter.slot) } }
                            td { (letter.event_type) }
                            td { (letter.aggregate_type) " " code { (short(&letter.aggregate_id, 60)) } }
                            td { (letter.attempts) }
                            td.error { (short(&letter.error, 160)) }
                            td { (time(letter.dead_at)) }
                        }
                    }
                }
            },
        }
    };
    Ok(layout(
        base,
        &operator.session,
        &format!("{relay}: log relay dead letters"),
        body,
    ))
}

/// `GET /relays/{relay}/log-dead-letters/{id}`.
pub async fn show(
    State(console): State<Console>,
    operator: Operator,
    Path((relay, id)): Path<(String, i64)>,
) -> Result<Markup, ConsoleError> {
    let ops = console.tenant(&relay)?.operations()?;
    let letter = ops
        .log_dead_letter(id)
        .await?
        .ok_or_else(|| ConsoleError::NotFound {
            what: format!("log relay dead letter {id}"),
        })?;
    let base = &operator.base;
    let dead = letter.status == LogDeadLetterStatus::Dead;
    let offer = Offer {
        page: &page(&operator, &relay, id),
        requeue: dead.then_some("Publish this event again, then the events parked behind it?"),
        requeue_reason: false,
        skip: dead.then_some("Never publish this event?"),
    };
    let body = html! {
        p.facts {
            "Status " strong.status data-status=(letter.status.as_str()) { (letter.status.as_str()) }
            " · slot " code { (letter.slot) } " · " (letter.attempts) " attempts · dead at " (time(letter.dead_at))
            @if let Some(by) = &letter.resolved_by { " · resolved by " (by) }
            @if let Some(at) = letter.resolved_at { " at " (time(at)) }
            @if let Some(reason) = &letter.reason { " · why: " (reason) }
        }
        h2 { "Error" }
        pre.error #last-error { (letter.error) }
        @match &letter.envelope {
            Some(envelope) => (envelope_view(envelope)),
            None => p.error { "The event could not be read into an envelope; its key fields are above." },
        }
        (forms(&operator, offer))
    };
    Ok(layout(
        base,
        &operator.session,
        &format!("{relay}: {}", letter.event_type),
        body,
    ))
}

/// `POST /relays/{relay}/log-dead-letters/{id}/requeue`.
pub async fn requeue(
    State(console): State<Console>,
    operator: Operator,
    Path((relay, id)): Path<(String, i64)>,
    Form(form): Form<ActionForm>,
) -> Result<Response, ConsoleError> {
    let page = page(&operator, &relay, id);
    perform(&operator, &form.csrf, &page, async {
        let ops = console.tenant(&relay)?.operations()?;
        changed(
            ops.requeue_log_dead_letter(id, &operator.session.user)
                .await?,
            &format!("log relay dead letter {id}"),
        )
    })
    .await
}

/// `POST /relays/{relay}/log-dead-letters/{id}/skip`.
pub async fn skip(
    State(console): State<Console>,
    operator: Operator,
    Path((relay, id)): Path<(String, i64)>,
    Form(form): Form<ActionForm>,
) -> Result<Response, ConsoleError> {
    let page = page(&operator, &relay, id);
    perform(&operator, &form.csrf, &page, async {
        let ops = console.tenant(&relay)?.operations()?;
        changed(
            ops.skip_log_dead_letter(id, &operator.session.user, form.reason.trim())
                .await?,
            &format!("log relay dead letter {id}"),
        )
    })
    .await
}

/// The dead letter's page.
fn page(operator: &Operator, relay: &str, id: i64) -> String {
    operator
        .base
        .at(&format!("/relays/{relay}/log-dead-letters/{id}"))
}
