//! [`ConfigError`]: every problem of a configuration, each with the key path it is about.

use std::fmt;

/// One problem of a configuration: where (`relay[1].broker.url`, or the environment
/// variable that set it) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConfigProblem {
    /// The key path in the file (`relay[0].database_url`), with the environment variable
    /// when the value came from one; `file` for the file as a whole.
    pub path: String,
    /// What is wrong, and what would be accepted.
    pub message: String,
}

impl fmt::Display for ConfigProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// A configuration was rejected: every problem found, not only the first.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", render(.problems))]
#[non_exhaustive]
pub struct ConfigError {
    /// The problems, in file order.
    pub problems: Vec<ConfigProblem>,
}

impl ConfigError {
    /// One problem.
    pub(crate) fn one(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            problems: vec![ConfigProblem {
                path: path.into(),
                message: message.into(),
            }],
        }
    }

    /// The problem about `path`, if any (for tests and tools).
    pub fn about(&self, path: &str) -> Option<&ConfigProblem> {
        self.problems.iter().find(|problem| problem.path == path)
    }
}

fn render(problems: &[ConfigProblem]) -> String {
    let mut text = match problems.len() {
        1 => "1 problem in the configuration:".to_owned(),
        n => format!("{n} problems in the configuration:"),
    };
    for problem in problems {
        text.push_str("\n  ");
        text.push_str(&problem.to_string());
    }
    text
}

/// The problems found so far while a configuration is checked.
#[derive(Debug, Default)]
pub(crate) struct Problems {
    /// The problems, in the order found.
    found: Vec<ConfigProblem>,
    /// The key paths whose value could not be read (a value of the wrong type): the file's
    /// reader dropped them, and a later "missing" about them (or anything under them)
    /// would only repeat the type error.
    unreadable: Vec<String>,
}

impl Problems {
    /// Records a problem at `path`, unless `path` is (or is under) a value that could not
    /// be read, whose type error is the problem to report.
    pub(crate) fn add(&mut self, path: impl Into<String>, message: impl Into<String>) {
        let path = path.into();
        if self.unreadable.iter().any(|value| is_under(&path, value)) {
            return;
        }
        self.found.push(ConfigProblem {
            path,
            message: message.into(),
        });
    }

    /// Records that the value at `path` could not be read (`message`: why), and drops it.
    pub(crate) fn add_unreadable(&mut self, path: impl Into<String>, message: impl Into<String>) {
        let path = path.into();
        self.unreadable.push(path.clone());
        self.found.push(ConfigProblem {
            path,
            message: message.into(),
        });
    }

    /// Whether the value at `path` could not be read (so that its absence says nothing).
    pub(crate) fn is_unreadable(&self, path: &str) -> bool {
        self.unreadable.iter().any(|value| value == path)
    }

    /// How many were found.
    pub(crate) fn len(&self) -> usize {
        self.found.len()
    }

    /// Whether nothing was found.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.found.is_empty()
    }

    /// `Ok(value)` when nothing was found; otherwise the problems, section by section in
    /// file order (`http`, `console`, then each relay, then the environment).
    pub(crate) fn finish<T>(mut self, value: impl FnOnce() -> T) -> Result<T, ConfigError> {
        if self.found.is_empty() {
            return Ok(value());
        }
        self.found
            .sort_by_key(|problem| section_rank(&problem.path));
        Err(ConfigError {
            problems: self.found,
        })
    }
}

/// Whether key path `path` is `value` or a key path under it (`value.key`, `value[i]`).
fn is_under(path: &str, value: &str) -> bool {
    path.strip_prefix(value)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
}

/// Where the section of `path` comes in the report.
fn section_rank(path: &str) -> (u8, usize) {
    if let Some(rest) = path.strip_prefix("relay[") {
        let index = rest
            .split(']')
            .next()
            .and_then(|index| index.parse().ok())
            .unwrap_or(0);
        return (4, index);
    }
    let rank = match path.split(['.', '[', ' ']).next().unwrap_or_default() {
        "file" => 0,
        "http" => 2,
        "console" => 3,
        "relay" => 4,
        "environment" => 5,
        _ => 1,
    };
    (rank, 0)
}
