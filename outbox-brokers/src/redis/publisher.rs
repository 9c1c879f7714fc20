//! [`RedisPublisher`]: the relay's publisher for Redis Streams.

use std::collections::{HashMap, HashSet};

use ::redis::aio::ConnectionManager;
use ::redis::{ErrorKind, RedisError, RedisResult, ServerErrorKind};
use outbox_core::Envelope;
use outbox_core::cloudevents;
use outbox_core::publish::{BatchOutcome, MessageOutcome, PublishError, Publisher};

use super::{FIELD_BODY, FIELD_KEY};
use crate::route::Route;

/// Default stream key prefix: streams are `outbox:<context>`.
pub const DEFAULT_STREAM_PREFIX: &str = "outbox:";

/// Default largest entry (field names and values together): 1 MiB.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 1024 * 1024;

/// Configures a [`RedisPublisher`]; see [`RedisPublisher::builder`].
///
/// | setting | default |
/// |---|---|
/// | route | [`Route::context`]`("outbox:")` ([`DEFAULT_STREAM_PREFIX`]): `outbox:bookstore.ordering`, one stream per bounded context |
/// | largest entry | 1 MiB ([`DEFAULT_MAX_MESSAGE_BYTES`]); Redis itself accepts values up to 512 MB, this bounds the memory one message may take |
/// | trimming | none: entries stay until deleted (`XADD … MAXLEN ~ n` with [`max_len`](Self::max_len)) |
/// | reply timeout | the connection's ([`connection`](super::connection): 5 s) |
#[derive(Debug)]
#[must_use]
pub struct RedisPublisherBuilder {
    connection: ConnectionManager,
    route: Route,
    max_message_bytes: usize,
    max_len: Option<usize>,
}

impl RedisPublisherBuilder {
    /// Where each envelope goes (the stream key). Keep every message of an aggregate in one
    /// stream: order holds only within a stream.
    pub fn route(mut self, route: Route) -> Self {
        self.route = route;
        self
    }

    /// The largest entry accepted; a larger message is reported as
    /// [`TooLarge`](outbox_core::publish::PublishErrorKind::TooLarge) (permanent).
    pub fn max_message_bytes(mut self, bytes: usize) -> Self {
        self.max_message_bytes = bytes;
        self
    }

    /// Trims each stream to about `entries` entries on every `XADD` (`MAXLEN ~`). Entries
    /// trimmed before a consumer group read them are lost to it: size this well above the
    /// largest backlog a consumer may build up, or leave trimming to a separate job that
    /// trims below the groups' positions.
    pub fn max_len(mut self, entries: usize) -> Self {
        self.max_len = Some(entries);
        self
    }

    /// Builds the publisher.
    pub fn build(self) -> RedisPublisher {
        RedisPublisher {
            connection: self.connection,
            route: self.route,
            max_message_bytes: self.max_message_bytes,
            max_len: self.max_len,
        }
    }
}

/// Publishes outbox envelopes to Redis streams with `XADD`; see the
/// [module documentation](super) for the entry layout and the guarantees.
///
/// A batch is one pipeline (every `XADD` written at once, the replies read together): one
/// round trip per batch. Outcomes:
///
/// | what happened | outcome | class |
/// |---|---|---|
/// | appended (Redis replied with an entry id) | published | |
/// | connection refused or lost, or the pipeline failed as a whole | the whole batch fails as `Unavailable` | transient |
/// | no reply within the connection's response timeout | the whole batch fails as `Timeout` (entries may have been appended: the retry appends copies, which the inbox skips) | transient |
/// | `OOM`, `LOADING`, `BUSY`, `TRYAGAIN`, `MASTERDOWN`, `CLUSTERDOWN`, `READONLY`, `MOVED`, `ASK` | `Unavailable` | transient |
/// | larger than the maximum entry | `TooLarge` | permanent |
/// | `WRONGTYPE` (the key holds no stream), `NOPERM`, any other error reply, a header named `key` or `body` | `Rejected` | permanent |
/// | after a failed message of the same aggregate in the batch | `NotAttempted` (also when it was appended) | transient |
#[derive(Clone)]
pub struct RedisPublisher {
    connection: ConnectionManager,
    route: Route,
    max_message_bytes: usize,
    max_len: Option<usize>,
}

