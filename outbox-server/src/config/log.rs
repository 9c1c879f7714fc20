//! `[relay.log]`: the log relay's settings, and the `[[relay]]` settings it shares with
//! the polling relay.

use std::time::Duration;

use outbox_core::policy::DeadLetterPolicy;
use outbox_seaorm::relay::RelayConfig;

use super::file::{FileLog, FileRelay};
use super::problem::Problems;
use super::value::positive_duration;

/// The log relay's settings (`[relay.log]`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LogSettings {
    /// The replication slot (required: it is the relay's position in the log, kept by the
    /// server; renaming it starts over from a new slot).
    pub slot: String,
    /// The publication (default: the log relay's, named after the outbox table).
    pub publication: Option<String>,
    /// Time between idle-database heartbeats.
    pub heartbeat_interval: Option<Duration>,
    /// Time between acknowledgements to the server.
    pub feedback_interval: Option<Duration>,
    /// The relay-level settings the file gives explicitly, which the log relay takes
    /// (the others keep the log relay's own defaults, e.g. its 10 s lease TTL).
    pub shared: SharedSettings,
}

/// The `[[relay]]` settings that both relays take, as the file gives them (`None`: the
/// relay's default).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SharedSettings {
    /// Events per batch.
    pub batch_size: Option<usize>,
    /// Attempts before a dead letter.
    pub max_attempts: Option<u32>,
    /// What a dead letter does to its aggregate.
    pub dead_letter_policy: Option<DeadLetterPolicy>,
    /// The lease TTL.
    pub lease_ttl: Option<Duration>,
    /// The publish timeout.
    pub publish_timeout: Option<Duration>,
    /// The retention (`Some(None)`: forever).
    pub retention: Option<Option<Duration>>,
}

/// Checks `[relay.log]`.
pub(crate) fn check_log(
    file: &FileLog,
    path: &str,
    problems: &mut Problems,
) -> Option<LogSettings> {
    let before = problems.len();
    let slot = match &file.slot {
        Some(slot) => {
            if let Err(error) = outbox_seaorm::relay::log::validate_slot_name(slot) {
                problems.add(format!("{path}.slot"), error.to_string());
            }
            Some(slot.clone())
        }
        None => {
            problems.add(
                format!("{path}.slot"),
                "missing: the replication slot the relay streams from",
            );
            None
        }
    };
    if let Some(publication) = &file.publication
        && let Err(error) = outbox_seaorm::relay::log::validate_publication_name(publication)
    {
        problems.add(format!("{path}.publication"), error.to_string());
    }
    let heartbeat_interval = file
        .heartbeat_interval
        .as_ref()
        .and_then(|text| positive_duration(problems, &format!("{path}.heartbeat_interval"), text));
    let feedback_interval = file
        .feedback_interval
        .as_ref()
        .and_then(|text| positive_duration(problems, &format!("{path}.feedback_interval"), text));
    if problems.len() > before {
        return None;
    }
    Some(LogSettings {
        slot: slot?,
        publication: file.publication.clone(),
        heartbeat_interval,
        feedback_interval,
        shared: SharedSettings::default(),
    })
}

/// The shared settings the file gives, with the values `config` checked.
pub(crate) fn shared_settings(file: &FileRelay, config: &RelayConfig) -> SharedSettings {
    SharedSettings {
        batch_size: file.batch_size.map(|_| config.batch_size),
        max_attempts: file.max_attempts.map(|_| config.max_attempts),
        dead_letter_policy: file
            .dead_letter_policy
            .as_ref()
            .map(|_| config.dead_letter_policy),
        lease_ttl: file.lease_ttl.as_ref().map(|_| config.lease_ttl),
        publish_timeout: file
            .publish_timeout
            .as_ref()
            .map(|_| config.publish_timeout),
        retention: file.retention.as_ref().map(|_| config.retention),
    }
}
