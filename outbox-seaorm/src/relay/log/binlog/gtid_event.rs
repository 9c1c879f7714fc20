//! MariaDB's GTID event (type 162), the start of a transaction's event group in the
//! binlog: the binlog client does not parse it, [`GtidEvent::parse`] reads its body
//! (little-endian, as the server writes it in `log_event.cc`).

use crate::gtid::{Gtid, GtidError};

/// The GTID event's flag: a statement outside a transaction (DDL, a non-transactional
/// table): no `XID` event ends its group, its one query does.
pub(crate) const FL_STANDALONE: u8 = 0x01;

/// The GTID event's flag: a group-commit id follows the flags.
const FL_GROUP_COMMIT_ID: u8 = 0x02;

/// A GTID event (type 162): the start of a transaction's event group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GtidEvent {
    /// The transaction's GTID.
    pub(crate) gtid: Gtid,
    /// Its flags (`FL_STANDALONE`, …).
    pub(crate) flags: u8,
}

impl GtidEvent {
    /// Reads the body (after the common header, without the checksum): sequence `u64`,
    /// domain `u32`, flags `u8`, then a group-commit id `u64` when flagged; the server id is
    /// the header's.
    pub(crate) fn parse(server: u32, body: &[u8]) -> Result<Self, GtidError> {
        let truncated = |needed| GtidError::Truncated {
            event: "GTID",
            length: body.len(),
            needed,
        };
        let (Some(sequence), Some(domain), Some(&flags)) =
            (body.get(0..8), body.get(8..12), body.get(12))
        else {
            return Err(truncated(13));
        };
        if flags & FL_GROUP_COMMIT_ID != 0 && body.len() < 21 {
            return Err(truncated(21));
        }
        Ok(Self {
            gtid: Gtid {
                domain: u32::from_le_bytes(domain.try_into().map_err(|_| truncated(13))?),
                server,
                sequence: u64::from_le_bytes(sequence.try_into().map_err(|_| truncated(13))?),
            },
            flags,
        })
    }

    /// Whether its group is one statement with no `XID` event (see [`FL_STANDALONE`]).
    pub(crate) fn standalone(&self) -> bool {
        self.flags & FL_STANDALONE != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gtid::tests::gtid;

    #[test]
    fn a_gtid_event_body_reads_with_and_without_a_group_commit_id() {
        let mut body = Vec::new();
        body.extend_from_slice(&42u64.to_le_bytes());
        body.extend_from_slice(&3u32.to_le_bytes());
        body.push(0x0c); // transactional, allow parallel
        let event = GtidEvent::parse(1, &body).unwrap();
        assert_eq!(event.gtid, gtid(3, 1, 42));
        assert!(!event.standalone());
        body[12] = FL_STANDALONE | FL_GROUP_COMMIT_ID;
        assert!(matches!(
            GtidEvent::parse(1, &body),
            Err(GtidError::Truncated { needed: 21, .. })
        ));
        body.extend_from_slice(&9u64.to_le_bytes());
        let event = GtidEvent::parse(2, &body).unwrap();
        assert!(event.standalone());
        assert_eq!(event.gtid.server, 2);
        assert!(matches!(
            GtidEvent::parse(1, &body[..12]),
            Err(GtidError::Truncated { needed: 13, .. })
        ));
    }
}
