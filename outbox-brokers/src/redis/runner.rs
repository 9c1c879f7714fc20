//! [`RedisConsumerRunner`]: a Redis Streams consumer group feeding an inbox consumer.

use std::time::Duration;

use ::redis::Value;
use ::redis::aio::ConnectionManager;
use outbox_core::policy::Backoff;
use outbox_seaorm::inbox::partitioned::LeaseHeld;
use outbox_seaorm::inbox::{Consumer, ConsumerError};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{FIELD_BODY, FIELD_KEY, RedisError};
use crate::settle::{Settlement, redelivery_pause, settle, with_requeued_redelivery};

/// Default number of entries read at once: 100.
pub const DEFAULT_BATCH_SIZE: usize = 100;
/// Default time an `XREADGROUP` blocks waiting for new entries: 2 s.
pub const DEFAULT_BLOCK: Duration = Duration::from_secs(2);
/// Default interval between claims of other consumers' stale entries: 30 s.
pub const DEFAULT_CLAIM_INTERVAL: Duration = Duration::from_secs(30);
/// Default idle time after which a pending entry is claimed from its consumer: 60 s.
pub const DEFAULT_CLAIM_MIN_IDLE: Duration = Duration::from_secs(60);

/// What a runner did until it was shut down.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunnerReport {
    /// Entries settled and acknowledged (`XACK`).
    pub acked: u64,
    /// Entries the inbox could not settle (database unavailable), left pending for
    /// redelivery.
    pub redelivered: u64,
    /// Entries claimed from other (stale) consumers with `XAUTOCLAIM`.
    pub claimed: u64,
    /// Pending entries whose data was trimmed from the stream, acknowledged unprocessed.
    pub trimmed: u64,
    /// Broker errors retried (connection lost, timeouts, refused commands).
    pub broker_errors: u64,
}

impl std::ops::AddAssign for RunnerReport {
    fn add_assign(&mut self, other: Self) {
        self.acked += other.acked;
        self.redelivered += other.redelivered;
        self.claimed += other.claimed;
        self.trimmed += other.trimmed;
        self.broker_errors += other.broker_errors;
    }
}

/// The default consumer name: `$HOSTNAME` when set, else `consumer-<process id>`.
fn default_consumer_name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|name| !name.trim().is_empty())
        .unwrap_or_else(|| format!("consumer-{}", std::process::id()))
}

/// Configures a [`RedisConsumerRunner`]; see [`RedisConsumerRunner::builder`].
///
/// | setting | default |
/// |---|---|
/// | group | the inbox consumer's name (e.g. `inventory.reserve-stock`), created with `MKSTREAM` if missing |
/// | group start | `0`: a new group reads the whole stream (`$` would skip what was published before it existed) |
/// | consumer name | `$HOSTNAME`, else `consumer-<pid>`: set a name that survives restarts, so a restarted instance finds its own pending entries first |
/// | batch | 100 entries ([`DEFAULT_BATCH_SIZE`]), blocking up to 2 s ([`DEFAULT_BLOCK`]) |
/// | claims | every 30 s ([`DEFAULT_CLAIM_INTERVAL`]; zero disables them), of entries idle for 60 s ([`DEFAULT_CLAIM_MIN_IDLE`]) |
/// | redelivery backoff | 1 s doubling up to 30 s, with jitter: the pause before an unsettled entry is read again |
/// | retry backoff | 250 ms doubling up to 10 s: between attempts while Redis is unreachable |
///
/// The claim's minimum idle time must exceed the longest time this consumer may hold an
/// entry: the redelivery backoff's maximum and the slowest settle (inbox retries included);
/// otherwise a live consumer's entry is claimed by another (still applied once).
#[derive(Debug)]
#[must_use]
pub struct RedisConsumerRunnerBuilder {
    client: ::redis::Client,
    inbox: Consumer,
    stream: String,
    group: Option<String>,
    consumer_name: Option<String>,
    start_id: String,
    batch_size: usize,
    block: Duration,
    claim_interval: Duration,
    claim_min_idle: Duration,
    redelivery_backoff: Backoff,
    retry_backoff: Backoff,
}

