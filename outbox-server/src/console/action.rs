//! What the three dead-letter pages (outbox rows, log relay, consumers) share: the requeue
//! and skip forms, shown to operators only, and the steps of an action — check the role and
//! the CSRF token, act, go back to the page.

use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};
use serde::Deserialize;

use super::auth::Operator;
use super::error::ConsoleError;
use super::page::csrf_field;
use crate::config::Role;

/// An action's form.
#[derive(Debug, Deserialize)]
pub struct ActionForm {
    /// The session's CSRF token.
    #[serde(default)]
    pub csrf: String,
    /// Why.
    #[serde(default)]
    pub reason: String,
}

/// The forms a page offers.
#[derive(Debug, Clone, Copy)]
pub struct Offer<'a> {
    /// The page's path (with the console's base); the forms post to `<page>/requeue` and
    /// `<page>/skip`.
    pub page: &'a str,
    /// The requeue form's confirmation, when the item can be requeued.
    pub requeue: Option<&'a str>,
    /// Whether the requeue form asks why (optional).
    pub requeue_reason: bool,
    /// The skip form's confirmation, when the item can be skipped (a reason is required).
    pub skip: Option<&'a str>,
}

/// The requeue and skip forms of `offer` for an operator; a line saying so for a reader.
pub fn forms(operator: &Operator, offer: Offer<'_>) -> Markup {
    html! {
        @if operator.session.role == Role::Reader {
            p.readonly { "Read-only: your role cannot requeue or skip." }
        } @else if offer.requeue.is_some() || offer.skip.is_some() {
            div.actions {
                @if let Some(question) = offer.requeue {
                    form #requeue method="post" action=(format!("{}/requeue", offer.page)) data-confirm=(question) {
                        (csrf_field(&operator.session))
                        @if offer.requeue_reason {
                            input type="text" name="reason" placeholder="Why (optional)" maxlength="1000";
                        }
                        button type="submit" { "Requeue" }
                    }
                }
                @if let Some(question) = offer.skip {
                    form #skip method="post" action=(format!("{}/skip", offer.page)) data-confirm=(question) {
                        (csrf_field(&operator.session))
                        input type="text" name="reason" placeholder="Why (required)" required maxlength="1000";
                        button type="submit" { "Skip" }
                    }
                }
            }
        }
    }
}

/// Runs `act` when `operator` may act with `csrf` (403 otherwise), then redirects to
/// `page`.
///
/// # Errors
/// What `act` failed with.
pub async fn perform(
    operator: &Operator,
    csrf: &str,
    page: &str,
    act: impl Future<Output = Result<(), ConsoleError>>,
) -> Result<Response, ConsoleError> {
    if let Err(refusal) = operator.may_act(csrf) {
        return Ok(refusal);
    }
    act.await?;
    Ok(Redirect::to(page).into_response())
}

/// `Ok` when an operation changed `what`; a clear refusal when it was not in a state to.
///
/// # Errors
/// [`ConsoleError::BadRequest`] saying `what` is not dead.
pub fn changed(changed: bool, what: &str) -> Result<(), ConsoleError> {
    if changed {
        Ok(())
    } else {
        Err(ConsoleError::BadRequest(format!("{what} is not dead")))
    }
}
