//! [`NatsPublisher`]: the relay's publisher for NATS JetStream.

use std::collections::HashMap;
use std::str::FromStr as _;
use std::time::Duration;

use async_nats::connection::State;
use async_nats::jetstream::context::{PublishAckFuture, PublishErrorKind as NatsKind};
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::{self, ErrorCode};
use async_nats::{HeaderMap, HeaderName, HeaderValue, Subject};
use futures_util::future::join_all;
use outbox_core::Envelope;
use outbox_core::cloudevents;
use outbox_core::publish::{BatchOutcome, MessageOutcome, PublishError, Publisher};

use crate::route::Route;

/// Default subject prefix: subjects are `events.<event type>`.
pub const DEFAULT_SUBJECT_PREFIX: &str = "events.";

/// Default time to wait for JetStream's acknowledgement of a message: 5 s.
pub const DEFAULT_ACK_TIMEOUT: Duration = Duration::from_secs(5);

/// Default bound on acknowledgements awaited at once (JetStream's client default).
pub const DEFAULT_MAX_ACK_INFLIGHT: usize = 5_000;

/// Configures a [`NatsPublisher`]; see [`NatsPublisher::builder`].
///
/// | setting | default |
/// |---|---|
/// | route | [`Route::event_type`]`("events.")` ([`DEFAULT_SUBJECT_PREFIX`]): `events.bookstore.ordering.order-placed.v1` |
/// | ack timeout | 5 s ([`DEFAULT_ACK_TIMEOUT`]); keep it below the relay's publish timeout (10 s by default) |
/// | acknowledgements in flight | 5 000 ([`DEFAULT_MAX_ACK_INFLIGHT`]); a larger batch waits for earlier acknowledgements |
#[derive(Debug)]
#[must_use]
pub struct NatsPublisherBuilder {
    client: async_nats::Client,
    route: Route,
    ack_timeout: Duration,
    max_ack_inflight: usize,
}

impl NatsPublisherBuilder {
    /// Where each envelope goes (the subject). A JetStream stream must capture the subjects
    /// ([`NatsStream`](super::NatsStream)).
    pub fn route(mut self, route: Route) -> Self {
        self.route = route;
        self
    }

    /// How long to wait for a message's acknowledgement before reporting it as a
    /// [`Timeout`](outbox_core::publish::PublishErrorKind::Timeout) (transient: the relay
    /// publishes it again with the same id, which JetStream drops if it had stored it).
    pub fn ack_timeout(mut self, timeout: Duration) -> Self {
        self.ack_timeout = timeout;
        self
    }

    /// How many acknowledgements may be awaited at once.
    pub fn max_ack_inflight(mut self, inflight: usize) -> Self {
        self.max_ack_inflight = inflight.max(1);
        self
    }

    /// Builds the publisher.
    pub fn build(self) -> NatsPublisher {
        let context = jetstream::ContextBuilder::new()
            .timeout(self.ack_timeout)
            .max_ack_inflight(self.max_ack_inflight)
            .backpressure_on_inflight(true)
            .build(self.client.clone());
        NatsPublisher {
            client: self.client,
            context,
            route: self.route,
            ack_timeout: self.ack_timeout,
        }
    }
}

