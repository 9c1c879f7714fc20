//! The consumers' dead letters (the inbox side): messages a consumer could not handle,
//! with the stored envelope (or the raw headers and body of one that could not be read),
//! the error, and requeue (the running consumer of that name redelivers it) or skip with a
//! reason.

use axum::Form;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use maud::{Markup, html};
use outbox_seaorm::inbox::dead_letter::{DeadLetterStatus, StoredMessage};
use serde::Deserialize;

use super::Console;
use super::action::{ActionForm, Offer, changed, forms, perform};
use super::auth::Operator;
use super::dead_letters::{LIST_LIMIT, envelope_view};
use super::error::ConsoleError;
use super::page::{layout, pretty_json, short, time};

/// The list's filter.
#[derive(Debug, Deserialize)]
pub struct Filter {
    /// One consumer.
    #[serde(default)]
    consumer: Option<String>,
    /// `dead`, `requeued`, `resolved` or `skipped`; all when absent.
    #[serde(default)]
    status: Option<String>,
}

/// `GET /relays/{relay}/inbox-dead-letters`.
pub async fn list(
    State(console): State<Console>,
    operator: Operator,
    Path(relay): Path<String>,
    Query(filter): Query<Filter>,
) -> Result<Markup, ConsoleError> {
    let ops = console.tenant(&relay)?.operations()?;
    let status = filter.status.as_deref().and_then(DeadLetterStatus::parse);
    let consumer = filter.consumer.as_deref().filter(|text| !text.is_empty());
    let letters = ops
        .consumer_dead_letters(consumer, status, LIST_LIMIT)
        .await;
    let base = &operator.base;
    let body = html! {
        form.filter method="get" {
            label { "Consumer " input type="text" name="consumer" value=(consumer.unwrap_or("")); }
            label { " Status "
                select name="status" {
                    option value="" selected[status.is_none()] { "all" }
                    @for choice in ["dead", "requeued", "resolved", "skipped"] {
                        option value=(choice) selected[status.map(DeadLetterStatus::as_str) == Some(choice)] { (choice) }
                    }
                }
            }
            button type="submit" { "Filter" }
        }
        @match &letters {
            Err(error) => p.error { "Cannot read the consumers' dead letters (this database may hold no inbox): " (error) },
            Ok(letters) if letters.is_empty() => p.empty { "No consumer dead letters." },
            Ok(letters) => table #inbox-dead-letters {
                thead { tr { th { "Id" } th { "Status" } th { "Consumer" } th { "Event type" } th { "Reason" } th { "Attempts" } th { "Error" } th { "Dead at" } } }
                tbody {
                    @for letter in letters {
                        tr {
                            td { a href=(base.at(&format!("/relays/{relay}/inbox-dead-letters/{}", letter.id))) { (letter.id) } }
                            td { (letter.status.as_str()) }
                            td { (letter.consumer) }
                            td { (letter.event_type.as_deref().unwrap_or("–")) }
                            td { (letter.reason) }
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
        &format!("{relay}: consumer dead letters"),
        body,
    ))
}

/// `GET /relays/{relay}/inbox-dead-letters/{id}`.
pub async fn show(
    State(console): State<Console>,
    operator: Operator,
    Path((relay, id)): Path<(String, i64)>,
) -> Result<Markup, ConsoleError> {
    let ops = console.tenant(&relay)?.operations()?;
    let letter = ops
        .consumer_dead_letter(id)
        .await?
        .ok_or_else(|| ConsoleError::NotFound {
            what: format!("consumer dead letter {id}"),
        })?;
    let base = &operator.base;
    let dead = letter.status == DeadLetterStatus::Dead;
    let offer = Offer {
        page: &page(&operator, &relay, id),
        requeue: dead.then_some("Hand this message to its consumer again?"),
        requeue_reason: false,
        skip: dead.then_some("Give this message up?"),
    };
    let body = html! {
        p.facts {
            "Status " strong.status data-status=(letter.status.as_str()) { (letter.status.as_str()) }
            " · consumer " (letter.consumer) " · " (letter.reason) " · " (letter.attempts) " attempts · dead at " (time(letter.dead_at))
            @if let Some(by) = &letter.requeued_by { " · requeued by " (by) }
            @if let Some(by) = &letter.skipped_by { " · skipped by " (by) }
            @if let Some(reason) = &letter.skip_reason { " · why: " (reason) }
        }
        h2 { "Error" }
        pre.error #last-error { (letter.error) }
        @match &letter.message {
            StoredMessage::Envelope(envelope) => (envelope_view(envelope)),
            StoredMessage::Binary(raw) => {
                h2 { "Headers (as received)" }
                table.headers {
                    @for (name, value) in &raw.headers { tr { th { (name) } td { code { (value) } } } }
                }
                h2 { "Body (" (raw.body_bytes) " bytes, SHA-256 " code { (raw.body_sha256) } ")" }
                @if raw.truncated { p { "Cut to what the dead letter stores." } }
                pre.json #payload { (pretty_json(&raw.body)) }
            }
            _ => p { "A message stored in a form this console does not know." },
        }
        (forms(&operator, offer))
    };
    let title = format!("{relay}: consumer dead letter {id}");
    Ok(layout(base, &operator.session, &title, body))
}

/// `POST /relays/{relay}/inbox-dead-letters/{id}/requeue`.
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
            ops.requeue_consumer_dead_letter(id, &operator.session.user)
                .await?,
            &format!("consumer dead letter {id}"),
        )
    })
    .await
}

/// `POST /relays/{relay}/inbox-dead-letters/{id}/skip`.
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
            ops.skip_consumer_dead_letter(id, &operator.session.user, form.reason.trim())
                .await?,
            &format!("consumer dead letter {id}"),
        )
    })
    .await
}

/// The dead letter's page.
fn page(operator: &Operator, relay: &str, id: i64) -> String {
    operator
        .base
        .at(&format!("/relays/{relay}/inbox-dead-letters/{id}"))
}
