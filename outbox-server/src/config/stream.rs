//! `[relay.broker] stream`: the JetStream stream a NATS relay makes sure exists.

use std::time::Duration;

use super::file::FileStream;
use super::problem::Problems;
use super::value::positive_duration;

/// A JetStream stream the relay makes sure exists before it publishes.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StreamSettings {
    /// The stream's name.
    pub name: String,
    /// The subjects it captures (`bookstore.>`).
    pub subjects: Vec<String>,
    /// The de-duplication window (`Nats-Msg-Id`).
    pub duplicate_window: Option<Duration>,
    /// How long messages are kept.
    pub max_age: Option<Duration>,
    /// Replicas.
    pub replicas: Option<usize>,
}

/// Checks `stream`.
pub(crate) fn check_stream(
    file: &FileStream,
    path: &str,
    problems: &mut Problems,
) -> Option<StreamSettings> {
    let before = problems.len();
    let name = file.name.clone().filter(|name| {
        !name.is_empty() && !name.contains(|c: char| c.is_whitespace() || "*>./\\".contains(c))
    });
    if name.is_none() {
        problems.add(
            format!("{path}.name"),
            "missing or invalid: a JetStream stream name (no spaces, `.`, `*`, `>`, `/`)",
        );
    }
    let subjects = file.subjects.clone().unwrap_or_default();
    if subjects.is_empty() || subjects.iter().any(String::is_empty) {
        problems.add(
            format!("{path}.subjects"),
            "missing: the subjects the stream captures",
        );
    }
    let duplicate_window = file
        .duplicate_window
        .as_ref()
        .and_then(|text| positive_duration(problems, &format!("{path}.duplicate_window"), text));
    let max_age = file
        .max_age
        .as_ref()
        .and_then(|text| positive_duration(problems, &format!("{path}.max_age"), text));
    if file.replicas == Some(0) {
        problems.add(format!("{path}.replicas"), "must be at least 1");
    }
    if problems.len() > before {
        return None;
    }
    Some(StreamSettings {
        name: name?,
        subjects,
        duplicate_window,
        max_age,
        replicas: file.replicas,
    })
}