/// Publishes outbox envelopes to JetStream; see the [module documentation](super) for the
/// mapping and the guarantees.
///
/// A batch is pipelined across aggregates and sequential within one: the first message of
/// every aggregate is handed to the client at once, and each aggregate's next message
/// follows its previous one's acknowledgement. A batch of distinct aggregates costs one
/// round trip; an aggregate with *k* messages in the batch costs *k*. One message in flight
/// per aggregate is what keeps each aggregate's order in the stream across a dropped
/// connection (see the [module documentation](super), Order at the broker). Outcomes:
///
/// | what happened | outcome | class |
/// |---|---|---|
/// | acknowledged (also as a duplicate) | published | |
/// | client not connected when the batch starts | the whole batch fails as `Unavailable` | transient |
/// | no acknowledgement within the ack timeout | `Timeout` | transient |
/// | connection lost while waiting | `Unavailable` | transient |
/// | no stream captures the subject (no responders) | `Unavailable` (also what a JetStream that is still starting answers) | transient |
/// | the stream's storage limits or resources are exhausted | `Unavailable` | transient |
/// | over the server's `max_payload` or the stream's maximum message size | `TooLarge` | permanent |
/// | invalid subject or header, sealed stream, any other refusal | `Rejected` | permanent |
/// | after a failed message of the same aggregate in the batch | `NotAttempted` (not sent) | transient |
#[derive(Debug, Clone)]
pub struct NatsPublisher {
    client: async_nats::Client,
    context: jetstream::Context,
    route: Route,
    ack_timeout: Duration,
}

impl NatsPublisher {
    /// Starts configuring a publisher on `client` (see [`connect`](super::connect)).
    pub fn builder(client: async_nats::Client) -> NatsPublisherBuilder {
        NatsPublisherBuilder {
            client,
            route: Route::event_type(DEFAULT_SUBJECT_PREFIX),
            ack_timeout: DEFAULT_ACK_TIMEOUT,
            max_ack_inflight: DEFAULT_MAX_ACK_INFLIGHT,
        }
    }

    /// The route.
    pub fn route(&self) -> &Route {
        &self.route
    }

    /// The ack timeout.
    pub fn ack_timeout(&self) -> Duration {
        self.ack_timeout
    }

    /// The JetStream context the publisher sends through.
    pub fn jetstream(&self) -> &jetstream::Context {
        &self.context
    }

    /// The subject, headers and body of `envelope`, or why it cannot be sent.
    ///
    /// The header values of [`cloudevents::to_binary`] are moved into the message, and the
    /// CloudEvents header names are static (see [`header_name`]): of about 80 allocations
    /// per message on this path, that saves about 25.
    fn prepare(
        &self,
        envelope: &Envelope,
    ) -> Result<(Subject, PublishMessage, usize), PublishError> {
        let subject = self.route.destination(envelope);
        check_subject(&subject)?;
        // Moved into the client's `Bytes` (no copy); a clone is a reference count.
        let subject = Subject::from(subject);
        let message = cloudevents::to_binary(envelope).map_err(|error| {
            PublishError::rejected(format!("cannot map to CloudEvents headers: {error}"))
                .with_source(error)
        })?;
        let mut headers = HeaderMap::new();
        // `NATS/1.0\r\n` … `\r\n`, then `name: value\r\n` per header.
        let mut size = 12 + message.body.len();
        for (name, value) in message.headers {
            let header_name = header_name(&name)?;
            if value.contains(['\r', '\n']) {
                return Err(PublishError::rejected(format!(
                    "the value of header `{name}` cannot travel in NATS (no CR or LF)"
                )));
            }
            size += name.len() + value.len() + 4;
            // Checked just above: no CR or LF (`From<String>` asserts it).
            headers.insert(header_name, HeaderValue::from(value));
        }
        // JetStream deduplicates on it.
        let message_id = envelope.message_id.to_string();
        size += "Nats-Msg-Id".len() + message_id.len() + 4;
        headers.insert(
            async_nats::header::NATS_MESSAGE_ID,
            HeaderValue::from(message_id),
        );
        let publish = PublishMessage::build()
            .payload(message.body.into())
            .headers(headers);
        Ok((subject, publish, size))
    }

    /// Hands one message to the client; the future resolves with JetStream's answer.
    async fn send(&self, envelope: &Envelope) -> Result<PublishAckFuture, PublishError> {
        let (subject, publish, size) = self.prepare(envelope)?;
        let limit = self.client.max_payload();
        if size > limit {
            return Err(PublishError::too_large(size, limit));
        }
        self.context
            .send_publish(subject.clone(), publish)
            .await
            .map_err(|error| classify(error, subject.as_str(), size, limit))
    }