impl std::fmt::Debug for RedisPublisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisPublisher")
            .field("route", &self.route)
            .field("max_message_bytes", &self.max_message_bytes)
            .field("max_len", &self.max_len)
            .finish_non_exhaustive()
    }
}

impl RedisPublisher {
    /// Starts configuring a publisher on `connection` (see
    /// [`connection`](super::connection)).
    pub fn builder(connection: ConnectionManager) -> RedisPublisherBuilder {
        RedisPublisherBuilder {
            connection,
            route: Route::context(DEFAULT_STREAM_PREFIX),
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            max_len: None,
        }
    }

    /// The route.
    pub fn route(&self) -> &Route {
        &self.route
    }

    /// The `XADD` of `envelope`, or why it cannot be sent.
    fn command(&self, envelope: &Envelope) -> Result<::redis::Cmd, PublishError> {
        let stream = self.route.destination(envelope);
        if stream.is_empty() {
            return Err(PublishError::rejected("the route gave an empty stream key"));
        }
        let message = cloudevents::to_binary(envelope).map_err(|error| {
            PublishError::rejected(format!("cannot map to CloudEvents headers: {error}"))
                .with_source(error)
        })?;
        let mut command = ::redis::cmd("XADD");
        command.arg(&stream);
        if let Some(entries) = self.max_len {
            command.arg("MAXLEN").arg("~").arg(entries);
        }
        command.arg("*");
        let mut size = 0;
        for (name, value) in &message.headers {
            if name.eq_ignore_ascii_case(FIELD_BODY) || name.eq_ignore_ascii_case(FIELD_KEY) {
                return Err(PublishError::rejected(format!(
                    "envelope header `{name}` collides with the entry field `{}`",
                    name.to_ascii_lowercase()
                )));
            }
            size += name.len() + value.len();
            command.arg(name).arg(value);
        }
        size +=
            FIELD_KEY.len() + envelope.aggregate_id.len() + FIELD_BODY.len() + message.body.len();
        if size > self.max_message_bytes {
            return Err(PublishError::too_large(size, self.max_message_bytes));
        }
        command
            .arg(FIELD_KEY)
            .arg(&envelope.aggregate_id)
            .arg(FIELD_BODY)
            .arg(message.body);
        Ok(command)
    }
}

