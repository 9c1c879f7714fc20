//! MariaDB: a mark must not lock rows it does not mark, or a concurrent claim skips an
//! aggregate's head and takes the rows behind it (the `FORCE INDEX (PRIMARY)` of
//! `sql/mark.rs`).
//!
//! Rows, all pending: `s1` (aggregate `b`, its head), `s2` (`r`), `s3` (`b`, behind `s1`),
//! `s4` (`a`). Another transaction holds `s2`, so a mark of `s2, s4` waits on it. A mark that
//! walks the `(status, seq)` index over the pending rows (forced here with `FORCE INDEX` and
//! `seq + 0`; the optimizer's choice depends on statistics) has locked `s1` while it waits,
//! and the relay's claim (`SKIP LOCKED`) takes `s3` without `s1`: `b` out of order. The
//! shipped mark goes through the primary key and locks nothing but its own rows: the claim
//! takes `s1` and `s3`, in order.
//!
//! Seen on MariaDB 10.11 here: without the hint, this 4-row table's mark is planned on the
//! `(status, seq)` index with exact seeks (`EXPLAIN`: `range`, key length 74), which locks
//! no other row either, so the shipped scenario also passes with the hint removed. The hint
//! is what makes the plan independent of statistics.
//!
//! Needs the MariaDB server (`OUTBOX_TEST_MYSQL_URL`, default
//! `mysql://root@127.0.0.1:3306/test`); it fails, never skips, when the server is missing.

// Helpers of tests, which clippy's `allow-unwrap-in-tests` does not see as tests.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use outbox_core::mapping::{ContractMapper, ContractSink, MapError};
use outbox_core::policy::DeadLetterPolicy;
use outbox_core::{IntegrationEvent, Raise as _};
use sea_orm::{
    ConnectOptions, ConnectionTrait, Database, DatabaseConnection, DatabaseTransaction, DbBackend,
    IsolationLevel, Statement, TransactionTrait,
};
use serde::{Deserialize, Serialize};

use crate::config::Outbox;
use crate::record::OutboxRecord;
use crate::schema;
use crate::sql::{Claim, Store};

#[derive(IntegrationEvent, Serialize, Deserialize, schemars::JsonSchema)]
#[integration_event(name = "tests.marks.order-noted.v1", key = order_id)]
struct OrderNotedV1 {
    order_id: String,
}

/// Raises one note per aggregate id.
struct Notes;

impl ContractMapper<&'static str> for Notes {
    fn map(&self, event: &&'static str, out: &mut ContractSink<'_>) -> Result<(), MapError> {
        out.emit(&OrderNotedV1 {
            order_id: (*event).to_owned(),
        })
    }
}

/// How the mark under test reaches its rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mark {
    /// The relay's own statement (`Store::mark_published`).
    Shipped,
    /// The same `UPDATE` forced through the `(status, seq)` index.
    StatusIndex,
}

fn url() -> String {
    std::env::var("OUTBOX_TEST_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".to_owned())
}

fn server_url(url: &str) -> &str {
    url.rsplit_once('/').map_or(url, |(server, _)| server)
}

async fn connect(url: &str) -> DatabaseConnection {
    let mut options = ConnectOptions::new(url);
    options
        .max_connections(6)
        .sqlx_logging(false)
        .acquire_timeout(Duration::from_secs(30));
    Database::connect(options).await.unwrap_or_else(|error| {
        panic!("MariaDB at {url} is unreachable ({error}): start it, or run `bash scripts/test`")
    })
}

async fn read_committed(db: &DatabaseConnection) -> DatabaseTransaction {
    db.begin_with_config(Some(IsolationLevel::ReadCommitted), None)
        .await
        .unwrap()
}

async fn scalar(conn: &impl ConnectionTrait, sql: &str) -> Option<i64> {
    conn.query_one_raw(Statement::from_string(DbBackend::MySql, sql))
        .await
        .unwrap()
        .map(|row| row.try_get_by_index::<i64>(0).unwrap())
}

/// Whether `seq` is locked by another transaction (a `SKIP LOCKED` probe, rolled back).
async fn locked(db: &DatabaseConnection, table: &str, seq: i64) -> bool {
    let probe = read_committed(db).await;
    let sql = format!(
        "SELECT seq FROM {table} FORCE INDEX (PRIMARY) WHERE seq = {seq} FOR UPDATE SKIP LOCKED"
    );
    let found = scalar(&probe, &sql).await;
    probe.rollback().await.unwrap();
    found.is_none()
}

/// Drops the scenario's database, also when the scenario panicked.
struct DropDatabase {
    url: String,
    name: String,
}

impl Drop for DropDatabase {
    fn drop(&mut self) {
        let (url, name) = (self.url.clone(), self.name.clone());
        // On a thread and runtime of its own: a panicking test's runtime may be gone.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            runtime.block_on(async {
                let admin = Database::connect(url.as_str())
                    .await
                    .map_err(std::io::Error::other)?;
                let drop = admin
                    .execute_unprepared(&format!("DROP DATABASE IF EXISTS `{name}`"))
                    .await;
                let _ = admin.close().await;
                drop.map(|_| ()).map_err(std::io::Error::other)
            })
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) {
            tracing::warn!(database = %self.name, "could not drop the test database");
        }
    }
}

