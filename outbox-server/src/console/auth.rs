//! Logging in and out, and who may do what.
//!
//! - `GET /login` shows the form, with a login CSRF token in a `SameSite=Strict` cookie and
//!   in the form (double submit: a page of another site cannot log a browser in);
//! - `POST /login` exchanges a configured token (compared in constant time) for a session
//!   cookie (`HttpOnly`, `SameSite=Strict`, `Secure` when configured);
//! - every page needs a session ([`Operator`] extractor: 401 and the login form without
//!   one);
//! - every state-changing request is a `POST` whose form carries the session's CSRF token
//!   ([`Operator::may_act`]: 403 without it, or for the `reader` role).

use std::time::Duration;

use axum::Form;
use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use maud::{DOCTYPE, Markup, html};
use serde::Deserialize;

use super::Console;
use super::error::ConsoleError;
use super::page::Base;
use super::session::{SESSION_COOKIE, Session, random_token, same_token};
use crate::config::Role;

/// The login form's CSRF cookie.
pub const LOGIN_COOKIE: &str = "outbox_login";

/// How long a refused login waits before it answers (slows down guessing).
const REFUSAL_DELAY: Duration = Duration::from_millis(300);

/// The logged-in user of a request.
#[derive(Debug, Clone)]
pub struct Operator {
    /// The session.
    pub session: Session,
    /// Where the console is served.
    pub base: Base,
}

impl Operator {
    /// Checks that this user may change something with a form carrying `csrf`.
    ///
    /// # Errors
    /// 403 for the `reader` role or a missing or wrong CSRF token.
    pub fn may_act(&self, csrf: &str) -> Result<(), Response> {
        if !same_token(csrf, &self.session.csrf) {
            return Err(refuse(
                StatusCode::FORBIDDEN,
                "the form's CSRF token is missing or wrong: reload the page and try again",
            ));
        }
        if self.session.role != Role::Operator {
            return Err(refuse(
                StatusCode::FORBIDDEN,
                "read-only: your role is `reader`",
            ));
        }
        Ok(())
    }
}

fn refuse(status: StatusCode, message: &str) -> Response {
    (status, super::page::message_page(status, message)).into_response()
}

/// No session: 401 with the login form (a `GET`) or a message.
#[derive(Debug)]
pub struct LoginRequired {
    base: Base,
    get: bool,
}

impl IntoResponse for LoginRequired {
    fn into_response(self) -> Response {
        if self.get {
            login_form(&self.base, StatusCode::UNAUTHORIZED, None)
        } else {
            refuse(StatusCode::UNAUTHORIZED, "log in first")
        }
    }
}

impl FromRequestParts<Console> for Operator {
    type Rejection = LoginRequired;

    async fn from_request_parts(
        parts: &mut Parts,
        console: &Console,
    ) -> Result<Self, Self::Rejection> {
        let Ok(base) = Base::from_request_parts(parts, console).await;
        let session =
            cookie(&parts.headers, SESSION_COOKIE).and_then(|id| console.sessions().get(&id));
        match session {
            Some(session) => Ok(Self { session, base }),
            None => Err(LoginRequired {
                base,
                get: parts.method == axum::http::Method::GET,
            }),
        }
    }
}

/// The value of cookie `name`.
pub fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.to_owned())
}

/// `Set-Cookie` for `name=value` on the console's path.
fn set_cookie(
    base: &Base,
    name: &str,
    value: &str,
    max_age: Duration,
    secure: bool,
) -> HeaderValue {
    let path = if base.0.is_empty() {
        "/"
    } else {
        base.0.as_str()
    };
    let secure = if secure { "; Secure" } else { "" };
    let text = format!(
        "{name}={value}; Path={path}; Max-Age={}; HttpOnly; SameSite=Strict{secure}",
        max_age.as_secs()
    );
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// The login page, with a fresh login CSRF token in its form and cookie.
fn login_form(base: &Base, status: StatusCode, refusal: Option<&str>) -> Response {
    let Ok(token) = random_token() else {
        return refuse(StatusCode::INTERNAL_SERVER_ERROR, "no random numbers");
    };
    let page: Markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                title { "Log in · outbox console" }
                link rel="stylesheet" href=(base.at("/assets/console.css"));
            }
            body {
                main.login {
                    h1 { "outbox console" }
                    @if let Some(refusal) = refusal {
                        p.error role="alert" { (refusal) }
                    }
                    form method="post" action=(base.at("/login")) {
                        input type="hidden" name="csrf" value=(token);
                        label for="token" { "Operator token" }
                        input #token type="password" name="token" autocomplete="current-password" required autofocus;
                        button type="submit" { "Log in" }
                    }
                }
            }
        }
    };
    let cookie = set_cookie(base, LOGIN_COOKIE, &token, Duration::from_secs(3600), false);
    (status, [(header::SET_COOKIE, cookie)], page).into_response()
}

/// `GET /login`.
pub async fn login_page(base: Base) -> Response {
    login_form(&base, StatusCode::OK, None)
}

/// The login form.
#[derive(Debug, Deserialize)]
pub struct LoginForm {
    token: String,
    #[serde(default)]
    csrf: String,
}

/// `POST /login`.
pub async fn login(
    State(console): State<Console>,
    base: Base,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Response {
    let expected = cookie(&headers, LOGIN_COOKIE).unwrap_or_default();
    if expected.is_empty() || !same_token(&form.csrf, &expected) {
        return refuse(
            StatusCode::FORBIDDEN,
            "the login form expired or came from another site: load it again",
        );
    }
    let Some(user) = console.sessions().user_of(&form.token).cloned() else {
        tokio::time::sleep(REFUSAL_DELAY).await;
        tracing::warn!("console: a login with an unknown token was refused");
        return login_form(&base, StatusCode::UNAUTHORIZED, Some("unknown token"));
    };
    let id = match console.sessions().open(&user) {
        Ok(id) => id,
        Err(error) => return ConsoleError::from(error).into_response(),
    };
    tracing::info!(user = %user.name, role = user.role.as_str(), "console: logged in");
    let secure = console.settings().secure_cookies;
    let session = set_cookie(&base, SESSION_COOKIE, &id, console.sessions().ttl(), secure);
    let clear = set_cookie(&base, LOGIN_COOKIE, "", Duration::ZERO, secure);
    let mut response = Redirect::to(&base.at("/")).into_response();
    response.headers_mut().append(header::SET_COOKIE, session);
    response.headers_mut().append(header::SET_COOKIE, clear);
    response
}

/// A form that carries only its CSRF token.
#[derive(Debug, Deserialize)]
pub struct CsrfForm {
    /// The session's CSRF token.
    #[serde(default)]
    pub csrf: String,
}

/// `POST /logout`.
pub async fn logout(
    State(console): State<Console>,
    operator: Operator,
    Form(form): Form<CsrfForm>,
) -> Response {
    if !same_token(&form.csrf, &operator.session.csrf) {
        return refuse(
            StatusCode::FORBIDDEN,
            "the form's CSRF token is missing or wrong",
        );
    }
    console.sessions().close(&operator.session.id);
    let clear = set_cookie(
        &operator.base,
        SESSION_COOKIE,
        "",
        Duration::ZERO,
        console.settings().secure_cookies,
    );
    let mut response = Redirect::to(&operator.base.at("/login")).into_response();
    response.headers_mut().append(header::SET_COOKIE, clear);
    response
}
