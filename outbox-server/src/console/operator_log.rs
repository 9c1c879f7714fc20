//! The operator log: who did what to which message, when, and why.

use axum::extract::{Path, State};
use maud::{Markup, html};
use outbox_seaorm::ops::OperatorAction;

use super::Console;
use super::auth::Operator;
use super::error::ConsoleError;
use super::page::{layout, short, time};

/// The most entries the page shows (the latest).
pub const PAGE_LIMIT: u64 = 500;

/// A table of `actions`, newest first.
pub fn actions_table(actions: &[OperatorAction]) -> Markup {
    html! {
        @if actions.is_empty() {
            p.empty { "No operator action yet." }
        } @else {
            table.operator-log {
                thead { tr { th { "When" } th { "Who" } th { "What" } th { "Message" } th { "Event type" } th { "Was" } th { "Why" } th { "Detail" } } }
                tbody {
                    @for action in actions.iter().rev() {
                        tr {
                            td { (time(action.at)) }
                            td.actor { (action.actor) }
                            td.action { (action.action.as_str()) }
                            td { code { (action.message_id) } }
                            td { (action.event_type) }
                            td { (action.previous_status) }
                            td.reason { (short(action.reason.as_deref().unwrap_or(""), 300)) }
                            td.detail { (action.detail.as_deref().unwrap_or("")) }
                        }
                    }
                }
            }
        }
    }
}

/// `GET /relays/{relay}/operator-log`.
pub async fn page(
    State(console): State<Console>,
    operator: Operator,
    Path(relay): Path<String>,
) -> Result<Markup, ConsoleError> {
    let ops = console.tenant(&relay)?.operations()?;
    let log = ops.latest_operator_actions(PAGE_LIMIT).await?;
    let body = html! {
        @if log.len() as u64 == PAGE_LIMIT { p { "The latest " (PAGE_LIMIT) " entries." } }
        (actions_table(&log))
    };
    Ok(layout(
        &operator.base,
        &operator.session,
        &format!("{relay}: operator log"),
        body,
    ))
}