impl RedisConsumerRunnerBuilder {
    /// The consumer group's name.
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.group = Some(group.into());
        self
    }

    /// This instance's name within the group.
    pub fn consumer_name(mut self, name: impl Into<String>) -> Self {
        self.consumer_name = Some(name.into());
        self
    }

    /// Where a group created by the runner starts: `0` (default, the whole stream), `$`
    /// (only entries added from now on) or an entry id.
    pub fn start_id(mut self, id: impl Into<String>) -> Self {
        self.start_id = id.into();
        self
    }

    /// Entries read at once.
    pub fn batch_size(mut self, entries: usize) -> Self {
        self.batch_size = entries;
        self
    }

    /// How long a read blocks waiting for new entries.
    pub fn block(mut self, block: Duration) -> Self {
        self.block = block;
        self
    }

    /// How often stale pending entries of other consumers are claimed (zero: never).
    pub fn claim_interval(mut self, interval: Duration) -> Self {
        self.claim_interval = interval;
        self
    }

    /// How long an entry must have been idle (delivered, not acknowledged) to be claimed.
    pub fn claim_min_idle(mut self, idle: Duration) -> Self {
        self.claim_min_idle = idle;
        self
    }

    /// Pause before an entry the inbox could not settle is read again, by consecutive
    /// failure.
    pub fn redelivery_backoff(mut self, backoff: Backoff) -> Self {
        self.redelivery_backoff = backoff;
        self
    }

    /// Delay between attempts while Redis is unreachable, by consecutive failure.
    pub fn retry_backoff(mut self, backoff: Backoff) -> Self {
        self.retry_backoff = backoff;
        self
    }

    /// Checks the configuration and builds the runner (nothing is sent to Redis yet).
    ///
    /// # Errors
    /// [`RedisError::Config`] for an empty stream, group or consumer name, an empty batch,
    /// a zero block time, or a claim minimum idle time not above the redelivery backoff's
    /// maximum.
    pub fn build(self) -> Result<RedisConsumerRunner, RedisError> {
        let group = self.group.unwrap_or_else(|| self.inbox.name().to_owned());
        let consumer_name = self.consumer_name.unwrap_or_else(default_consumer_name);
        for (what, value) in [
            ("stream", &self.stream),
            ("group", &group),
            ("consumer name", &consumer_name),
            ("start id", &self.start_id),
        ] {
            if value.trim().is_empty() {
                return Err(RedisError::Config(format!("the {what} must not be empty")));
            }
        }
        if self.batch_size == 0 {
            return Err(RedisError::Config(
                "the batch size must be at least 1".into(),
            ));
        }
        if self.block.as_millis() == 0 {
            return Err(RedisError::Config(
                "the block time must be at least 1 ms".into(),
            ));
        }
        if !self.claim_interval.is_zero()
            && self.claim_min_idle <= self.redelivery_backoff.max_delay()
        {
            return Err(RedisError::Config(format!(
                "the claim minimum idle time ({:?}) must exceed the redelivery backoff's \
                 maximum ({:?}), or a live consumer's entries are claimed while it waits",
                self.claim_min_idle,
                self.redelivery_backoff.max_delay()
            )));
        }
        Ok(RedisConsumerRunner {
            client: self.client,
            inbox: self.inbox,
            stream: self.stream,
            group,
            consumer_name,
            start_id: self.start_id,
            batch_size: self.batch_size,
            block: self.block,
            claim_interval: self.claim_interval,
            claim_min_idle: self.claim_min_idle,
            redelivery_backoff: self.redelivery_backoff,
            retry_backoff: self.retry_backoff,
            held: None,
        })
    }
}

