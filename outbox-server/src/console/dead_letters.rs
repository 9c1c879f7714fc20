//! Dead rows and failed jobs of an outbox: the list (by status and event type), one row
//! with its envelope, headers, payload and last error, and the two actions, requeue and
//! skip with a reason, each recorded in the operator log.

use axum::Form;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use maud::{Markup, html};
use outbox_core::Envelope;
use serde::Deserialize;
use uuid::Uuid;

use super::Console;
use super::action::{ActionForm, Offer, forms, perform};
use super::auth::Operator;
use super::error::ConsoleError;
use super::operator_log::actions_table;
use super::page::{layout, pretty_json, short, time};

/// The most rows a list shows.
pub const LIST_LIMIT: u64 = 200;

/// The list's filter.
#[derive(Debug, Deserialize)]
pub struct Filter {
    /// `dead` (default) or `failed`.
    #[serde(default)]
    status: Option<String>,
    /// One event type.
    #[serde(default)]
    event_type: Option<String>,
}

/// `GET /relays/{relay}/dead-letters`.
pub async fn list(
    State(console): State<Console>,
    operator: Operator,
    Path(relay): Path<String>,
    Query(filter): Query<Filter>,
) -> Result<Markup, ConsoleError> {
    let tenant = console.tenant(&relay)?;
    let ops = tenant.operations()?;
    let event_type = filter.event_type.as_deref().filter(|text| !text.is_empty());
    let failed = filter.status.as_deref() == Some("failed");
    let rows = if failed {
        ops.failed_jobs(event_type, LIST_LIMIT).await?
    } else {
        ops.dead_letters(event_type, LIST_LIMIT).await?
    };
    let base = &operator.base;
    let body = html! {
        form.filter method="get" {
            label { "Status "
                select name="status" {
                    option value="dead" selected[!failed] { "dead" }
                    option value="failed" selected[failed] { "failed (jobs)" }
                }
            }
            label { " Event type " input type="text" name="event_type" value=(event_type.unwrap_or("")); }
            button type="submit" { "Filter" }
        }
        @if rows.is_empty() {
            p.empty { "No " (if failed { "failed" } else { "dead" }) " rows" @if let Some(t) = event_type { " of " (t) } "." }
        } @else {
            table #dead-letters {
                thead { tr { th { "Seq" } th { "Message" } th { "Event type" } th { "Aggregate" } th { "Attempts" } th { "Last error" } th { "Created" } } }
                tbody {
                    @for row in &rows {
                        tr {
                            td { (row.seq) }
                            td { a href=(base.at(&format!("/relays/{relay}/dead-letters/{}", row.envelope.message_id))) { code { (row.envelope.message_id) } } }
                            td { (row.envelope.event_type) }
                            td { (row.envelope.aggregate_type) " " code { (short(&row.envelope.aggregate_id, 60)) } }
                            td { (row.attempts) }
                            td.error { (short(row.last_error.as_deref().unwrap_or(""), 160)) }
                            td { (time(row.created_at)) }
                        }
                    }
                }
            }
            @if rows.len() as u64 == LIST_LIMIT { p { "The first " (LIST_LIMIT) " rows; filter by event type to see others." } }
        }
    };
    let title = format!("{relay}: {} rows", if failed { "failed" } else { "dead" });
    Ok(layout(base, &operator.session, &title, body))
}

/// The envelope of a row or dead letter: fields, headers, payload.
pub fn envelope_view(envelope: &Envelope) -> Markup {
    html! {
        dl.envelope {
            dt { "Message id" } dd { code { (envelope.message_id) } }
            dt { "Event type" } dd { (envelope.event_type) " (v" (envelope.version) ")" }
            dt { "Aggregate" } dd { (envelope.aggregate_type) " " code { (envelope.aggregate_id) } }
            dt { "Occurred at" } dd { (time(envelope.occurred_at)) }
            @if let Some(id) = envelope.correlation_id { dt { "Correlation id" } dd { code { (id) } } }
            @if let Some(id) = envelope.causation_id { dt { "Causation id" } dd { code { (id) } } }
            @if let Some(trace) = &envelope.traceparent { dt { "traceparent" } dd { code { (trace) } } }
        }
        h2 { "Headers" }
        @if envelope.headers.is_empty() {
            p.empty { "None." }
        } @else {
            table.headers {
                @for (name, value) in &envelope.headers {
                    tr { th { (name) } td { code { (value) } } }
                }
            }
        }
        h2 { "Payload" }
        pre.json #payload { (pretty_json(envelope.payload.get())) }
    }
}

