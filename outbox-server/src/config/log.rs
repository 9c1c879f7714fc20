//! `[relay.log]`: the log relay's settings, with the `[[relay]]` settings it shares with
//! the polling relay, as the library's [`LogRelayConfig`], checked at load time by the
//! library's own validation ([`LogRelayConfig::problems`]).

use outbox_seaorm::relay::RelayConfig;
use outbox_seaorm::relay::log::{LogRelayConfig, LogRelayError};

use super::file::{FileLog, FileRelay};
use super::problem::Problems;
use super::value::positive_duration;

/// Checks `[relay.log]` of the `[[relay]]` at `path` (`relay[i]`) and builds the log relay's
/// configuration: the library's defaults where the file is silent, the shared `[[relay]]`
/// settings the file gives explicitly (taken from `relay`, which checked them), and the
/// relay's instance id. The replication connection's URL is not in it: it is the relay's
/// database URL, a secret, given to the builder when the relay starts.
pub(crate) fn check_log(
    log: &FileLog,
    file: &FileRelay,
    relay: Option<&RelayConfig>,
    path: &str,
    problems: &mut Problems,
) -> Option<LogRelayConfig> {
    let before = problems.len();
    let log_path = format!("{path}.log");
    let Some(slot) = &log.slot else {
        problems.add(
            format!("{log_path}.slot"),
            "missing: the replication slot the relay streams from",
        );
        return None;
    };
    let mut config = LogRelayConfig::for_slot(slot.clone());
    if let Some(publication) = &log.publication {
        config.publication = publication.clone();
    }
    for (name, text, target) in [
        (
            "heartbeat_interval",
            &log.heartbeat_interval,
            &mut config.heartbeat_interval,
        ),
        (
            "feedback_interval",
            &log.feedback_interval,
            &mut config.feedback_interval,
        ),
    ] {
        if let Some(text) = text
            && let Some(interval) = positive_duration(problems, &format!("{log_path}.{name}"), text)
        {
            *target = interval;
        }
    }
    if log.replica_server_id.is_some() {
        config.replica_server_id = log.replica_server_id;
    }
    // The shared settings the file gives; the others keep the log relay's own defaults
    // (e.g. its 10 s lease TTL, not the polling relay's). When they did not check, the
    // log section is still checked below, with the defaults in their place.
    if let Some(relay) = relay {
        if file.batch_size.is_some() {
            config.batch_size = relay.batch_size;
        }
        if file.max_attempts.is_some() {
            config.max_attempts = relay.max_attempts;
        }
        if file.dead_letter_policy.is_some() {
            config.dead_letter_policy = relay.dead_letter_policy;
        }
        if file.lease_ttl.is_some() {
            config.lease_ttl = relay.lease_ttl;
        }
        if file.publish_timeout.is_some() {
            config.publish_timeout = relay.publish_timeout;
        }
        if file.retention.is_some() {
            config.retention = relay.retention;
        }
        if file.schedule_interval.is_some() {
            config.schedule_interval = relay.schedule_interval;
        }
        config.instance_id.clone_from(&relay.instance_id);
    }
    for problem in config.problems() {
        if let LogRelayError::Config { setting, reason } = problem {
            let at = match setting {
                "slot" | "publication" | "heartbeat_interval" | "feedback_interval"
                | "replica_server_id" => {
                    format!("{log_path}.{setting}")
                }
                _ => format!("{path}.{setting}"),
            };
            problems.add(at, reason);
        }
    }
    (problems.len() == before && relay.is_some()).then_some(config)
}