/// Consumes a Redis stream through a consumer group and settles every entry through an inbox
/// [`Consumer`]; see the [module documentation](super) for the guarantees.
///
/// The loop: ensure the group (`XGROUP CREATE … MKSTREAM`); read this consumer's own pending
/// entries first (`XREADGROUP … STREAMS <stream> 0`) until there are none, then new ones
/// (`>`, blocking); settle each entry in stream order ([`settle`]) and `XACK` it once the
/// inbox settled it. An entry the inbox could not settle is left pending: the runner stops
/// the batch, pauses for the redelivery backoff, and reads its pending entries again — so
/// the entry and everything after it come back in order. After any Redis error it also
/// reads its pending entries first (replies lost with the connection). Every claim interval
/// it claims entries idle longer than the minimum idle time (`XAUTOCLAIM`: a crashed
/// consumer's entries) and settles them. Cancelling the token stops it after the entry in
/// progress; unacknowledged entries stay pending for the next start.
#[derive(Debug)]
pub struct RedisConsumerRunner {
    client: ::redis::Client,
    inbox: Consumer,
    stream: String,
    group: String,
    consumer_name: String,
    start_id: String,
    batch_size: usize,
    block: Duration,
    claim_interval: Duration,
    claim_min_idle: Duration,
    redelivery_backoff: Backoff,
    retry_backoff: Backoff,
    /// A partition runner's lease: checked before every read.
    held: Option<LeaseHeld>,
}

/// One stream entry as read: its id and fields (`None` when its data was trimmed away).
#[derive(Debug)]
struct Entry {
    id: String,
    fields: Option<Vec<(String, Vec<u8>)>>,
}

/// How settling a list of entries ended.
enum Settled {
    /// All settled and acknowledged.
    All,
    /// An entry was not settled: it and the rest stay pending.
    Redeliver,
    /// Redis failed.
    Failed(String),
    /// Shut down.
    Cancelled,
}

/// Sleeps `delay` unless `shutdown` fires first; `true` when it did.
async fn pause(shutdown: &CancellationToken, delay: Duration) -> bool {
    tokio::select! {
        () = shutdown.cancelled() => true,
        () = tokio::time::sleep(delay) => false,
    }
}

impl RedisConsumerRunner {
    /// Starts configuring a runner that feeds `inbox` from the stream `stream` (a key, e.g.
    /// `outbox:bookstore.ordering`). The runner opens its own connection from `client`.
    pub fn builder(
        client: ::redis::Client,
        inbox: Consumer,
        stream: impl Into<String>,
    ) -> RedisConsumerRunnerBuilder {
        RedisConsumerRunnerBuilder {
            client,
            inbox,
            stream: stream.into(),
            group: None,
            consumer_name: None,
            start_id: "0".to_owned(),
            batch_size: DEFAULT_BATCH_SIZE,
            block: DEFAULT_BLOCK,
            claim_interval: DEFAULT_CLAIM_INTERVAL,
            claim_min_idle: DEFAULT_CLAIM_MIN_IDLE,
            redelivery_backoff: Backoff::new()
                .with_min_delay(Duration::from_secs(1))
                .with_max_delay(Duration::from_secs(30)),
            retry_backoff: Backoff::new()
                .with_min_delay(Duration::from_millis(250))
                .with_max_delay(Duration::from_secs(10)),
        }
    }

    /// The stream key.
    pub fn stream(&self) -> &str {
        &self.stream
    }

    /// The consumer group.
    pub fn group(&self) -> &str {
        &self.group
    }

    /// This instance's consumer name.
    pub fn consumer_name(&self) -> &str {
        &self.consumer_name
    }

    /// Runs until `shutdown` is cancelled; see the [type documentation](Self).
    pub async fn run(self, shutdown: CancellationToken) -> RunnerReport {
        let consumer = self.inbox.clone();
        with_requeued_redelivery(&consumer, &shutdown, self.subscription(shutdown.clone())).await
    }