/// Runs one scenario on a database of its own; returns the `seq`s the claim took and
/// whether the mark had locked the head `s1`, with `[s1, s2, s3, s4]`.
async fn claim_beside_a_waiting_mark(mark: Mark) -> (Vec<i64>, bool, [i64; 4]) {
    let url = url();
    let name = format!("outbox_u_mark_{}", uuid::Uuid::now_v7().simple());
    let admin = connect(&url).await;
    admin
        .execute_unprepared(&format!("CREATE DATABASE `{name}`"))
        .await
        .unwrap();
    let _drop = DropDatabase {
        url: url.clone(),
        name: name.clone(),
    };
    let db = connect(&format!("{}/{name}", server_url(&url))).await;
    let table = format!("outbox_{}", &name[name.len() - 12..]);
    let outbox = Outbox::builder().outbox_table(&table).build().unwrap();
    schema::install(&db, &outbox).await.unwrap();

    let uow = outbox.begin(&db, &Notes).await.unwrap();
    for aggregate in ["b", "r", "b", "a"] {
        uow.raise(aggregate);
    }
    uow.commit().await.unwrap();
    let rows = OutboxRecord::list(&db, &outbox, 10).await.unwrap();
    let seqs: Vec<i64> = rows.iter().map(|row| row.seq).collect();
    let aggregates: Vec<&str> = rows
        .iter()
        .map(|row| row.envelope.aggregate_id.as_str())
        .collect();
    assert_eq!(aggregates, ["b", "r", "b", "a"]);
    let [s1, s2, s3, s4] = <[i64; 4]>::try_from(seqs).unwrap();

    // Someone else holds s2.
    let holder = read_committed(&db).await;
    scalar(
        &holder,
        &format!("SELECT seq FROM {table} WHERE seq = {s2} FOR UPDATE"),
    )
    .await;

    // The mark of s2, s4 waits on it, on a task of its own.
    let marker = read_committed(&db).await;
    let store = Store::new(&outbox, DbBackend::MySql);
    let now = outbox.clock().now();
    let forced = format!(
        "UPDATE {table} FORCE INDEX ({table}_pending_seq_idx) SET status = 'published' \
         WHERE seq + 0 IN ({s2}, {s4}) AND status = 'pending'"
    );
    let marking = tokio::spawn(async move {
        let changed = match mark {
            Mark::Shipped => store.mark_published(&marker, &[s2, s4], now).await.unwrap(),
            Mark::StatusIndex => marker
                .execute_unprepared(&forced)
                .await
                .unwrap()
                .rows_affected(),
        };
        marker.commit().await.unwrap();
        changed
    });
    // The mark waits on s2: its `UPDATE` runs in this database (the process list, which
    // is live; `innodb_trx` is a cache that concurrent pollers keep stale) and stays
    // unfinished while the holder keeps s2. Scanning four rows takes microseconds: after
    // the settle time it is blocked on s2, past s1.
    let running = format!(
        "SELECT COUNT(*) FROM information_schema.processlist \
         WHERE db = '{name}' AND info LIKE 'UPDATE%{table}%'"
    );
    let started = Instant::now();
    while scalar(&db, &running).await != Some(1) {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the mark never started"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!marking.is_finished(), "the mark waits for s2");
    let head_locked = locked(&db, &table, s1).await;

    // The relay's claim, meanwhile.
    let claimer = read_committed(&db).await;
    let claim = Claim {
        now: outbox.clock().now(),
        partitions: None,
        limit: 10,
        ordered: true,
        dead_letters: DeadLetterPolicy::Block,
        lock: true,
        worker_keys: None,
        past: None,
    };
    let claimed: Vec<i64> = Store::new(&outbox, DbBackend::MySql)
        .claim(&claimer, claim)
        .await
        .unwrap()
        .iter()
        .map(|row| row.seq)
        .collect();
    claimer.rollback().await.unwrap();

    holder.rollback().await.unwrap();
    assert_eq!(
        marking.await.unwrap(),
        2,
        "the mark marks s2 and s4 once s2 is free"
    );
    db.close().await.unwrap();
    admin.close().await.unwrap();
    (claimed, head_locked, [s1, s2, s3, s4])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mark_through_the_status_index_makes_a_claim_skip_the_aggregate_head() {
    let (claimed, head_locked, [_, _, s3, s4]) =
        claim_beside_a_waiting_mark(Mark::StatusIndex).await;
    assert!(
        head_locked,
        "through the (status, seq) index the waiting mark holds s1"
    );
    assert_eq!(
        claimed,
        [s3, s4],
        "the claim takes b's s3 without its head s1: out of order"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_mark_locks_only_its_rows_and_the_claim_keeps_order() {
    let (claimed, head_locked, [s1, _, s3, s4]) = claim_beside_a_waiting_mark(Mark::Shipped).await;
    assert!(
        !head_locked,
        "the shipped mark goes through the primary key: s1 stays free"
    );
    assert_eq!(
        claimed,
        [s1, s3, s4],
        "b's head is claimed before (and with) s3"
    );
}
