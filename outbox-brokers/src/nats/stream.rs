//! [`NatsStream`]: creates or updates the JetStream stream that captures the outbox subjects.

use std::time::Duration;

use async_nats::jetstream::{self, stream};

use super::NatsError;

/// Default duplicate window of a stream: 2 minutes (JetStream's own default).
pub const DEFAULT_DUPLICATE_WINDOW: Duration = Duration::from_secs(120);

/// The desired state of a JetStream stream: its name, the subjects it captures and its
/// duplicate window. [`ensure`](Self::ensure) creates it, or updates an existing stream of
/// that name to match.
///
/// The stream is the ordering unit: JetStream orders messages within a stream, across its
/// subjects, and a consumer reads one stream. Capture every subject an aggregate's events
/// are published to in one stream (with the default route, e.g. `events.bookstore.ordering.>`
/// for every event of the Ordering context).
///
/// | setting | default |
/// |---|---|
/// | duplicate window | 2 minutes ([`DEFAULT_DUPLICATE_WINDOW`]): a republished message id within it is dropped |
/// | storage | file |
/// | replicas | 1 |
/// | maximum age | unlimited |
/// | retention | limits (messages stay after they are consumed; a consumer's position is its own) |
///
/// ```no_run
/// # async fn demo(client: async_nats::Client) -> Result<(), outbox_brokers::nats::NatsError> {
/// use std::time::Duration;
/// use outbox_brokers::nats::NatsStream;
///
/// NatsStream::new("BOOKSTORE_ORDERING", ["events.bookstore.ordering.>"])
///     .duplicate_window(Duration::from_secs(600))
///     .max_age(Duration::from_secs(7 * 24 * 3600))
///     .ensure(&client)
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct NatsStream {
    name: String,
    subjects: Vec<String>,
    duplicate_window: Duration,
    storage: stream::StorageType,
    replicas: usize,
    max_age: Duration,
}

impl NatsStream {
    /// A stream named `name` (no spaces, dots, `*` or `>`) capturing `subjects` (wildcards
    /// allowed).
    pub fn new<S: Into<String>>(
        name: impl Into<String>,
        subjects: impl IntoIterator<Item = S>,
    ) -> Self {
        Self {
            name: name.into(),
            subjects: subjects.into_iter().map(Into::into).collect(),
            duplicate_window: DEFAULT_DUPLICATE_WINDOW,
            storage: stream::StorageType::File,
            replicas: 1,
            max_age: Duration::ZERO,
        }
    }

    /// How long JetStream remembers message ids to drop duplicates (default 2 minutes). Make
    /// it longer than the time a relay may take to republish a row it could not mark
    /// (publish timeout + lease TTL + backoff), or accept that such a copy is stored twice
    /// and left to the inbox.
    #[must_use]
    pub fn duplicate_window(mut self, window: Duration) -> Self {
        self.duplicate_window = window;
        self
    }

    /// File (default) or memory storage.
    #[must_use]
    pub fn storage(mut self, storage: stream::StorageType) -> Self {
        self.storage = storage;
        self
    }

    /// Replicas in a cluster (default 1).
    #[must_use]
    pub fn replicas(mut self, replicas: usize) -> Self {
        self.replicas = replicas;
        self
    }

    /// How long messages are kept (default: forever, `Duration::ZERO`). Must exceed the
    /// longest time a consumer may lag behind.
    #[must_use]
    pub fn max_age(mut self, max_age: Duration) -> Self {
        self.max_age = max_age;
        self
    }

    /// The stream's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The subjects it captures.
    pub fn subjects(&self) -> &[String] {
        &self.subjects
    }

    /// The JetStream configuration this describes.
    pub fn config(&self) -> stream::Config {
        stream::Config {
            name: self.name.clone(),
            subjects: self.subjects.clone(),
            duplicate_window: self.duplicate_window,
            storage: self.storage,
            num_replicas: self.replicas,
            max_age: self.max_age,
            retention: stream::RetentionPolicy::Limits,
            ..Default::default()
        }
    }

    /// Creates the stream, or updates the stream of that name to this configuration
    /// (subjects, duplicate window, replicas, maximum age; JetStream refuses to change the
    /// storage type of an existing stream).
    ///
    /// # Errors
    /// [`NatsError::Stream`] with the server's answer.
    pub async fn ensure(&self, client: &async_nats::Client) -> Result<stream::Info, NatsError> {
        let context = jetstream::new(client.clone());
        let error = |message: String| NatsError::Stream {
            stream: self.name.clone(),
            message,
        };
        match context.get_stream(&self.name).await {
            Ok(mut existing) => {
                let current = existing
                    .info()
                    .await
                    .map_err(|e| error(e.to_string()))?
                    .clone();
                let wanted = self.config();
                let config = &current.config;
                if config.subjects == wanted.subjects
                    && config.duplicate_window == wanted.duplicate_window
                    && config.num_replicas == wanted.num_replicas
                    && config.max_age == wanted.max_age
                {
                    return Ok(current);
                }
                let updated = stream::Config {
                    subjects: wanted.subjects,
                    duplicate_window: wanted.duplicate_window,
                    num_replicas: wanted.num_replicas,
                    max_age: wanted.max_age,
                    ..current.config
                };
                context
                    .update_stream(updated)
                    .await
                    .map_err(|e| error(format!("cannot update: {e}")))
            }
            Err(get) if is_stream_not_found(&get.kind()) => {
                let mut created = context
                    .create_stream(self.config())
                    .await
                    .map_err(|e| error(format!("cannot create: {e}")))?;
                created
                    .info()
                    .await
                    .cloned()
                    .map_err(|e| error(e.to_string()))
            }
            Err(get) => Err(error(get.to_string())),
        }
    }

    /// Deletes the stream (and every message in it). Returns whether it existed.
    ///
    /// # Errors
    /// [`NatsError::Stream`] with the server's answer.
    pub async fn delete(&self, client: &async_nats::Client) -> Result<bool, NatsError> {
        let context = jetstream::new(client.clone());
        match context.delete_stream(&self.name).await {
            Ok(status) => Ok(status.success),
            Err(error) if is_stream_not_found(&error.kind()) => Ok(false),
            Err(error) => Err(NatsError::Stream {
                stream: self.name.clone(),
                message: error.to_string(),
            }),
        }
    }
}

fn is_stream_not_found(kind: &jetstream::context::GetStreamErrorKind) -> bool {
    matches!(
        kind,
        jetstream::context::GetStreamErrorKind::JetStream(error)
            if error.error_code() == jetstream::ErrorCode::STREAM_NOT_FOUND
    )
}