impl Publisher for RedisPublisher {
    async fn publish(&self, batch: &[Envelope]) -> BatchOutcome {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        // Build the pipeline in batch order; nothing of an aggregate after its failure.
        let mut pipeline = ::redis::pipe();
        pipeline.ignore_errors();
        let mut stopped: HashSet<(&str, &str)> = HashSet::new();
        let mut prepared: Vec<Option<Result<(), PublishError>>> = Vec::with_capacity(batch.len());
        for envelope in batch {
            let key = aggregate(envelope);
            if stopped.contains(&key) {
                prepared.push(Some(Err(PublishError::not_attempted())));
                continue;
            }
            match self.command(envelope) {
                Ok(command) => {
                    pipeline.add_command(command);
                    prepared.push(None);
                }
                Err(error) => {
                    stopped.insert(key);
                    prepared.push(Some(Err(error)));
                }
            }
        }
        let mut replies = if pipeline.is_empty() {
            Vec::new()
        } else {
            let mut connection = self.connection.clone();
            let replies: Vec<RedisResult<String>> = pipeline
                .query_async(&mut connection)
                .await
                .map_err(|error| classify(&error).with_source(error))?;
            replies
        }
        .into_iter();

        // Outcomes in batch order: nothing of an aggregate is reported published after its
        // first failure.
        let mut failed: HashMap<(&str, &str), uuid::Uuid> = HashMap::new();
        let mut outcomes: Vec<MessageOutcome> = Vec::with_capacity(batch.len());
        for (envelope, prepared) in batch.iter().zip(prepared) {
            let key = aggregate(envelope);
            let outcome = match prepared {
                Some(outcome) => outcome,
                None => match replies.next() {
                    None => Err(PublishError::unavailable("no reply for this XADD")),
                    Some(Err(error)) => Err(classify(&error).with_source(error)),
                    Some(Ok(entry_id)) => match failed.get(&key) {
                        None => Ok(()),
                        Some(earlier) => {
                            tracing::warn!(
                                message_id = %envelope.message_id,
                                %earlier,
                                entry_id,
                                "Redis appended a message after an earlier message of its \
                                 aggregate failed in the same batch: the earlier one will \
                                 follow it in the stream"
                            );
                            Err(PublishError::not_attempted())
                        }
                    },
                },
            };
            if outcome.is_err() {
                failed.entry(key).or_insert(envelope.message_id);
            }
            outcomes.push(outcome);
        }
        tracing::debug!(
            messages = batch.len(),
            failed = outcomes.iter().filter(|o| o.is_err()).count(),
            "Redis batch published"
        );
        Ok(outcomes)
    }
}

fn aggregate(envelope: &Envelope) -> (&str, &str) {
    (
        envelope.aggregate_type.as_str(),
        envelope.aggregate_id.as_str(),
    )
}

/// Classifies a Redis error (without its source; callers attach it).
pub(crate) fn classify(error: &RedisError) -> PublishError {
    if error.is_timeout() {
        return PublishError::timeout(format!("no reply from Redis in time: {error}"));
    }
    if error.is_io_error() || error.is_connection_dropped() || error.is_connection_refusal() {
        return PublishError::unavailable(format!("Redis is unreachable: {error}"));
    }
    let transient_code = matches!(
        error.code(),
        Some("OOM" | "LOADING" | "BUSY" | "TRYAGAIN" | "MASTERDOWN" | "CLUSTERDOWN" | "READONLY")
    );
    match error.kind() {
        ErrorKind::Server(
            ServerErrorKind::BusyLoading
            | ServerErrorKind::TryAgain
            | ServerErrorKind::MasterDown
            | ServerErrorKind::ClusterDown
            | ServerErrorKind::ReadOnly
            | ServerErrorKind::Moved
            | ServerErrorKind::Ask,
        ) => PublishError::unavailable(format!("Redis cannot take writes now: {error}")),
        _ if transient_code => {
            PublishError::unavailable(format!("Redis cannot take writes now: {error}"))
        }
        ErrorKind::Server(_) | ErrorKind::Extension => {
            PublishError::rejected(format!("Redis refused the entry: {error}"))
        }
        ErrorKind::Client
        | ErrorKind::ClusterConnectionNotFound
        | ErrorKind::MasterNameNotFoundBySentinel
        | ErrorKind::NoValidReplicasFoundBySentinel => {
            PublishError::unavailable(format!("Redis is unreachable: {error}"))
        }
        _ => PublishError::rejected(format!("Redis failed: {error}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification() {
        let io: RedisError = std::io::Error::from(std::io::ErrorKind::ConnectionRefused).into();
        assert!(classify(&io).is_transient());
        let timeout: RedisError = std::io::Error::from(std::io::ErrorKind::TimedOut).into();
        assert_eq!(
            classify(&timeout).kind(),
            outbox_core::publish::PublishErrorKind::Timeout
        );
        let wrong: RedisError = (
            ErrorKind::Extension,
            "WRONGTYPE Operation against a key holding the wrong kind of value",
        )
            .into();
        assert!(classify(&wrong).is_permanent());
    }
}