/// `GET /relays/{relay}/dead-letters/{message_id}`.
pub async fn show(
    State(console): State<Console>,
    operator: Operator,
    Path((relay, message_id)): Path<(String, String)>,
) -> Result<Markup, ConsoleError> {
    let message_id = parse_id(&message_id)?;
    let tenant = console.tenant(&relay)?;
    let ops = tenant.operations()?;
    let row = ops
        .find(message_id)
        .await?
        .ok_or_else(|| ConsoleError::NotFound {
            what: format!("message {message_id}"),
        })?;
    let log = ops.operator_log(Some(message_id)).await?;
    let base = &operator.base;
    let status = row.status.as_str();
    let offer = Offer {
        page: &page(&operator, &relay, &message_id.to_string()),
        requeue: matches!(status, "dead" | "failed" | "skipped")
            .then_some("Publish this message again?"),
        requeue_reason: true,
        skip: matches!(status, "dead" | "failed" | "pending")
            .then_some("Never publish this message?"),
    };
    let body = html! {
        p.facts {
            "Status " strong.status data-status=(status) { (status) } " · "
            (row.attempts) " attempts · seq " (row.seq) " · partition " (row.partition)
            " · created " (time(row.created_at))
        }
        @if let Some(error) = &row.last_error {
            h2 { "Last error" }
            pre.error #last-error { (error) }
        }
        (envelope_view(&row.envelope))
        (forms(&operator, offer))
        h2 { "Operator log" }
        (actions_table(&log))
    };
    let title = format!("{relay}: {}", row.envelope.event_type);
    Ok(layout(base, &operator.session, &title, body))
}

/// `POST /relays/{relay}/dead-letters/{message_id}/requeue`.
pub async fn requeue(
    State(console): State<Console>,
    operator: Operator,
    Path((relay, message_id)): Path<(String, String)>,
    Form(form): Form<ActionForm>,
) -> Result<Response, ConsoleError> {
    let page = page(&operator, &relay, &message_id);
    perform(&operator, &form.csrf, &page, async {
        let message_id = parse_id(&message_id)?;
        let ops = console.tenant(&relay)?.operations()?;
        let reason = Some(form.reason.trim()).filter(|reason| !reason.is_empty());
        ops.requeue(message_id, &operator.session.user, reason)
            .await?;
        Ok(())
    })
    .await
}

/// `POST /relays/{relay}/dead-letters/{message_id}/skip`.
pub async fn skip(
    State(console): State<Console>,
    operator: Operator,
    Path((relay, message_id)): Path<(String, String)>,
    Form(form): Form<ActionForm>,
) -> Result<Response, ConsoleError> {
    let page = page(&operator, &relay, &message_id);
    perform(&operator, &form.csrf, &page, async {
        let message_id = parse_id(&message_id)?;
        let ops = console.tenant(&relay)?.operations()?;
        ops.skip(message_id, &operator.session.user, form.reason.trim())
            .await?;
        Ok(())
    })
    .await
}

/// The row's page.
fn page(operator: &Operator, relay: &str, message_id: &str) -> String {
    operator
        .base
        .at(&format!("/relays/{relay}/dead-letters/{message_id}"))
}

fn parse_id(text: &str) -> Result<Uuid, ConsoleError> {
    Uuid::parse_str(text)
        .map_err(|_| ConsoleError::BadRequest(format!("`{}` is not a message id", short(text, 60))))
}
