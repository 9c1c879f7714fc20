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
pub(crate) struct Problems(Vec<ConfigProblem>);

impl Problems {
    /// Records a problem at `path`.
    pub(crate) fn add(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.0.push(ConfigProblem {
            path: path.into(),
            message: message.into(),
        });
    }

    /// How many were found.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether nothing was found.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `Ok(value)` when nothing was found; otherwise the problems, section by section in
    /// file order (`http`, `console`, then each relay, then the environment).
    pub(crate) fn finish<T>(mut self, value: impl FnOnce() -> T) -> Result<T, ConfigError> {
        if self.0.is_empty() {
            return Ok(value());
        }
        self.0.sort_by_key(|problem| section_rank(&problem.path));
        Err(ConfigError { problems: self.0 })
    }
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