    /// Publishes one aggregate's messages of the batch (`indexes`, in batch order), each
    /// after the previous one was acknowledged; after a failure the rest are not sent.
    ///
    /// At most one message per aggregate is unacknowledged at any time: when the connection
    /// drops, the client may lose a message in the dead socket yet send a later one still in
    /// its queue after reconnecting, which would store them out of order. With one in
    /// flight, nothing later of the aggregate is queued behind a message that may be lost.
    async fn publish_aggregate(
        &self,
        batch: &[Envelope],
        indexes: Vec<usize>,
    ) -> Vec<(usize, MessageOutcome)> {
        let limit = self.client.max_payload();
        let mut outcomes = Vec::with_capacity(indexes.len());
        let mut failed = false;
        for index in indexes {
            if failed {
                outcomes.push((index, Err(PublishError::not_attempted())));
                continue;
            }
            let envelope = &batch[index];
            let outcome = match self.send(envelope).await {
                Ok(ack) => ack
                    .await
                    .map(drop)
                    .map_err(|error| classify(error, &self.route.destination(envelope), 0, limit)),
                Err(error) => Err(error),
            };
            failed = outcome.is_err();
            outcomes.push((index, outcome));
        }
        outcomes
    }
}

impl Publisher for NatsPublisher {
    async fn publish(&self, batch: &[Envelope]) -> BatchOutcome {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let state = self.client.connection_state();
        if state != State::Connected {
            return Err(PublishError::unavailable(format!(
                "not connected to the NATS server ({state})"
            )));
        }

        // Each aggregate's messages in batch order; aggregates in order of first appearance,
        // so a batch of distinct aggregates is sent in its order in one go.
        let mut chains: Vec<Vec<usize>> = Vec::new();
        let mut chain_of: HashMap<(&str, &str), usize> = HashMap::new();
        for (index, envelope) in batch.iter().enumerate() {
            let chain = *chain_of.entry(aggregate(envelope)).or_insert_with(|| {
                chains.push(Vec::new());
                chains.len() - 1
            });
            chains[chain].push(index);
        }

        // The aggregates concurrently, each one message at a time.
        let published = join_all(
            chains
                .into_iter()
                .map(|indexes| self.publish_aggregate(batch, indexes)),
        )
        .await;
        let mut published: Vec<(usize, MessageOutcome)> = published.into_iter().flatten().collect();
        published.sort_unstable_by_key(|(index, _)| *index);
        let outcomes: Vec<MessageOutcome> =
            published.into_iter().map(|(_, outcome)| outcome).collect();
        tracing::debug!(
            messages = batch.len(),
            failed = outcomes.iter().filter(|o| o.is_err()).count(),
            "JetStream batch published"
        );
        Ok(outcomes)
    }
}

/// The CloudEvents header names, made once (a static name is not copied into each
/// message).
static CLOUDEVENTS_HEADERS: std::sync::LazyLock<[(&str, HeaderName); 13]> =
    std::sync::LazyLock::new(|| {
        cloudevents::header::ALL.map(|name| (name, HeaderName::from_static(name)))
    });

/// The NATS header name of `name`: a static one for the CloudEvents headers, a checked
/// one (printable ASCII, no `:`) for the envelope's own headers.
fn header_name(name: &str) -> Result<HeaderName, PublishError> {
    if let Some((_, known)) = CLOUDEVENTS_HEADERS.iter().find(|(text, _)| *text == name) {
        return Ok(known.clone());
    }
    HeaderName::from_str(name).map_err(|_| {
        PublishError::rejected(format!(
            "header name `{name}` cannot travel in NATS (printable ASCII only, no `:`)"
        ))
    })
}

fn aggregate(envelope: &Envelope) -> (&str, &str) {
    (
        envelope.aggregate_type.as_str(),
        envelope.aggregate_id.as_str(),
    )
}

