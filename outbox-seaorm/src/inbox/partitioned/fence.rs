//! [`Fence`]: the partition lease a fenced [`Consumer`](crate::inbox::Consumer) applies
//! messages under, checked inside every handler's transaction.

use sea_orm::{ConnectionTrait, DbErr};
use tokio_util::sync::CancellationToken;

use crate::config::Outbox;
use crate::sql::Store;

/// One partition lease held by one consumer instance, with the fencing token it was
/// acquired with. A handler's transaction commits only while the lease is still this
/// instance's with this token: [`Fence::check`] reads the lease row share-locked (PostgreSQL
/// `FOR SHARE`, MariaDB `LOCK IN SHARE MODE`; SQLite has one writer at a time), so another
/// instance that takes the lease over waits for the transaction to end, and the transaction
/// of an instance that lost the lease rolls back instead of committing behind the new
/// owner's.
#[derive(Debug)]
pub(crate) struct Fence {
    store: Store,
    outbox: Outbox,
    /// The lease name (`consumer/<name>/partition/<p>`).
    lease: String,
    owner: String,
    token: i64,
    /// Cancelled when a check finds the lease lost: the partition's runner stops.
    lost: CancellationToken,
}

impl Fence {
    pub(crate) fn new(
        store: Store,
        outbox: Outbox,
        lease: String,
        owner: String,
        token: i64,
        lost: CancellationToken,
    ) -> Self {
        Self {
            store,
            outbox,
            lease,
            owner,
            token,
            lost,
        }
    }

    /// The lease name.
    pub(crate) fn lease(&self) -> &str {
        &self.lease
    }

    /// Whether the lease is still held with the token, share-locking its row until `conn`'s
    /// transaction ends. When it is not, cancels the partition (its runner stops).
    ///
    /// # Errors
    /// The database's error.
    pub(crate) async fn check<C: ConnectionTrait>(&self, conn: &C) -> Result<bool, DbErr> {
        let now = self.outbox.clock().now();
        let token = self
            .store
            .held_token(conn, &self.lease, &self.owner, now)
            .await?;
        let held = token == Some(self.token);
        if !held {
            tracing::warn!(
                lease = %self.lease,
                owner = %self.owner,
                token = self.token,
                found = ?token,
                "partition lease lost: the message is left to the new owner"
            );
            self.lost.cancel();
        }
        Ok(held)
    }
}
