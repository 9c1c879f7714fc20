//! What a log source hands the publishing side, whichever log it reads: [`Change`]s in
//! commit order, a transaction's [`Position`] in the log, the streamed [`Row`], and the
//! [`Acknowledger`] that moves the source's confirmed position once the broker confirmed.
//! PostgreSQL's logical decoding ([`super::source`]) keeps its position in the slot;
//! MariaDB's binlog (`super::binlog`) has none on the server, so the relay stores it.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use chrono::{DateTime, Utc};

#[cfg(feature = "log-relay-mariadb")]
use crate::gtid::GtidPosition;

/// A transaction's place in the log, as its source acknowledges it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Position {
    /// PostgreSQL: the end of the commit record; acknowledging it confirms everything
    /// before it.
    #[cfg(feature = "log-relay")]
    Lsn(u64),
    /// MariaDB: the last transaction of each replication domain; acknowledging it
    /// confirms, per domain, everything before it.
    #[cfg(feature = "log-relay-mariadb")]
    Gtid(GtidPosition),
}

impl Position {
    /// Takes in `later`, the position of a transaction that committed after this one.
    pub(crate) fn advance(&mut self, later: Position) {
        match (self, later) {
            #[cfg(feature = "log-relay")]
            (Self::Lsn(lsn), Self::Lsn(later)) => *lsn = (*lsn).max(later),
            #[cfg(feature = "log-relay-mariadb")]
            (Self::Gtid(position), Self::Gtid(later)) => {
                for gtid in later.gtids() {
                    position.advance(gtid);
                }
            }
            // One source gives one kind of position: never mixed.
            #[cfg(all(feature = "log-relay", feature = "log-relay-mariadb"))]
            (Self::Lsn(_), Self::Gtid(_)) | (Self::Gtid(_), Self::Lsn(_)) => {}
        }
    }

    /// As the slot's lease records it (`XX/XXXXXXXX` for an LSN, `D-S-N,…` for GTIDs).
    pub(crate) fn text(&self) -> String {
        match self {
            #[cfg(feature = "log-relay")]
            Self::Lsn(lsn) => format!("{:X}/{:X}", lsn >> 32, lsn & 0xFFFF_FFFF),
            #[cfg(feature = "log-relay-mariadb")]
            Self::Gtid(position) => position.to_string(),
        }
    }
}

/// A replicated row of the outbox table, read by column name.
#[derive(Debug)]
pub(crate) enum Row {
    /// PostgreSQL's text format, as `pgoutput` sends it.
    #[cfg(feature = "log-relay")]
    Wal(super::wal_row::WalRow),
    /// MariaDB's binlog values, rendered as the same text.
    #[cfg(feature = "log-relay-mariadb")]
    Binlog(super::text_row::TextRow),
}

impl Row {
    /// The text of column `name`: `None` when the column is missing or `NULL`.
    pub(crate) fn text(&self, name: &str) -> Option<&str> {
        match self {
            #[cfg(feature = "log-relay")]
            Self::Wal(row) => row.text(name),
            #[cfg(feature = "log-relay-mariadb")]
            Self::Binlog(row) => row.text(name),
        }
    }
}

/// One change of the stream, in commit order.
#[derive(Debug)]
pub(crate) enum Change {
    /// A transaction starts; its changes follow, then its [`Change::Commit`].
    Begin,
    /// A row inserted into a published table.
    Insert {
        /// The table's schema (MariaDB: its database).
        schema: Arc<str>,
        /// The table's name.
        table: Arc<str>,
        /// The row.
        row: Row,
    },
    /// A logical message (`pg_logical_emit_message`; PostgreSQL only).
    #[cfg_attr(not(feature = "log-relay"), allow(dead_code))]
    Message {
        /// Whether it was written in a transaction (it then arrives between its
        /// transaction's [`Change::Begin`] and [`Change::Commit`]).
        transactional: bool,
        /// The message's prefix.
        prefix: Arc<str>,
        /// Its body.
        content: Vec<u8>,
        /// Its position (the acknowledgement of a non-transactional message).
        position: Position,
    },
    /// The transaction committed; acknowledging `position` confirms it and everything
    /// before it.
    Commit {
        /// Its position.
        position: Position,
        /// When the transaction committed.
        committed_at: DateTime<Utc>,
    },
    /// Time to look at the held aggregates (what operators requeued or skipped): MariaDB's
    /// reader sends it every heartbeat interval, between transactions (PostgreSQL's relay
    /// receives its own heartbeat message instead).
    Tick,
    /// Anything else the stream carries (relation and type descriptions, origins,
    /// heartbeats): the relay does not act on it.
    Other,
}

/// Moves the source's confirmed position: shared between the publishing side (which
/// acknowledges) and the reading side (which reports it to the server, or stores it);
/// also remembers when the last acknowledged transaction committed (for the retention
/// cleanup).
#[derive(Debug, Clone)]
pub(crate) struct Acknowledger {
    position: Confirmed,
    /// Commit time of the last acknowledged transaction, in microseconds since the epoch
    /// (`i64::MIN`: none yet).
    committed_at: Arc<AtomicI64>,
    /// How many acknowledgements carried rows of the outbox (published, parked or dead),
    /// as opposed to transactions of other tables only (on MariaDB, the relay's own
    /// position and lease writes among them).
    with_rows: Arc<AtomicU64>,
}

