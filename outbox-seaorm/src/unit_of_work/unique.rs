//! Unique jobs at commit ([`Unique`](crate::job::Unique)): before its rows are written, a
//! commit takes the key of each row whose job is unique, in `<outbox>_unique` on the same
//! transaction. A key still held — by a job that waits, or within its window — keeps the row
//! out: it is not written, and the report lists it as already enqueued, with the holder's
//! message id. A key whose holder is done (or whose window passed) is released and taken.
//! Two rows of one key in one commit: the first is written.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use outbox_core::Envelope;
use sea_orm::{DatabaseTransaction, DbErr};
use sha2::{Digest as _, Sha256};
use uuid::Uuid;

use crate::config::{Outbox, UniqueBy, UniqueScope};
use crate::limits::MAX_DUE;
use crate::sql::unique::{self, Holder};

/// A unique job's row that the commit did not write: another job of its key waits.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AlreadyEnqueued {
    /// The job's event type.
    pub event_type: String,
    /// The key: the aggregate id, or the hex SHA-256 of the arguments.
    pub key: String,
    /// The message id the row would have had.
    pub message_id: Uuid,
    /// The message id of the job that holds the key.
    pub holder: Uuid,
}

/// A row's claim on a key.
#[derive(Debug, Clone)]
pub(crate) struct Claim {
    event_type: String,
    key: String,
    message_id: Uuid,
    expires_at: Option<DateTime<Utc>>,
}

/// The claim of `envelope`'s row at `now`, when its job is unique.
pub(crate) fn claim_of(outbox: &Outbox, envelope: &Envelope, now: DateTime<Utc>) -> Option<Claim> {
    let unique = *outbox.job(&envelope.event_type)?.unique_ref()?;
    let key = match unique.by() {
        UniqueBy::Aggregate => envelope.aggregate_id.clone(),
        UniqueBy::Args => {
            let digest = Sha256::digest(envelope.payload.as_bytes());
            digest.iter().map(|byte| format!("{byte:02x}")).collect()
        }
    };
    let expires_at = match unique.scope() {
        UniqueScope::WhilePending => None,
        UniqueScope::Within(window) => Some(
            chrono::TimeDelta::from_std(window)
                .ok()
                .and_then(|window| now.checked_add_signed(window))
                .map_or(MAX_DUE, |at| at.min(MAX_DUE)),
        ),
    };
    Some(Claim {
        event_type: envelope.event_type.clone(),
        key,
        message_id: envelope.message_id,
        expires_at,
    })
}

/// Takes the keys of `claims` on `txn`; returns the rows kept out.
pub(crate) async fn take_keys(
    txn: &DatabaseTransaction,
    outbox: &Outbox,
    claims: Vec<Claim>,
    now: DateTime<Utc>,
) -> Result<Vec<AlreadyEnqueued>, DbErr> {
    let mut refused = Vec::new();
    // Keys this commit took, and the row that took each.
    let mut taken: HashMap<(String, String), Uuid> = HashMap::new();
    for claim in claims {
        let id = (claim.event_type.clone(), claim.key.clone());
        if let Some(&holder) = taken.get(&id) {
            refused.push(already(claim, holder));
            continue;
        }
        let mine = Holder {
            message_id: claim.message_id,
            expires_at: claim.expires_at,
        };
        // Take first: a free key costs one statement, and no read locks a key that does not
        // exist yet (on MariaDB two such reads would both hold the gap and deadlock on
        // their inserts).
        if unique::take(txn, outbox, &claim.event_type, &claim.key, mine, now).await? {
            taken.insert(id, claim.message_id);
            continue;
        }
        let holder = unique::lock_holder(txn, outbox, &claim.event_type, &claim.key).await?;
        let held = match holder {
            Some(Holder {
                expires_at: Some(until),
                ..
            }) => until > now,
            Some(holder) => unique::job_waiting(txn, outbox, holder.message_id).await?,
            // Released between the two statements: take it again.
            None => false,
        };
        if held {
            let holder = holder.map_or(claim.message_id, |holder| holder.message_id);
            refused.push(already(claim, holder));
            continue;
        }
        unique::release(txn, outbox, &claim.event_type, &claim.key).await?;
        if unique::take(txn, outbox, &claim.event_type, &claim.key, mine, now).await? {
            taken.insert(id, claim.message_id);
        } else {
            // Another commit took the freed key first (it waited for ours).
            let holder = unique::lock_holder(txn, outbox, &claim.event_type, &claim.key)
                .await?
                .map_or(claim.message_id, |holder| holder.message_id);
            refused.push(already(claim, holder));
        }
    }
    Ok(refused)
}

fn already(claim: Claim, holder: Uuid) -> AlreadyEnqueued {
    AlreadyEnqueued {
        event_type: claim.event_type,
        key: claim.key,
        message_id: claim.message_id,
        holder,
    }
}
