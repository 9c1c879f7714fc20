//! MariaDB's global transaction ids: the position of the binlog log relay (feature
//! `log-relay-mariadb`), and how far a position is behind the server's.
//!
//! A GTID is `domain-server-sequence` (`0-1-42`): the replication domain, the server that
//! wrote the transaction, and the sequence number within the domain. A [`GtidPosition`]
//! holds the last GTID of each domain — what `@slave_connect_state` takes to resume a dump
//! (`0-1-42,1-2-7`) and what the relay stores, once the broker confirmed the transaction.
//! MariaDB's GTID event, which carries a transaction's GTID in the binlog, is read by
//! `relay::log::binlog::gtid_event`.

use std::collections::BTreeMap;
use std::fmt;

/// One transaction's global id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Gtid {
    /// The replication domain.
    pub(crate) domain: u32,
    /// The server that wrote it.
    pub(crate) server: u32,
    /// Its sequence number in the domain.
    pub(crate) sequence: u64,
}

impl fmt::Display for Gtid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}-{}", self.domain, self.server, self.sequence)
    }
}

/// Why a GTID, a position or an event body does not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum GtidError {
    /// Text that is not `domain-server-sequence`.
    #[error("`{text}` is not a MariaDB GTID (domain-server-sequence, e.g. 0-1-42)")]
    Text {
        /// The text.
        text: String,
    },
    /// Two GTIDs of one domain in a position.
    #[error("the position `{text}` names domain {domain} twice")]
    DomainTwice {
        /// The position's text.
        text: String,
        /// The domain.
        domain: u32,
    },
    /// An event body shorter than its layout.
    #[error("a {event} event of {length} bytes is shorter than its layout ({needed} bytes)")]
    Truncated {
        /// `GTID` or `GTID list`.
        event: &'static str,
        /// The body's length.
        length: usize,
        /// The bytes its layout needs.
        needed: usize,
    },
}

impl std::str::FromStr for Gtid {
    type Err = GtidError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || GtidError::Text {
            text: text.to_owned(),
        };
        let mut parts = text.trim().split('-');
        let (Some(domain), Some(server), Some(sequence), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(bad());
        };
        // `str::parse` takes a leading `+`; a GTID has digits only.
        let digits = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
        if !(digits(domain) && digits(server) && digits(sequence)) {
            return Err(bad());
        }
        Ok(Self {
            domain: domain.parse().map_err(|_| bad())?,
            server: server.parse().map_err(|_| bad())?,
            sequence: sequence.parse().map_err(|_| bad())?,
        })
    }
}

/// The last GTID of each replication domain: where a dump resumes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct GtidPosition(BTreeMap<u32, Gtid>);

impl GtidPosition {
    /// Whether it names no domain (a dump from it starts at the oldest binlog).
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Moves `gtid`'s domain to it (a transaction of that domain was confirmed).
    pub(crate) fn advance(&mut self, gtid: Gtid) {
        self.0.insert(gtid.domain, gtid);
    }

    /// Its GTIDs, by domain.
    pub(crate) fn gtids(&self) -> impl Iterator<Item = Gtid> + '_ {
        self.0.values().copied()
    }

    /// Reads `D-S-N[,D-S-N…]` (empty: no domain), as `@@gtid_binlog_pos` shows it.
    pub(crate) fn parse(text: &str) -> Result<Self, GtidError> {
        let mut position = Self::default();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let gtid: Gtid = part.parse()?;
            if position.0.insert(gtid.domain, gtid).is_some() {
                return Err(GtidError::DomainTwice {
                    text: text.to_owned(),
                    domain: gtid.domain,
                });
            }
        }
        Ok(position)
    }

    /// How many transactions `server` (the server's position, `@@gtid_binlog_pos`) holds
    /// after this position: per domain, the server's sequence number minus this one's (all
    /// of a domain this position does not name), summed. Domains only this position names
    /// count nothing.
    pub(crate) fn transactions_behind(&self, server: &GtidPosition) -> u64 {
        server
            .gtids()
            .map(|at| {
                let here = self.0.get(&at.domain).map_or(0, |gtid| gtid.sequence);
                at.sequence.saturating_sub(here)
            })
            .fold(0_u64, u64::saturating_add)
    }
}

impl fmt::Display for GtidPosition {
    /// `D-S-N,D-S-N`, by domain: what `@slave_connect_state` takes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, gtid) in self.0.values().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{gtid}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A GTID of its parts.
    pub(crate) fn gtid(domain: u32, server: u32, sequence: u64) -> Gtid {
        Gtid {
            domain,
            server,
            sequence,
        }
    }

    #[test]
    fn gtids_and_positions_read_and_print_as_mariadb_writes_them() {
        assert_eq!("0-1-42".parse::<Gtid>(), Ok(gtid(0, 1, 42)));
        assert_eq!(
            gtid(3, 7, 18_446_744_073_709_551_615).to_string(),
            "3-7-18446744073709551615"
        );
        for bad in [
            "",
            "0-1",
            "0-1-2-3",
            "a-1-2",
            "0--2",
            "+0-1-2",
            "0-1-4294967296x",
            "-1-2",
        ] {
            assert!(bad.parse::<Gtid>().is_err(), "{bad:?} read");
        }
        assert!(
            "4294967296-1-2".parse::<Gtid>().is_err(),
            "a domain is 32 bits"
        );
        let position = GtidPosition::parse("1-2-7, 0-1-42").unwrap();
        assert_eq!(position.to_string(), "0-1-42,1-2-7", "by domain");
        assert_eq!(position.gtids().last(), Some(gtid(1, 2, 7)));
        assert!(GtidPosition::parse("").unwrap().is_empty());
        assert_eq!(
            GtidPosition::parse("0-1-4,0-2-9"),
            Err(GtidError::DomainTwice {
                text: "0-1-4,0-2-9".into(),
                domain: 0
            })
        );
        let mut moved = position.clone();
        moved.advance(gtid(0, 1, 43));
        moved.advance(gtid(5, 1, 1));
        assert_eq!(moved.to_string(), "0-1-43,1-2-7,5-1-1");
    }

    #[test]
    fn transactions_behind_count_per_domain() {
        let position = |text: &str| GtidPosition::parse(text).unwrap();
        let stored = position("0-1-40,1-2-7");
        assert_eq!(stored.transactions_behind(&position("0-1-40,1-2-7")), 0);
        assert_eq!(stored.transactions_behind(&position("0-1-45,1-2-9")), 7);
        assert_eq!(
            stored.transactions_behind(&position("0-1-45,1-2-9,2-1-3")),
            10
        );
        assert_eq!(stored.transactions_behind(&position("0-1-30")), 0, "ahead");
        assert_eq!(
            GtidPosition::default().transactions_behind(&position("0-1-5")),
            5
        );
    }
}