    /// The runner of one partition: this runner's settings on stream `stream` under the
    /// consumer name `name` (the same for every owner of the partition, so that a new
    /// owner reads its predecessor's pending entries first, in order), settling with
    /// `inbox` (fenced by the partition's lease), without claims (nobody else reads the
    /// stream).
    pub(super) fn for_partition(
        &self,
        inbox: Consumer,
        held: LeaseHeld,
        stream: String,
        name: String,
    ) -> Self {
        Self {
            client: self.client.clone(),
            inbox,
            stream,
            group: self.group.clone(),
            consumer_name: name,
            start_id: self.start_id.clone(),
            batch_size: self.batch_size,
            block: self.block,
            claim_interval: Duration::ZERO,
            claim_min_idle: self.claim_min_idle,
            redelivery_backoff: self.redelivery_backoff,
            retry_backoff: self.retry_backoff,
            held: Some(held),
        }
    }

    /// The inbox consumer's name.
    pub(super) fn inbox_name(&self) -> &str {
        self.inbox.name()
    }

    /// The subscription loop of [`run`](Self::run).
    pub(super) async fn subscription(self, shutdown: CancellationToken) -> RunnerReport {
        let mut report = RunnerReport::default();
        // Replies of a blocking read take up to `block`: the response timeout must exceed it.
        let config = super::connection_config(self.block + Duration::from_secs(5));
        let mut connection = match self.client.get_connection_manager_lazy(config) {
            Ok(connection) => connection,
            Err(error) => {
                tracing::error!(%error, "Redis consumer runner cannot create its connection");
                return report;
            }
        };
        tracing::info!(
            consumer = self.inbox.name(),
            stream = %self.stream,
            group = %self.group,
            name = %self.consumer_name,
            "Redis consumer runner started"
        );
        let mut group_ready = false;
        let mut own_pending_first = true;
        let mut next_claim = Instant::now();
        let mut failures: u32 = 0;
        let mut redeliveries: u32 = 0;
        'run: while !shutdown.is_cancelled() {
            let failure = 'attempt: {
                if !group_ready {
                    if let Err(error) = self.ensure_group(&mut connection).await {
                        break 'attempt Some(error);
                    }
                    group_ready = true;
                }
                if !self.claim_interval.is_zero() && Instant::now() >= next_claim {
                    next_claim = Instant::now() + self.claim_interval;
                    match self.claim(&mut connection, &shutdown, &mut report).await {
                        Settled::All => {}
                        Settled::Cancelled => break 'run,
                        Settled::Redeliver => {
                            own_pending_first = true;
                            redeliveries = redeliveries.saturating_add(1);
                            if pause(
                                &shutdown,
                                redelivery_pause(
                                    &self.inbox,
                                    self.redelivery_backoff.delay(redeliveries),
                                ),
                            )
                            .await
                            {
                                break 'run;
                            }
                            break 'attempt None;
                        }
                        Settled::Failed(error) => {
                            own_pending_first = true;
                            break 'attempt Some(error);
                        }
                    }
                }
                if self.held.as_ref().is_some_and(|held| !held.holds()) {
                    tracing::info!(stream = %self.stream, "partition lease no longer held: not reading");
                    break 'run;
                }
                let from_pending = own_pending_first;
                let from = if from_pending { "0" } else { ">" };
                let read = tokio::select! {
                    () = shutdown.cancelled() => break 'run,
                    read = self.read(&mut connection, from) => read,
                };
                let entries = match read {
                    Ok(entries) => entries,
                    Err(error) => {
                        own_pending_first = true;
                        if error.contains("NOGROUP") {
                            group_ready = false;
                        }
                        break 'attempt Some(error);
                    }
                };
                if own_pending_first && entries.is_empty() {
                    own_pending_first = false;
                    break 'attempt None;
                }
                // A partition runner settles from its pending list only, in id order: what
                // a predecessor paused under the same consumer name read and left pending
                // comes before what was just read (`>` only moved it into the list).
                if self.held.is_some() && !from_pending {
                    own_pending_first = true;
                    break 'attempt None;
                }
                let whole_list = entries.len() < self.batch_size;
                match self
                    .settle_entries(&mut connection, entries, &shutdown, &mut report)
                    .await
                {
                    Settled::All => {
                        redeliveries = 0;
                        // A partition runner that settled less than a batch from its
                        // pending list emptied it: read new entries next.
                        if self.held.is_some() && whole_list {
                            own_pending_first = false;
                        }
                        None
                    }
                    Settled::Cancelled => break 'run,
                    Settled::Redeliver => {
                        own_pending_first = true;
                        redeliveries = redeliveries.saturating_add(1);
                        if pause(
                            &shutdown,
                            redelivery_pause(
                                &self.inbox,
                                self.redelivery_backoff.delay(redeliveries),
                            ),
                        )
                        .await
                        {
                            break 'run;
                        }
                        None
                    }
                    Settled::Failed(error) => {
                        own_pending_first = true;
                        Some(error)
                    }
                }
            };
            match failure {
                None => failures = 0,
                Some(error) => {
                    failures = failures.saturating_add(1);
                    report.broker_errors += 1;
                    let delay = self.retry_backoff.delay(failures);
                    tracing::warn!(
                        consumer = self.inbox.name(),
                        stream = %self.stream,
                        %error,
                        retry_in = ?delay,
                        "Redis consumer runner: broker error"
                    );
                    if pause(&shutdown, delay).await {
                        break;
                    }
                }
            }
        }
        tracing::info!(
            consumer = self.inbox.name(),
            ?report,
            "Redis consumer runner stopped"
        );
        report
    }

    /// `XGROUP CREATE <stream> <group> <start> MKSTREAM`; an existing group is fine.
    async fn ensure_group(&self, connection: &mut ConnectionManager) -> Result<(), String> {
        let created: Result<Value, _> = ::redis::cmd("XGROUP")
            .arg("CREATE")
            .arg(&self.stream)
            .arg(&self.group)
            .arg(&self.start_id)
            .arg("MKSTREAM")
            .query_async(connection)
            .await;
        match created {
            Ok(_) => Ok(()),
            Err(error) if error.code() == Some("BUSYGROUP") => Ok(()),
            Err(error) => Err(format!(
                "cannot create consumer group `{}`: {error}",
                self.group
            )),
        }
    }

    /// `XREADGROUP GROUP <group> <consumer> COUNT <n> [BLOCK <ms>] STREAMS <stream> <from>`:
    /// from `0` this consumer's pending entries (no blocking), from `>` new ones.
    async fn read(
        &self,
        connection: &mut ConnectionManager,
        from: &str,
    ) -> Result<Vec<Entry>, String> {
        let mut command = ::redis::cmd("XREADGROUP");
        command
            .arg("GROUP")
            .arg(&self.group)
            .arg(&self.consumer_name)
            .arg("COUNT")
            .arg(self.batch_size);
        if from == ">" {
            command
                .arg("BLOCK")
                .arg(u64::try_from(self.block.as_millis()).unwrap_or(u64::MAX));
        }
        command.arg("STREAMS").arg(&self.stream).arg(from);
        let reply: Value = command
            .query_async(connection)
            .await
            .map_err(|error| format!("XREADGROUP failed: {error}"))?;
        parse_read(reply)
    }

    /// Claims entries idle longer than the minimum idle time (`XAUTOCLAIM`) and settles them.
    async fn claim(
        &self,
        connection: &mut ConnectionManager,
        shutdown: &CancellationToken,
        report: &mut RunnerReport,
    ) -> Settled {
        let mut cursor = "0-0".to_owned();
        loop {
            let reply: Result<Value, _> = ::redis::cmd("XAUTOCLAIM")
                .arg(&self.stream)
                .arg(&self.group)
                .arg(&self.consumer_name)
                .arg(u64::try_from(self.claim_min_idle.as_millis()).unwrap_or(u64::MAX))
                .arg(&cursor)
                .arg("COUNT")
                .arg(self.batch_size)
                .query_async(connection)
                .await;
            let (next, entries) = match reply.map_err(|e| e.to_string()).and_then(parse_autoclaim) {
                Ok(parsed) => parsed,
                Err(error) => return Settled::Failed(format!("XAUTOCLAIM failed: {error}")),
            };
            if !entries.is_empty() {
                report.claimed += entries.len() as u64;
                tracing::info!(
                    consumer = self.inbox.name(),
                    stream = %self.stream,
                    claimed = entries.len(),
                    min_idle = ?self.claim_min_idle,
                    "claimed stale pending entries"
                );
                match self
                    .settle_entries(connection, entries, shutdown, report)
                    .await
                {
                    Settled::All => {}
                    other => return other,
                }
            }
            if next == "0-0" || next.is_empty() {
                return Settled::All;
            }
            cursor = next;
        }
    }

    /// Settles `entries` in order, acknowledging each; stops at the first that is not
    /// settled.
    async fn settle_entries(
        &self,
        connection: &mut ConnectionManager,
        entries: Vec<Entry>,
        shutdown: &CancellationToken,
        report: &mut RunnerReport,
    ) -> Settled {
        for entry in entries {
            if shutdown.is_cancelled() {
                return Settled::Cancelled;
            }
            if let Some(fields) = entry.fields {
                let (headers, body) = split_fields(fields);
                match settle(&self.inbox, &headers, &body).await {
                    Settlement::Ack(delivered) => {
                        tracing::trace!(entry = %entry.id, ?delivered, "settled");
                        report.acked += 1;
                    }
                    // A partition runner without its lease: the entry stays pending under
                    // the partition's consumer name, for the new owner.
                    Settlement::Redeliver(ConsumerError::LeaseLost { .. }) => {
                        return Settled::Cancelled;
                    }
                    Settlement::Redeliver(_) => {
                        report.redelivered += 1;
                        return Settled::Redeliver;
                    }
                }
            } else {
                tracing::warn!(
                    stream = %self.stream,
                    entry = %entry.id,
                    "pending entry was trimmed from the stream: acknowledged unprocessed"
                );
                report.trimmed += 1;
            }
            let acked: Result<i64, _> = ::redis::cmd("XACK")
                .arg(&self.stream)
                .arg(&self.group)
                .arg(&entry.id)
                .query_async(connection)
                .await;
            if let Err(error) = acked {
                // Still pending: read again (the inbox recognises the duplicate).
                return Settled::Failed(format!("XACK of {} failed: {error}", entry.id));
            }
        }
        Settled::All
    }
}

