//! [`Crash`]: the two process crashes an outbox must survive, as the test kit plays them.

/// A process crash that [`TestKit::crash`](super::TestKit::crash) arms and
/// [`TestKit::drain_until_idle`](super::TestKit::drain_until_idle) plays once, at the
/// point it names. After the crash the kit "restarts" the process: it builds the relay or
/// the consumer again from its configuration and goes on, as a supervisor would.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Crash {
    /// The relay's process dies after the broker accepted a batch and before the rows were
    /// marked `published`. The restarted relay publishes the same rows again, with the same
    /// message ids: consumers receive them twice and their inbox applies them once.
    AfterPublishBeforeMark,
    /// Consumer `consumer`'s process dies after its handler returned `Ok` and before the
    /// inbox transaction committed: the handler's writes and the inbox row roll back, the
    /// message is not acknowledged, and the broker delivers it again to the restarted
    /// consumer, whose handler runs again.
    AfterHandlerBeforeCommit {
        /// The consumer name (as given to the kit's builder).
        consumer: String,
    },
}

impl Crash {
    /// [`Crash::AfterHandlerBeforeCommit`] of `consumer`.
    pub fn after_handler_before_commit(consumer: impl Into<String>) -> Self {
        Self::AfterHandlerBeforeCommit {
            consumer: consumer.into(),
        }
    }
}
