//! `[console]`: the operator console and who may use it.

use std::collections::BTreeSet;
use std::time::Duration;

use super::env::Overrides;
use super::file::FileConsole;
use super::problem::Problems;
use super::secret::Secret;
use super::value::{choice, positive_duration};

/// How long a console login lasts by default.
pub const DEFAULT_SESSION_TTL: Duration = Duration::from_secs(8 * 3600);

/// The shortest token accepted: 16 characters.
pub const MIN_TOKEN_LEN: usize = 16;

/// What a console user may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Sees everything and acts: requeue, skip.
    Operator,
    /// Sees everything, acts on nothing.
    Reader,
}

impl Role {
    /// `operator` or `reader`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Operator => "operator",
            Self::Reader => "reader",
        }
    }
}

/// One console credential.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConsoleUser {
    /// Who acts: the operator log records this name.
    pub name: String,
    /// What the user may do.
    pub role: Role,
    /// The login token.
    pub token: Secret,
}

/// The operator console.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConsoleSettings {
    /// Whether the console routes are served (default: when users are configured).
    pub enabled: bool,
    /// How long a login lasts (default 8 h).
    pub session_ttl: Duration,
    /// Who may log in.
    pub users: Vec<ConsoleUser>,
}

/// Checks `[console]`.
pub(crate) fn check(
    file: &FileConsole,
    overrides: &Overrides,
    problems: &mut Problems,
) -> Option<ConsoleSettings> {
    let before = problems.len();
    let session_ttl = match &file.session_ttl {
        Some(text) => positive_duration(problems, "console.session_ttl", text),
        None => Some(DEFAULT_SESSION_TTL),
    };
    let mut users = Vec::new();
    let mut names = BTreeSet::new();
    let mut tokens = BTreeSet::new();
    for (index, user) in file.user.iter().enumerate() {
        let path = format!("console.user[{index}]");
        let name = match &user.name {
            Some(name) if user_name_ok(name) => {
                if !names.insert(name.clone()) {
                    problems.add(format!("{path}.name"), format!("`{name}` is named twice"));
                }
                Some(name.clone())
            }
            Some(name) => {
                problems.add(
                    format!("{path}.name"),
                    format!("`{name}` is not a user name: 1 to 64 of `A-Z a-z 0-9 . _ @ -`"),
                );
                None
            }
            None => {
                problems.add(format!("{path}.name"), "missing: who this user is");
                None
            }
        };
        let role = match &user.role {
            Some(text) => choice(
                problems,
                &format!("{path}.role"),
                text,
                &[("operator", Role::Operator), ("reader", Role::Reader)],
            ),
            None => {
                problems.add(format!("{path}.role"), "missing: `operator` or `reader`");
                None
            }
        };
        let at = overrides.at(&format!("{path}.token"));
        let token = match &user.token {
            Some(token) if token.chars().count() >= MIN_TOKEN_LEN => {
                if !tokens.insert(token.clone()) {
                    problems.add(at.name(), "the same token as another user's");
                }
                Some(Secret::new(token.clone()))
            }
            Some(_) => {
                problems.add(
                    at.name(),
                    format!("too short: a token has at least {MIN_TOKEN_LEN} characters"),
                );
                None
            }
            None => {
                let var = user.name.as_deref().map_or_else(
                    || "OUTBOX_CONSOLE_USER_<NAME>_TOKEN".to_owned(),
                    |name| format!("OUTBOX_CONSOLE_USER_{}_TOKEN", super::env::env_name(name)),
                );
                problems.add(at.name(), format!("missing: set it, or {var}"));
                None
            }
        };
        if let (Some(name), Some(role), Some(token)) = (name, role, token) {
            users.push(ConsoleUser { name, role, token });
        }
    }
    let enabled = file.enabled.unwrap_or(!file.user.is_empty());
    if enabled && file.user.is_empty() {
        problems.add(
            "console.enabled",
            "the console needs at least one [[console.user]] (or `enabled = false`)",
        );
    }
    if problems.len() > before {
        return None;
    }
    Some(ConsoleSettings {
        enabled,
        session_ttl: session_ttl?,
        users,
    })
}

/// `A-Z a-z 0-9 . _ @ -`, 1 to 64 characters.
fn user_name_ok(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '@' | '-'))
}