/// The envelope's headers (every field but `key` and `body`) and the body of an entry.
fn split_fields(fields: Vec<(String, Vec<u8>)>) -> (Vec<(String, String)>, Vec<u8>) {
    let mut headers = Vec::with_capacity(fields.len());
    let mut body = Vec::new();
    for (name, value) in fields {
        if name == FIELD_BODY {
            body = value;
        } else if name != FIELD_KEY {
            headers.push((name, String::from_utf8_lossy(&value).into_owned()));
        }
    }
    (headers, body)
}

fn bytes(value: Value) -> Option<Vec<u8>> {
    match value {
        Value::BulkString(bytes) => Some(bytes),
        Value::SimpleString(text) => Some(text.into_bytes()),
        Value::VerbatimString { text, .. } => Some(text.into_bytes()),
        Value::Int(n) => Some(n.to_string().into_bytes()),
        Value::Okay => Some(b"OK".to_vec()),
        _ => None,
    }
}

fn text(value: Value) -> Option<String> {
    bytes(value).map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// The items of an array-like reply.
fn items(value: Value) -> Result<Vec<Value>, String> {
    match value {
        Value::Array(items) | Value::Set(items) => Ok(items),
        Value::Nil => Ok(Vec::new()),
        Value::Map(pairs) => Ok(pairs.into_iter().flat_map(|(k, v)| [k, v]).collect()),
        Value::ServerError(error) => Err(format!("{error:?}")),
        other => Err(format!("unexpected reply {other:?}")),
    }
}

/// Entries `[[id, [field, value, …]], …]` (fields `nil` for a trimmed entry).
fn parse_entries(value: Value) -> Result<Vec<Entry>, String> {
    items(value)?
        .into_iter()
        .map(|entry| {
            let mut parts = items(entry)?.into_iter();
            let id = parts
                .next()
                .and_then(text)
                .ok_or("an entry without an id")?;
            let fields = match parts.next() {
                None | Some(Value::Nil) => None,
                Some(fields) => {
                    let mut flat = items(fields)?.into_iter();
                    let mut pairs = Vec::new();
                    while let (Some(name), Some(value)) = (flat.next(), flat.next()) {
                        let name = text(name).ok_or("a field name that is not a string")?;
                        let value = bytes(value).ok_or("a field value that is not a string")?;
                        pairs.push((name, value));
                    }
                    Some(pairs)
                }
            };
            Ok(Entry { id, fields })
        })
        .collect()
}

/// An `XREADGROUP` reply for one stream: `[[stream, entries]]`, a map, or `nil`.
fn parse_read(reply: Value) -> Result<Vec<Entry>, String> {
    let mut streams = items(reply)?.into_iter();
    let mut entries = Vec::new();
    while let Some(first) = streams.next() {
        // RESP2: each item is `[stream, entries]`; RESP3 maps flatten to `stream, entries`.
        let entries_value = match first {
            Value::Array(_) => {
                let mut pair = items(first)?.into_iter();
                pair.next();
                pair.next().unwrap_or(Value::Nil)
            }
            _ => streams.next().unwrap_or(Value::Nil),
        };
        entries.extend(parse_entries(entries_value)?);
    }
    Ok(entries)
}

/// An `XAUTOCLAIM` reply: `[next cursor, entries, deleted ids]` (Redis 7) or
/// `[next cursor, entries]` (6.2).
fn parse_autoclaim(reply: Value) -> Result<(String, Vec<Entry>), String> {
    let mut parts = items(reply)?.into_iter();
    let next = parts
        .next()
        .and_then(text)
        .ok_or("no cursor in the reply")?;
    let entries = parse_entries(parts.next().unwrap_or(Value::Nil))?;
    Ok((next, entries))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn parses_read_replies() {
        let reply = Value::Array(vec![Value::Array(vec![
            bulk("outbox:x"),
            Value::Array(vec![
                Value::Array(vec![
                    bulk("1-0"),
                    Value::Array(vec![bulk("ce-id"), bulk("a"), bulk("body"), bulk("{}")]),
                ]),
                Value::Array(vec![bulk("2-0"), Value::Nil]),
            ]),
        ])]);
        let entries = parse_read(reply).unwrap_or_default();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].id, "1-0");
        let (headers, body) = split_fields(entries[0].fields.clone().unwrap_or_default());
        assert_eq!(headers, [("ce-id".to_owned(), "a".to_owned())]);
        assert_eq!(body, b"{}");
        assert!(entries[1].fields.is_none());
        assert!(parse_read(Value::Nil).is_ok_and(|e| e.is_empty()));
    }

    #[test]
    fn parses_autoclaim_replies() {
        let reply = Value::Array(vec![
            bulk("0-0"),
            Value::Array(vec![Value::Array(vec![
                bulk("5-1"),
                Value::Array(vec![bulk("key"), bulk("o-1")]),
            ])]),
            Value::Array(vec![]),
        ]);
        let (next, entries) = parse_autoclaim(reply).unwrap_or_default();
        assert_eq!(next, "0-0");
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].id, "5-1");
    }
}
