//! The polling relay's settings of a `[[relay]]` (batch, attempts, order, dead letters,
//! intervals, retention, worker keys) as the library's `RelayConfig`, checked by its own
//! validation.

use std::time::Duration;

use outbox_core::policy::{DeadLetterPolicy, Ordering};
use outbox_seaorm::relay::{RelayConfig, RelayConfigError};

use super::file::FileRelay;
use super::problem::Problems;
use super::value::{choice, duration, positive_duration};

/// The polling relay's settings (which the log relay shares in part).
pub(crate) fn check_relay_config(
    file: &FileRelay,
    name: Option<&str>,
    log: bool,
    path: &str,
    problems: &mut Problems,
) -> Option<RelayConfig> {
    let before = problems.len();
    let key = |name: &str| format!("{path}.{name}");
    let mut config = RelayConfig::default();
    if let Some(name) = name {
        config.instance_id = format!("{name}-{}-{}", std::process::id(), &uuid_suffix());
    }
    if let Some(text) = &file.ordering
        && let Some(ordering) = choice(
            problems,
            &key("ordering"),
            text,
            &[
                ("per_aggregate", Ordering::PerAggregate),
                ("unordered", Ordering::Unordered),
            ],
        )
    {
        config.ordering = ordering;
    }
    if let Some(text) = &file.dead_letter_policy
        && let Some(policy) = choice(
            problems,
            &key("dead_letter_policy"),
            text,
            &[
                ("block", DeadLetterPolicy::Block),
                ("skip", DeadLetterPolicy::Skip),
            ],
        )
    {
        config.dead_letter_policy = policy;
    }
    if let Some(rows) = file.batch_size {
        config.batch_size = rows;
    }
    if let Some(attempts) = file.max_attempts {
        config.max_attempts = attempts;
    }
    let durations: [(&str, &Option<String>, &mut Duration); 5] = [
        (
            "poll_interval",
            &file.poll_interval,
            &mut config.poll_interval,
        ),
        ("lease_ttl", &file.lease_ttl, &mut config.lease_ttl),
        (
            "heartbeat_interval",
            &file.heartbeat_interval,
            &mut config.heartbeat_interval,
        ),
        (
            "publish_timeout",
            &file.publish_timeout,
            &mut config.publish_timeout,
        ),
        (
            "schedule_interval",
            &file.schedule_interval,
            &mut config.schedule_interval,
        ),
    ];
    for (name, text, target) in durations {
        if let Some(text) = text
            && let Some(value) = positive_duration(problems, &key(name), text)
        {
            *target = value;
        }
    }
    match file.retention.as_deref() {
        None => {}
        Some("forever") => config.retention = None,
        Some(text) => {
            if let Some(retention) = duration(problems, &key("retention"), text) {
                config.retention = Some(retention);
            }
        }
    }
    if let Some(keys) = &file.worker_keys {
        config.worker_keys = Some(keys.iter().cloned().collect());
    }
    for (setting, zero) in [
        ("batch_size", config.batch_size == 0),
        ("max_attempts", config.max_attempts == 0),
    ] {
        if zero {
            problems.add(key(setting), "must be at least 1");
        }
    }
    // The log relay checks its own combination of settings when it starts.
    if problems.len() > before || log {
        return (problems.len() == before).then_some(config);
    }
    if let Err(error) = config.validate() {
        let setting = match &error {
            RelayConfigError::Zero { setting } => setting,
            RelayConfigError::Heartbeat { .. } => "heartbeat_interval",
            RelayConfigError::PublishTimeout { .. } => "publish_timeout",
            RelayConfigError::NoWorkerKeys | RelayConfigError::WorkerKey { .. } => "worker_keys",
            _ => "name",
        };
        problems.add(key(setting), error.to_string());
        return None;
    }
    Some(config)
}

/// Eight hexadecimal digits of a new UUID: tells two processes with the same pid apart.
fn uuid_suffix() -> String {
    let id = uuid::Uuid::now_v7().simple().to_string();
    id[id.len() - 8..].to_owned()
}
