//! The console's page layout and what every page shares: the base path (the console may be
//! nested under a prefix of the embedding service), the navigation, forms with their CSRF
//! token, times, ages and pretty-printed JSON. Every value goes through maud, which escapes
//! it: a payload holding `<script>` shows as text.

use std::time::Duration;

use axum::extract::{FromRequestParts, OriginalUri};
use axum::http::StatusCode;
use axum::http::request::Parts;
use chrono::{DateTime, Utc};
use maud::{DOCTYPE, Markup, html};

use super::session::Session;

/// The path the console is served under (`""` at the root, `/outbox` when nested there).
#[derive(Debug, Clone)]
pub struct Base(pub String);

impl Base {
    /// `path` under the console (`path` starts with `/`); the console's root is the
    /// prefix itself when nested (`/outbox`, which is where a nested router's `/` is).
    pub fn at(&self, path: &str) -> String {
        if path == "/" && !self.0.is_empty() {
            return self.0.clone();
        }
        format!("{}{path}", self.0)
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Base {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let original = parts
            .extensions
            .get::<OriginalUri>()
            .map_or_else(|| parts.uri.path().to_owned(), |uri| uri.path().to_owned());
        let inner = parts.uri.path();
        let base = match original.strip_suffix(inner) {
            Some(base) => base,
            // A nested router's `/` answers the prefix itself.
            None if inner == "/" => original.as_str(),
            None => "",
        };
        Ok(Self(base.trim_end_matches('/').to_owned()))
    }
}

/// A whole page: navigation for `session`'s user, `title`, `body`.
pub fn layout(base: &Base, session: &Session, title: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · outbox console" }
                link rel="stylesheet" href=(base.at("/assets/console.css"));
                script src=(base.at("/assets/console.js")) defer {}
            }
            body {
                header {
                    nav {
                        a.brand href=(base.at("/")) { "outbox" }
                        a href=(base.at("/")) { "Overview" }
                        a href=(base.at("/contracts")) { "Contracts" }
                        span.who {
                            (session.user) " · " (session.role.as_str())
                            form.inline method="post" action=(base.at("/logout")) {
                                (csrf_field(session))
                                button type="submit" { "Log out" }
                            }
                        }
                    }
                }
                main {
                    h1 { (title) }
                    (body)
                }
            }
        }
    }
}

/// A page of its own for a message (errors, the login page's refusals).
pub fn message_page(status: StatusCode, message: &str) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                title { (status.as_u16()) " · outbox console" }
            }
            body {
                main {
                    h1 { (status.as_u16()) " " (status.canonical_reason().unwrap_or("")) }
                    p.error { (message) }
                }
            }
        }
    }
}

/// The hidden field carrying the session's CSRF token.
pub fn csrf_field(session: &Session) -> Markup {
    html! { input type="hidden" name="csrf" value=(session.csrf); }
}

/// A timestamp, to the second, in UTC.
pub fn time(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// An age such as `3 s`, `4 min 10 s`, `2 h 5 min`, `3 d 4 h`.
pub fn age(duration: Duration) -> String {
    let seconds = duration.as_secs();
    match seconds {
        0..60 => format!("{seconds} s"),
        60..3600 => format!("{} min {} s", seconds / 60, seconds % 60),
        3600..86_400 => format!("{} h {} min", seconds / 3600, seconds % 3600 / 60),
        _ => format!("{} d {} h", seconds / 86_400, seconds % 86_400 / 3600),
    }
}

/// The age of `at` at `now`.
pub fn age_at(at: DateTime<Utc>, now: DateTime<Utc>) -> String {
    age((now - at).to_std().unwrap_or_default())
}

/// `text` pretty-printed when it is JSON, as it is otherwise.
pub fn pretty_json(text: &str) -> String {
    serde_json::from_str::<serde_json::Value>(text)
        .and_then(|value| serde_json::to_string_pretty(&value))
        .unwrap_or_else(|_| text.to_owned())
}

/// `text` cut to `chars` characters with `…`.
pub fn short(text: &str, chars: usize) -> String {
    if text.chars().count() <= chars {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(chars).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_and_json() {
        assert_eq!(age(Duration::from_secs(3)), "3 s");
        assert_eq!(age(Duration::from_secs(250)), "4 min 10 s");
        assert_eq!(age(Duration::from_secs(7500)), "2 h 5 min");
        assert_eq!(age(Duration::from_secs(3 * 86_400 + 4 * 3600)), "3 d 4 h");
        assert_eq!(pretty_json(r#"{"a":1}"#), "{\n  \"a\": 1\n}");
        assert_eq!(pretty_json("<not json>"), "<not json>");
        assert_eq!(short("abcdef", 3), "abc…");
    }
}
