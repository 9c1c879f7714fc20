//! Reading one value of the file: durations, choices among names, addresses. Each reader
//! records a problem at the value's path and returns `None` when the text is wrong.

use std::net::SocketAddr;
use std::time::Duration;

use super::problem::Problems;

/// Where a value came from: its key path, and the environment variable that overrode it,
/// if one did.
#[derive(Debug, Clone)]
pub(crate) struct At {
    path: String,
    env: Option<String>,
}

impl At {
    /// The value at `path` in the file.
    pub(crate) fn file(path: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            env: None,
        }
    }

    /// The value at `path`, taken from environment variable `var`.
    pub(crate) fn env(path: impl Into<String>, var: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            env: Some(var.into()),
        }
    }

    /// How a problem names the value.
    pub(crate) fn name(&self) -> String {
        match &self.env {
            Some(var) => format!("{} (from {var})", self.path),
            None => self.path.clone(),
        }
    }
}

/// A duration such as `500ms`, `30s`, `5m`, `7d` or `1h 30m`.
pub(crate) fn duration(problems: &mut Problems, path: &str, text: &str) -> Option<Duration> {
    match humantime::parse_duration(text.trim()) {
        Ok(duration) => Some(duration),
        Err(error) => {
            problems.add(
                path,
                format!(
                    "`{text}` is not a duration ({error}); write e.g. `500ms`, `30s`, `5m`, `7d`"
                ),
            );
            None
        }
    }
}

/// A duration that must not be zero.
pub(crate) fn positive_duration(
    problems: &mut Problems,
    path: &str,
    text: &str,
) -> Option<Duration> {
    let duration = duration(problems, path, text)?;
    if duration.is_zero() {
        problems.add(path, "must be longer than zero");
        return None;
    }
    Some(duration)
}

/// One of `choices` by its name.
pub(crate) fn choice<T: Copy>(
    problems: &mut Problems,
    path: &str,
    text: &str,
    choices: &[(&str, T)],
) -> Option<T> {
    if let Some((_, value)) = choices.iter().find(|(name, _)| *name == text) {
        return Some(*value);
    }
    let names: Vec<String> = choices
        .iter()
        .map(|(name, _)| format!("`{name}`"))
        .collect();
    problems.add(path, format!("`{text}` is not one of {}", names.join(", ")));
    None
}

/// An address to listen on, `host:port`.
pub(crate) fn socket_addr(problems: &mut Problems, at: &At, text: &str) -> Option<SocketAddr> {
    match text.parse() {
        Ok(address) => Some(address),
        Err(_) => {
            problems.add(
                at.name(),
                format!("`{text}` is not an address to listen on (`127.0.0.1:8080`, `[::1]:8080`)"),
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_choices() {
        let mut problems = Problems::default();
        assert_eq!(
            duration(&mut problems, "a", "500ms"),
            Some(Duration::from_millis(500))
        );
        assert_eq!(
            duration(&mut problems, "a", "7d"),
            Some(Duration::from_secs(7 * 86_400))
        );
        assert!(problems.is_empty());
        assert_eq!(duration(&mut problems, "relay[0].lease_ttl", "soon"), None);
        assert_eq!(positive_duration(&mut problems, "b", "0s"), None);
        assert_eq!(
            choice(&mut problems, "c", "log", &[("polling", 1), ("log", 2)]),
            Some(2)
        );
        assert_eq!(
            choice(&mut problems, "c", "cdc", &[("polling", 1), ("log", 2)]),
            None
        );
        let error = problems.finish(|| ()).unwrap_err();
        assert_eq!(error.problems.len(), 3);
        let about = |path: &str| error.about(path).unwrap().message.clone();
        assert!(about("relay[0].lease_ttl").contains("`soon` is not a duration"));
        assert_eq!(about("b"), "must be longer than zero");
        assert_eq!(about("c"), "`cdc` is not one of `polling`, `log`");
    }

    #[test]
    fn an_overridden_value_names_its_variable() {
        let mut problems = Problems::default();
        let at = At::env("http.listen", "OUTBOX_HTTP_LISTEN");
        assert_eq!(socket_addr(&mut problems, &at, "localhost"), None);
        let error = problems.finish(|| ()).unwrap_err();
        assert_eq!(
            error.problems[0].path,
            "http.listen (from OUTBOX_HTTP_LISTEN)"
        );
    }
}
