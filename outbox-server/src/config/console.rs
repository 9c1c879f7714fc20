//! `[console]`: the operator console and who may use it.

use std::collections::BTreeSet;
use std::path::PathBuf;
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
    /// Whether the session cookie is marked `Secure` (sent over HTTPS only): on when a TLS
    /// proxy serves the console (default off: the service speaks plain HTTP).
    pub secure_cookies: bool,
    /// A folder written by `schemas export` (`index.json`, `schemas/*.json`): the contracts
    /// page shows them beside the contracts compiled into the process.
    pub contracts: Option<PathBuf>,
}

impl ConsoleSettings {
    /// A builder: no users, 8 h sessions, cookies not `Secure`, no contracts folder.
    pub fn builder() -> ConsoleSettingsBuilder {
        ConsoleSettingsBuilder::default()
    }
}

/// Builds [`ConsoleSettings`] for a console embedded in a service of one's own (see
/// [`crate::console::router`]).
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct ConsoleSettingsBuilder {
    users: Vec<(String, Role, String)>,
    session_ttl: Option<Duration>,
    secure_cookies: bool,
    contracts: Option<PathBuf>,
}

impl ConsoleSettingsBuilder {
    /// A user who logs in with `token` (at least [`MIN_TOKEN_LEN`] characters).
    pub fn user(mut self, name: impl Into<String>, role: Role, token: impl Into<String>) -> Self {
        self.users.push((name.into(), role, token.into()));
        self
    }

    /// How long a login lasts (default 8 h).
    pub fn session_ttl(mut self, ttl: Duration) -> Self {
        self.session_ttl = Some(ttl);
        self
    }

    /// Marks the session cookie `Secure` (HTTPS only).
    pub fn secure_cookies(mut self, secure: bool) -> Self {
        self.secure_cookies = secure;
        self
    }

    /// A folder written by `schemas export` whose contracts the console shows.
    pub fn contracts(mut self, folder: impl Into<PathBuf>) -> Self {
        self.contracts = Some(folder.into());
        self
    }

    /// Checks the users as the configuration file's are checked.
    ///
    /// # Errors
    /// [`ConfigError`](super::ConfigError) with every problem (`console.user[i].…` paths).
    pub fn build(self) -> Result<ConsoleSettings, super::ConfigError> {
        let file = FileConsole {
            enabled: Some(true),
            session_ttl: None,
            secure_cookies: Some(self.secure_cookies),
            contracts: None,
            user: self
                .users
                .into_iter()
                .map(|(name, role, token)| super::file::FileUser {
                    name: Some(name),
                    role: Some(role.as_str().to_owned()),
                    token: Some(token),
                })
                .collect(),
        };
        let mut problems = Problems::default();
        let settings = check(&file, &Overrides::default(), &mut problems);
        if self.session_ttl.is_some_and(|ttl| ttl.is_zero()) {
            problems.add("console.session_ttl", "must be longer than zero");
        }
        problems.finish(|| {
            let mut settings =
                settings.unwrap_or_else(|| unreachable!("no problem, so the console was read"));
            settings.session_ttl = self.session_ttl.unwrap_or(DEFAULT_SESSION_TTL);
            settings.contracts = self.contracts;
            settings
        })
    }
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
        secure_cookies: file.secure_cookies.unwrap_or(false),
        contracts: file.contracts.as_ref().map(PathBuf::from),
    })
}

/// `A-Z a-z 0-9 . _ @ -`, 1 to 64 characters.
fn user_name_ok(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '@' | '-'))
}