/// Where an acknowledged position goes.
#[derive(Debug, Clone)]
pub(crate) enum Confirmed {
    /// PostgreSQL: the stream's status updates carry it to the slot.
    #[cfg(feature = "log-relay")]
    Wal(Arc<pg_walstream::SharedLsnFeedback>),
    /// MariaDB: the session stores it in the slot's row.
    #[cfg(feature = "log-relay-mariadb")]
    Binlog(Arc<std::sync::Mutex<GtidPosition>>),
}

impl Acknowledger {
    /// An acknowledger that moves `position`.
    pub(crate) fn new(position: Confirmed) -> Self {
        Self {
            position,
            committed_at: Arc::new(AtomicI64::new(i64::MIN)),
            with_rows: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Confirms everything up to `position` (monotonic: a lower one is ignored), the end of
    /// a transaction that committed at `committed_at`; `rows`: the acknowledged
    /// transactions carried rows of the outbox.
    pub(crate) fn acknowledge(
        &self,
        position: &Position,
        committed_at: Option<DateTime<Utc>>,
        rows: bool,
    ) {
        match (&self.position, position) {
            #[cfg(feature = "log-relay")]
            (Confirmed::Wal(feedback), Position::Lsn(lsn)) => {
                feedback.update_flushed_lsn(*lsn);
                feedback.update_applied_lsn(*lsn);
            }
            #[cfg(feature = "log-relay-mariadb")]
            (Confirmed::Binlog(confirmed), Position::Gtid(position)) => {
                let mut confirmed = confirmed
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                for gtid in position.gtids() {
                    confirmed.advance(gtid);
                }
            }
            // One source gives one kind of position: never mixed.
            #[cfg(all(feature = "log-relay", feature = "log-relay-mariadb"))]
            (Confirmed::Wal(_), Position::Gtid(_)) | (Confirmed::Binlog(_), Position::Lsn(_)) => {}
        }
        if let Some(at) = committed_at {
            self.committed_at
                .fetch_max(at.timestamp_micros(), Ordering::AcqRel);
        }
        if rows {
            self.with_rows.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// How many acknowledgements so far carried rows of the outbox: a position that moved
    /// without them moved past other tables' transactions only.
    pub(crate) fn acknowledged_with_rows(&self) -> u64 {
        self.with_rows.load(Ordering::Acquire)
    }

    /// The highest position acknowledged so far, if any.
    pub(crate) fn acknowledged(&self) -> Option<Position> {
        match &self.position {
            #[cfg(feature = "log-relay")]
            Confirmed::Wal(feedback) => match feedback.get_applied_lsn() {
                0 => None,
                lsn => Some(Position::Lsn(lsn)),
            },
            #[cfg(feature = "log-relay-mariadb")]
            Confirmed::Binlog(confirmed) => {
                let confirmed = confirmed
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                (!confirmed.is_empty()).then(|| Position::Gtid(confirmed.clone()))
            }
        }
    }

    /// When the last acknowledged transaction committed.
    pub(crate) fn acknowledged_commit(&self) -> Option<DateTime<Utc>> {
        match self.committed_at.load(Ordering::Acquire) {
            i64::MIN => None,
            micros => DateTime::from_timestamp_micros(micros),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "log-relay")]
    #[test]
    fn an_lsn_position_advances_and_prints_as_postgresql_does() {
        let mut position = Position::Lsn(0x1_0000_00A0);
        position.advance(Position::Lsn(0x50));
        assert_eq!(position, Position::Lsn(0x1_0000_00A0), "never backwards");
        position.advance(Position::Lsn(0x2_0000_0001));
        assert_eq!(position.text(), "2/1");
    }

    #[cfg(feature = "log-relay-mariadb")]
    #[test]
    fn a_gtid_position_advances_per_domain_and_is_acknowledged_so() {
        let parse = |text: &str| Position::Gtid(GtidPosition::parse(text).unwrap());
        let mut batch = parse("0-1-5");
        batch.advance(parse("1-2-3"));
        batch.advance(parse("0-1-6"));
        assert_eq!(batch.text(), "0-1-6,1-2-3");
        let acknowledger = Acknowledger::new(Confirmed::Binlog(Arc::default()));
        assert_eq!(acknowledger.acknowledged(), None);
        acknowledger.acknowledge(&parse("0-1-4,2-1-1"), None, false);
        assert_eq!(acknowledger.acknowledged_with_rows(), 0);
        acknowledger.acknowledge(&batch, None, true);
        assert_eq!(acknowledger.acknowledged_with_rows(), 1);
        assert_eq!(
            acknowledger.acknowledged().map(|p| p.text()).as_deref(),
            Some("0-1-6,1-2-3,2-1-1")
        );
    }
}
