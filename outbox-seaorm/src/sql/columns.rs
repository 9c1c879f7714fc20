//! The outbox columns in their one order ([`ALL`]), and what each statement does with each:
//! the `INSERT` of a commit binds or writes a literal ([`Column::insert`]), a claim on
//! PostgreSQL reads a column by its position among [`Column::claimed`] ones, other reads
//! select every column under its standard name ([`Column::standard`]). Adding a column
//! means one variant here and the arms the compiler then asks for.

use crate::status::OutboxStatus;
use crate::table::OutboxColumns;

/// An outbox column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Column {
    Seq,
    MessageId,
    EventType,
    Version,
    AggregateType,
    AggregateId,
    Partition,
    CorrelationId,
    CausationId,
    Traceparent,
    Tracestate,
    Headers,
    OccurredAt,
    Payload,
    Status,
    Attempts,
    NextAttemptAt,
    LastError,
    PublishedAt,
    CreatedAt,
    WorkerKey,
    Retryable,
    Priority,
}

/// Every outbox column, in the order every statement lists them.
pub(crate) const ALL: [Column; 23] = [
    Column::Seq,
    Column::MessageId,
    Column::EventType,
    Column::Version,
    Column::AggregateType,
    Column::AggregateId,
    Column::Partition,
    Column::CorrelationId,
    Column::CausationId,
    Column::Traceparent,
    Column::Tracestate,
    Column::Headers,
    Column::OccurredAt,
    Column::Payload,
    Column::Status,
    Column::Attempts,
    Column::NextAttemptAt,
    Column::LastError,
    Column::PublishedAt,
    Column::CreatedAt,
    Column::WorkerKey,
    Column::Retryable,
    Column::Priority,
];

/// What a commit's `INSERT` writes into a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Insert {
    /// A bound value of the row.
    Bound,
    /// The same SQL literal for every row, written after the bound columns.
    Literal(&'static str),
    /// Nothing: the column's default (`seq`) or `NULL`.
    Omitted,
}

impl Column {
    /// The column's name under `columns`' naming.
    pub(crate) const fn name(self, columns: &OutboxColumns) -> &'static str {
        match self {
            Self::Seq => columns.seq,
            Self::MessageId => columns.message_id,
            Self::EventType => columns.event_type,
            Self::Version => columns.version,
            Self::AggregateType => columns.aggregate_type,
            Self::AggregateId => columns.aggregate_id,
            Self::Partition => columns.partition,
            Self::CorrelationId => columns.correlation_id,
            Self::CausationId => columns.causation_id,
            Self::Traceparent => columns.traceparent,
            Self::Tracestate => columns.tracestate,
            Self::Headers => columns.headers,
            Self::OccurredAt => columns.occurred_at,
            Self::Payload => columns.payload,
            Self::Status => columns.status,
            Self::Attempts => columns.attempts,
            Self::NextAttemptAt => columns.next_attempt_at,
            Self::LastError => columns.last_error,
            Self::PublishedAt => columns.published_at,
            Self::CreatedAt => columns.created_at,
            Self::WorkerKey => columns.worker_key,
            Self::Retryable => columns.retryable,
            Self::Priority => columns.priority,
        }
    }

    /// The standard name: what reads select the column as, whatever the naming.
    pub(crate) const fn standard(self) -> &'static str {
        self.name(&OutboxColumns::STANDARD)
    }

    /// What a commit writes into the column.
    pub(crate) const fn insert(self) -> Insert {
        match self {
            Self::Seq | Self::LastError | Self::PublishedAt => Insert::Omitted,
            Self::Status => Insert::Literal(OutboxStatus::Pending.as_sql_literal()),
            Self::Attempts => Insert::Literal("0"),
            _ => Insert::Bound,
        }
    }

    /// A JSON column (`jsonb` on PostgreSQL: a bound text is cast).
    pub(crate) const fn is_json(self) -> bool {
        matches!(self, Self::Headers | Self::Payload)
    }

    /// Whether a claim reads the column: the envelope, `seq`, `attempts`, the worker key and
    /// `retryable` (the priority orders the claim; nothing after it reads it).
    pub(crate) const fn claimed(self) -> bool {
        !matches!(
            self,
            Self::Partition
                | Self::Priority
                | Self::Status
                | Self::NextAttemptAt
                | Self::LastError
                | Self::PublishedAt
                | Self::CreatedAt
        )
    }

    /// The column's position in a claim's select list (the [`claimed`](Self::claimed)
    /// columns in [`ALL`]'s order).
    pub(crate) const fn claim_position(self) -> usize {
        let mut position = 0;
        let mut index = 0;
        while index < ALL.len() {
            let column = ALL[index];
            if column as usize == self as usize {
                return position;
            }
            if column.claimed() {
                position += 1;
            }
            index += 1;
        }
        position
    }
}

/// Number of bound values per inserted row.
pub(crate) const INSERT_BOUND: usize = {
    let mut count = 0;
    let mut index = 0;
    while index < ALL.len() {
        if matches!(ALL[index].insert(), Insert::Bound) {
            count += 1;
        }
        index += 1;
    }
    count
};

/// The columns an `INSERT` lists: the bound ones in [`ALL`]'s order, then the literal ones.
pub(crate) fn inserted() -> impl Iterator<Item = Column> {
    let bound = ALL
        .into_iter()
        .filter(|column| column.insert() == Insert::Bound);
    let literal = ALL
        .into_iter()
        .filter(|column| matches!(column.insert(), Insert::Literal(_)));
    bound.chain(literal)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_follow_the_one_order() {
        assert_eq!(INSERT_BOUND, 18);
        assert_eq!(Column::Seq.claim_position(), 0);
        assert_eq!(Column::CorrelationId.claim_position(), 6);
        assert_eq!(Column::Attempts.claim_position(), 13);
        assert_eq!(Column::Retryable.claim_position(), 15);
        assert_eq!(ALL.iter().filter(|column| column.claimed()).count(), 16);
        assert_eq!(inserted().count(), 20);
        for (index, column) in ALL.iter().enumerate() {
            assert_eq!(*column as usize, index, "{column:?} out of order");
        }
    }
}
