//! What every consumer runner does with a received message: hand it to the inbox
//! [`Consumer`], then acknowledge it only once it is settled.

use std::future::Future;
use std::time::Duration;

use outbox_seaorm::inbox::{Consumer, ConsumerError, Delivered};
use tokio_util::sync::CancellationToken;

/// What a runner tells the broker about a message.
#[derive(Debug)]
#[non_exhaustive]
pub enum Settlement {
    /// Settled (applied, duplicate, ignored, parked or dead-lettered, all committed):
    /// acknowledge.
    Ack(Delivered),
    /// Not settled (the database failed, even for the dead letter): do not acknowledge;
    /// the broker must deliver it again.
    Redeliver(ConsumerError),
}

/// Hands a CloudEvents binary-mode message to `consumer` (decode, inbox, handler with
/// retries, dead letter) and says whether to acknowledge it.
pub async fn settle(consumer: &Consumer, headers: &[(String, String)], body: &[u8]) -> Settlement {
    match consumer.deliver_binary(headers, body).await {
        Ok(delivered) => Settlement::Ack(delivered),
        Err(error) => {
            // A database error is logged by the consumer's outage rule (once, then every
            // 30 s, then its recovery): not once per message here.
            match &error {
                ConsumerError::Database { .. } => {
                    tracing::debug!(consumer = consumer.name(), %error, "message not settled: will be redelivered");
                }
                _ => {
                    tracing::warn!(consumer = consumer.name(), %error, "message not settled: will be redelivered");
                }
            }
            Settlement::Redeliver(error)
        }
    }
}

/// How long a runner waits before a message its consumer could not settle comes back:
/// `configured` (the runner's own redelivery delay), or longer while the consumer's
/// database keeps failing (its backoff, at most 4 s: [`outbox_seaorm::outage`]).
pub(crate) fn redelivery_pause(consumer: &Consumer, configured: Duration) -> Duration {
    configured.max(consumer.database_outage().pause())
}

/// Runs a runner's subscription loop with [`Consumer::redeliver_until`] beside it (dead
/// letters an operator requeued, and messages parked for a later attempt or behind an
/// earlier message of their aggregate, are redelivered), until the loop ends: at
/// `shutdown`, or earlier on an error it returns.
pub(crate) async fn with_requeued_redelivery<F: Future>(
    consumer: &Consumer,
    shutdown: &CancellationToken,
    subscription: F,
) -> F::Output {
    let stop = shutdown.child_token();
    let (output, ()) = tokio::join!(
        async {
            let output = subscription.await;
            stop.cancel();
            output
        },
        consumer.redeliver_until(stop.clone())
    );
    output
}
