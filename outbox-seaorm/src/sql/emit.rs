//! Writing a commit's envelopes as transactional logical messages (message mode, see
//! [`WriteMode::Message`](crate::config::WriteMode::Message)), PostgreSQL only: no outbox
//! row, one `pg_logical_emit_message(true, <prefix>, <envelope JSON>)` per envelope, in
//! order, all of a chunk in one statement. Private like the `INSERT`: the only caller is
//! [`UnitOfWork::commit`](crate::UnitOfWork::commit).

use outbox_core::Envelope;
use sea_orm::{ConnectionTrait, DatabaseTransaction, DbBackend, DbErr, Statement};

use super::dialect::text;
use super::insert::check_key_lengths;
use crate::error::CommitError;

/// One envelope as the JSON text of its message.
pub(crate) struct PreparedMessage {
    json: String,
}

/// Serializes `envelope` (the same key-length limits as a row, so that switching modes
/// never changes what a commit accepts).
pub(crate) fn prepare(envelope: &Envelope) -> Result<PreparedMessage, CommitError> {
    check_key_lengths(envelope)?;
    let json = envelope
        .to_json_vec()
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .ok_or_else(|| {
            CommitError::Database(DbErr::Custom(format!(
                "envelope {} cannot be serialized",
                envelope.message_id
            )))
        })?;
    Ok(PreparedMessage { json })
}

/// Emits the messages with `prefix`, chunks of at most `max_bytes` (a single larger
/// message goes alone). Returns the number of statements executed.
pub(crate) async fn emit(
    txn: &DatabaseTransaction,
    prefix: &str,
    messages: Vec<PreparedMessage>,
    max_bytes: usize,
) -> Result<usize, DbErr> {
    let mut statements = 0;
    let mut chunk = String::from("[");
    for message in messages {
        if chunk.len() > 1 && chunk.len() + message.json.len() > max_bytes {
            emit_chunk(
                txn,
                prefix,
                std::mem::replace(&mut chunk, String::from("[")),
            )
            .await?;
            statements += 1;
        }
        if chunk.len() > 1 {
            chunk.push(',');
        }
        chunk.push_str(&message.json);
    }
    if chunk.len() > 1 {
        emit_chunk(txn, prefix, chunk).await?;
        statements += 1;
    }
    Ok(statements)
}

/// One statement for a JSON array of envelopes, emitted in array order.
async fn emit_chunk(
    txn: &DatabaseTransaction,
    prefix: &str,
    mut array: String,
) -> Result<(), DbErr> {
    array.push(']');
    let statement = Statement::from_sql_and_values(
        DbBackend::Postgres,
        "SELECT count(pg_logical_emit_message(true, $1, e::text)) AS emitted \
         FROM json_array_elements(CAST($2 AS json)) AS e",
        [text(prefix), text(array)],
    );
    txn.query_one_raw(statement).await?;
    Ok(())
}