/// A NATS publish subject: non-empty tokens separated by dots, no wildcards, no whitespace.
fn check_subject(subject: &str) -> Result<(), PublishError> {
    let bad = |why: &str| {
        Err(PublishError::rejected(format!(
            "invalid NATS subject `{subject}`: {why}"
        )))
    };
    if subject.is_empty() {
        return bad("empty");
    }
    if subject.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return bad("whitespace or control characters");
    }
    for token in subject.split('.') {
        if token.is_empty() {
            return bad("empty token");
        }
        if token == "*" || token == ">" {
            return bad("wildcards cannot be published to");
        }
    }
    Ok(())
}

/// Classifies a JetStream publish error.
fn classify(
    error: jetstream::context::PublishError,
    subject: &str,
    size: usize,
    limit: usize,
) -> PublishError {
    let kind = error.kind();
    let classified = match kind {
        NatsKind::TimedOut => PublishError::timeout(format!(
            "no JetStream acknowledgement for `{subject}` in time"
        )),
        NatsKind::BrokenPipe => PublishError::unavailable(format!(
            "connection lost before JetStream acknowledged `{subject}`"
        )),
        NatsKind::MaxAckPending => PublishError::unavailable("too many acknowledgements pending"),
        NatsKind::StreamNotFound => PublishError::unavailable(format!(
            "no JetStream stream captures subject `{subject}` (no responders; or JetStream is \
             not ready yet)"
        )),
        NatsKind::MaxPayloadExceeded => {
            PublishError::too_large(size.max(limit.saturating_add(1)), limit)
        }
        NatsKind::WrongLastMessageId | NatsKind::WrongLastSequence => {
            PublishError::rejected(format!("JetStream refused `{subject}`: {error}"))
        }
        _ => match std::error::Error::source(&error)
            .and_then(|s| s.downcast_ref::<jetstream::Error>())
        {
            Some(api) => classify_code(api, subject),
            None => PublishError::unavailable(format!("publishing to `{subject}` failed: {error}")),
        },
    };
    classified.with_source(error)
}

/// Classifies a JetStream API error answering a publish.
fn classify_code(error: &jetstream::Error, subject: &str) -> PublishError {
    let code = error.error_code();
    let message = format!("JetStream refused `{subject}`: {error}");
    if code == ErrorCode::STREAM_MESSAGE_EXCEEDS_MAXIMUM
        || code == ErrorCode::STREAM_HEADER_EXCEEDS_MAXIMUM
    {
        PublishError::new(outbox_core::publish::PublishErrorKind::TooLarge, message)
    } else if code == ErrorCode::STREAM_STORE_FAILED
        || code == ErrorCode::ACCOUNT_RESOURCES_EXCEEDED
        || code == ErrorCode::STORAGE_RESOURCES_EXCEEDED
        || code == ErrorCode::MEMORY_RESOURCES_EXCEEDED
        || code == ErrorCode::INSUFFICIENT_RESOURCES
        || code == ErrorCode::JETSTREAM_NOT_ENABLED
        || code == ErrorCode::JETSTREAM_NOT_ENABLED_FOR_ACCOUNT
    {
        PublishError::unavailable(message)
    } else {
        PublishError::rejected(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cloudevents_header_names_are_static_and_others_are_checked() {
        use cloudevents::header as h;
        for name in [h::ID, h::TYPE, h::TIME, h::CONTENT_TYPE, h::TRACESTATE] {
            assert_eq!(header_name(name).expect(name).to_string(), name);
        }
        assert_eq!(
            header_name("x-tenant").expect("custom").to_string(),
            "x-tenant"
        );
        for bad in ["x:y", "x\ty", "é"] {
            assert!(header_name(bad).expect_err(bad).is_permanent(), "{bad}");
        }
    }

    #[test]
    fn subjects() {
        assert!(check_subject("events.bookstore.ordering.order-placed.v1").is_ok());
        for bad in ["", "a..b", ".a", "a.", "a.*", "a.>", "a b", "a\tb"] {
            let error = check_subject(bad).expect_err(bad);
            assert!(error.is_permanent(), "{bad}: {error}");
        }
    }
}
