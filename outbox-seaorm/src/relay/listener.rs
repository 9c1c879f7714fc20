//! PostgreSQL `LISTEN` for the outbox's `NOTIFY` channel: wakes the relay early.
//!
//! Notifications are hints. While the listener reconnects they are lost, so it wakes the
//! relay after every (re)connection, and the relay's polling stays the authority.

use std::sync::Arc;
use std::time::Duration;

use outbox_core::metric;
use sea_orm::sqlx::PgPool;
use sea_orm::sqlx::postgres::PgListener;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

const FIRST_RETRY: Duration = Duration::from_millis(100);
const LAST_RETRY: Duration = Duration::from_secs(5);

/// Listens on `channel` until `shutdown`, waking `wake` on every notification and after
/// every reconnection.
pub(crate) async fn listen(
    pool: PgPool,
    channel: String,
    wake: Arc<Notify>,
    shutdown: CancellationToken,
    labels: Vec<metrics::Label>,
) {
    let mut retry = FIRST_RETRY;
    let mut connected_before = false;
    loop {
        let connected = async {
            let mut listener = PgListener::connect_with(&pool).await?;
            listener.listen(&channel).await?;
            Ok::<_, sea_orm::sqlx::Error>(listener)
        };
        let mut listener = tokio::select! {
            () = shutdown.cancelled() => return,
            result = connected => match result {
                Ok(listener) => listener,
                Err(error) => {
                    tracing::warn!(%error, %channel, ?retry, "relay LISTEN failed, retrying");
                    tokio::select! {
                        () = shutdown.cancelled() => return,
                        () = tokio::time::sleep(retry) => {}
                    }
                    retry = (retry * 2).min(LAST_RETRY);
                    continue;
                }
            },
        };
        if connected_before {
            metrics::counter!(metric::LISTENER_RECONNECTS, labels.clone()).increment(1);
            tracing::info!(%channel, "relay LISTEN connection re-established");
        }
        connected_before = true;
        retry = FIRST_RETRY;
        // Whatever was notified while not listening is lost: poll now.
        wake.notify_one();
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                received = listener.try_recv() => match received {
                    Ok(Some(_)) => wake.notify_one(),
                    Ok(None) => {
                        // The connection dropped; sqlx reconnected and listens again.
                        metrics::counter!(metric::LISTENER_RECONNECTS, labels.clone()).increment(1);
                        tracing::info!(%channel, "relay LISTEN connection lost and re-established");
                        wake.notify_one();
                    }
                    Err(error) => {
                        tracing::warn!(%error, %channel, "relay LISTEN connection failed, reconnecting");
                        wake.notify_one();
                        break;
                    }
                },
            }
        }
    }
}
