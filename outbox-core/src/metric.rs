//! Names of the metrics the framework emits through the [`metrics`](https://docs.rs/metrics)
//! facade (install any exporter — Prometheus, StatsD, OpenTelemetry — to collect them).
//!
//! Labels are bounded: `outbox` (the configured outbox table name), `class`
//! (`transient` / `permanent`), `event_type` (a contract name: bounded by the number of
//! contracts), `action` (an operator action). Never an aggregate id, message id or relay
//! instance id.
//!
//! | name | type | labels | meaning |
//! |---|---|---|---|
//! | [`PENDING_ROWS`] | gauge | `outbox` | rows waiting to be published (backoff included) |
//! | [`OLDEST_CLAIMABLE_AGE`] | gauge | `outbox` | age in seconds of the oldest row a relay could claim now (rows parked in backoff and rows held back behind them or behind a dead row excluded); the outbox lag to alert on |
//! | [`DEAD_ROWS`] | gauge | `outbox` | dead-lettered rows |
//! | [`FAILED_ROWS`] | gauge | `outbox` | rows in `failed` (non-retryable jobs that failed, waiting for a person) |
//! | [`PUBLISHED`] | counter | `outbox` | rows published |
//! | [`PUBLISH_FAILURES`] | counter | `outbox`, `class` | failed publication attempts |
//! | [`DEAD_LETTERED`] | counter | `outbox`, `event_type` | rows moved to `dead` |
//! | [`FAILED`] | counter | `outbox`, `event_type` | rows moved to `failed`: a row whose `retryable` flag is off failed once (job-queue mode); each also raised the relay's alert hook |
//! | [`SNOOZED`] | counter | `outbox`, `event_type` | jobs that asked to run again later (`JobError::snooze_until`); not attempts, not failures |
//! | [`BATCH_DURATION`] | histogram | `outbox` | seconds per relay batch (claim, publish, mark) |
//! | [`HELD_ROWS`] | gauge | `outbox` | due rows held back behind an earlier row of their aggregate |
//! | [`BACKOFF_ROWS`] | gauge | `outbox` | pending rows in backoff after a failed attempt |
//! | [`BATCH_SIZE`] | histogram | `outbox` | rows claimed per batch |
//! | [`RELAY_HEARTBEAT`] | gauge | `outbox` | Unix time of a relay's last heartbeat |
//! | [`LEASES_OWNED`] | gauge | `outbox` | leases held by this process's relay |
//! | [`LISTENER_RECONNECTS`] | counter | `outbox` | PostgreSQL `LISTEN` connections re-established |
//! | [`OPERATOR_ACTIONS`] | counter | `outbox`, `action` | requeues and skips by operators |
//! | [`PURGED_ROWS`] | counter | `outbox`, `table` (`outbox` / `inbox`) | rows deleted by retention |
//! | [`WRITE_MODE`] | gauge | `outbox`, `mode` | 1 for the outbox's write mode (`table`, `table+remove_after_insert`, `message`) |
//! | [`LOG_SLOT_LAG_BYTES`] | gauge | `outbox`, `slot` | log relay: bytes of WAL between the server's position and the slot's acknowledged one |
//! | [`LOG_SLOT_WAL_STATUS`] | gauge | `outbox`, `slot`, `status` | log relay: 1 for the slot's current `wal_status` (`reserved`, `extended`, `unreserved`, `lost`), 0 for the others |
//! | [`DATABASE_FAILURES`] | counter | `loop`, `step`, and the loop's `outbox` or `consumer` | failed database attempts of a long-running loop (`relay`, `log relay`, `consumer`, `partitioned consumer`, `relay service`) by step (`batch`, `status gauges`, …); each failing step backs off up to 4 s |
//! | [`LOG_COMMIT_TO_PUBLISH`] | histogram | `outbox` | log relay: seconds from a transaction's commit to the broker's confirmation of its last event |

/// Gauge: rows with status `pending`.
pub const PENDING_ROWS: &str = "outbox_pending_rows";
/// Gauge: age in seconds of the oldest claimable row (backoff excluded).
pub const OLDEST_CLAIMABLE_AGE: &str = "outbox_oldest_claimable_age_seconds";
/// Gauge: pending rows that are due but held back behind an earlier row of their
/// aggregate (in backoff, or dead or failed under `Block`): the claim does not take them.
pub const HELD_ROWS: &str = "outbox_held_rows";
/// Gauge: pending rows in backoff after a failed attempt (not due yet).
pub const BACKOFF_ROWS: &str = "outbox_backoff_rows";
/// Gauge: rows with status `dead`.
pub const DEAD_ROWS: &str = "outbox_dead_rows";
/// Gauge: rows with status `failed`.
pub const FAILED_ROWS: &str = "outbox_failed_rows";
/// Counter: rows published.
pub const PUBLISHED: &str = "outbox_published_total";
/// Counter: failed publication attempts, by `class`.
pub const PUBLISH_FAILURES: &str = "outbox_publish_failures_total";
/// Counter: rows dead-lettered, by `event_type`.
pub const DEAD_LETTERED: &str = "outbox_dead_lettered_total";
/// Counter: rows marked `failed` (not retryable, failed once), by `event_type`.
pub const FAILED: &str = "outbox_failed_total";
/// Counter: jobs that asked to run again later (label `event_type`; no attempt counted).
pub const SNOOZED: &str = "outbox_jobs_snoozed_total";
/// Histogram: duration of a relay batch in seconds.
pub const BATCH_DURATION: &str = "outbox_relay_batch_duration_seconds";
/// Histogram: rows claimed per batch.
pub const BATCH_SIZE: &str = "outbox_relay_batch_rows";
/// Gauge: Unix time of the last relay heartbeat.
pub const RELAY_HEARTBEAT: &str = "outbox_relay_heartbeat_timestamp_seconds";
/// Gauge: leases held by the relay of this process.
pub const LEASES_OWNED: &str = "outbox_relay_leases_owned";
/// Counter: `LISTEN` connections re-established.
pub const LISTENER_RECONNECTS: &str = "outbox_relay_listener_reconnects_total";
/// Gauge: 1, labelled with the outbox's write mode (`mode`: `table`,
/// `table+remove_after_insert`, `message`).
pub const WRITE_MODE: &str = "outbox_write_mode";
/// Gauge: bytes of WAL a log relay's slot holds back (server position − acknowledged
/// position), by `slot`.
pub const LOG_SLOT_LAG_BYTES: &str = "outbox_log_slot_lag_bytes";
/// Gauge: MariaDB: transactions the server binlogged after a log relay slot's acknowledged
/// position (every replication domain summed), by `slot`; read every heartbeat interval.
pub const LOG_SLOT_LAG_TRANSACTIONS: &str = "outbox_log_slot_lag_transactions";
/// Gauge: 1 for a log relay slot's current `wal_status`, 0 for the other statuses, by
/// `slot` and `status`; `lost` means the slot was invalidated.
pub const LOG_SLOT_WAL_STATUS: &str = "outbox_log_slot_wal_status";
/// Histogram: seconds from a transaction's commit to the broker's confirmation of its last
/// event (log relay).
pub const LOG_COMMIT_TO_PUBLISH: &str = "outbox_log_commit_to_publish_seconds";
/// Counter: failed database attempts of a long-running loop, by `loop` and `step`.
pub const DATABASE_FAILURES: &str = "outbox_database_failures_total";
/// Counter: operator actions (`requeue`, `skip`).
pub const OPERATOR_ACTIONS: &str = "outbox_operator_actions_total";
/// Counter: rows deleted by retention, by `table`.
pub const PURGED_ROWS: &str = "outbox_purged_rows_total";
