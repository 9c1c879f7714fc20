//! What every consumer runner does with a received message: hand it to the inbox
//! [`Consumer`], then acknowledge it only once it is settled.

use outbox_seaorm::inbox::{Consumer, ConsumerError, Delivered};

/// What a runner tells the broker about a message.
#[derive(Debug)]
#[non_exhaustive]
pub enum Settlement {
    /// Settled (applied, duplicate, ignored or dead-lettered, all committed): acknowledge.
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
            tracing::warn!(consumer = consumer.name(), %error, "message not settled: will be redelivered");
            Settlement::Redeliver(error)
        }
    }
}
