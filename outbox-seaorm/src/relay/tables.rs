//! The relay's own tables, created next to the outbox table by
//! [`schema::install`](crate::schema::install) and by the migration
//! [`CreateRelayTables`](crate::migration::CreateRelayTables):
//!
//! | table (default name) | what it holds |
//! |---|---|
//! | `<outbox>_relay_leases` | one row per lease: `name` (`partition/17`, `relay`, `cleanup/outbox`, …), `owner` (a relay instance id or `NULL`), `token` (incremented on every change of owner: a fencing token), `acquired_at`, `expires_at` |
//! | `<outbox>_relay_instances` | one row per live relay instance: `instance_id`, `description`, `started_at`, `heartbeat_at`, `expires_at`, `worker_keys` (comma-separated, `NULL` for a relay that claims every row; see [`crate::job`]) |
//! | `<outbox>_operator_log` | one row per operator action (`requeue`, `skip`): the row's `seq`, `message_id` and `event_type`, `action`, `previous_status`, `actor`, `reason`, the row's `last_error` at that time, `at` |
//!
//! Plus, on PostgreSQL and SQLite, two small partial indexes on the outbox table that the
//! per-aggregate claim query uses: `<outbox>_held_aggregate_idx` on `(aggregate_type,
//! aggregate_id, seq) WHERE status IN ('dead', 'failed')` (rows the relay gave up on, which
//! hold back their aggregate under the
//! [`Block`](outbox_core::policy::DeadLetterPolicy::Block) policy) and
//! `<outbox>_retrying_aggregate_idx` on the same columns `WHERE status = 'pending' AND
//! attempts > 0` (rows in backoff). They hold only failed rows, so they cost the write
//! path nothing. On MariaDB the outbox's `(status, aggregate_type, aggregate_id, seq)`
//! index serves both.
//!
//! Names longer than 63 characters are shortened with a hash of the outbox table name, as
//! index names are. Timestamps are stored like the outbox's (see [`crate::schema`]).

pub use crate::table::RelayTables;
