//! Runs three `example-partitioned-consumer` processes on one PostgreSQL database and a NATS
//! stream of the test's own: two that only consume, which split the 8 partitions between
//! them (checked in the lease table), then one that writes and relays 6 orders × 3 steps
//! and joins them (partitions are handed over while messages flow). Then reads the
//! database: every event applied exactly once, each order's steps in order, one inbox row
//! per message, nothing left in the outbox.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;

use outbox::Outbox;
use outbox::brokers::nats::{self, NatsStream};
use outbox::record::OutboxRecord;
use outbox_tests::Service;
use outbox_tests::db::TestDb;
use sea_orm::{ConnectionTrait, Statement};
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

const WAIT: Duration = Duration::from_secs(120);

fn instance(
    db: &TestDb,
    nats_url: &str,
    stream: &str,
    number: u32,
) -> (Child, Lines<BufReader<ChildStdout>>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_example-partitioned-consumer"))
        .env("DATABASE_URL", db.url())
        .env("NATS_URL", nats_url)
        .env("STREAM", stream)
        .env("WRITE", if number == 3 { "1" } else { "0" })
        // Named, not a fresh UUID each run: the partitions go to instances by a hash of their
        // names, and two random names leave the second one nothing 1 time in 256 (8
        // partitions; CI met it). "one" and "two" split them 4 and 4, with "three" 2, 2, 4.
        .env("INSTANCE", ["one", "two", "three"][number as usize - 1])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    (child, lines)
}

/// Waits for the process to exit; returns whether it succeeded and the rest of its output.
async fn finish((mut child, mut lines): (Child, Lines<BufReader<ChildStdout>>)) -> (bool, String) {
    let mut output = String::new();
    while let Some(line) = lines.next_line().await.unwrap() {
        output.push_str(&line);
        output.push('\n');
    }
    (child.wait().await.unwrap().success(), output)
}

/// The number `sql` counts; `None` while its table does not exist yet.
async fn count(db: &TestDb, sql: &str) -> Option<i64> {
    let conn = db.conn();
    let statement = Statement::from_string(conn.get_database_backend(), sql);
    let row = conn.query_one_raw(statement).await.ok()??;
    Some(row.try_get_by_index(0).unwrap())
}

/// Waits until the live partition leases are held by `owners` distinct instances.
async fn until_held_by(db: &TestDb, owners: i64) {
    let held = "SELECT count(DISTINCT owner) FROM inbox_consumer_leases \
                WHERE owner IS NOT NULL AND expires_at > now()";
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while count(db, held).await != Some(owners) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the leases are held by {owners}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_split_the_partitions_and_apply_every_event_once_in_order() {
    let test = "instances_split_the_partitions_and_apply_every_event_once_in_order";
    let Some(nats_url) = outbox_tests::service(Service::Nats, test) else {
        return;
    };
    let Some(db) = TestDb::postgres(test).await else {
        return;
    };
    let stream = format!("EXAMPLE_{}", uuid::Uuid::now_v7().simple());

    // Two consumers split the partitions, then a third process writes, relays and joins.
    let first = instance(&db, &nats_url, &stream, 1);
    let consumers = async {
        until_held_by(&db, 1).await;
        let second = instance(&db, &nats_url, &stream, 2);
        until_held_by(&db, 2).await;
        second
    };
    let (second, third) = match tokio::time::timeout(WAIT, consumers).await {
        Ok(second) => (Some(second), Some(instance(&db, &nats_url, &stream, 3))),
        Err(_) => (None, None), // reported below, once the stream is deleted
    };
    let all = async {
        let mut outputs = Vec::new();
        for process in [Some(first), second, third].into_iter().flatten() {
            outputs.push(finish(process).await); // they run on meanwhile
        }
        outputs
    };
    let outputs = tokio::time::timeout(WAIT, all).await;
    let client = nats::connect(&nats_url).await.unwrap();
    NatsStream::new(&stream, Vec::<String>::new())
        .delete(&client)
        .await
        .unwrap();

    let outputs = outputs.expect("the instances exited");
    assert_eq!(
        outputs.len(),
        3,
        "the partitions were split between two instances"
    );
    for (n, (ok, output)) in outputs.iter().enumerate() {
        eprint!("instance {}: {output}", n + 1);
        assert!(ok, "instance {} failed: {output}", n + 1);
        assert!(
            output
                .lines()
                .last()
                .unwrap()
                .starts_with("18 events applied"),
            "{output}"
        );
    }
    assert!(
        outputs[2].1.starts_with("wrote 18 events"),
        "{}",
        outputs[2].1
    );

    let conn = db.conn();
    let select = "SELECT order_id, step FROM applied ORDER BY seq";
    let rows = conn
        .query_all_raw(Statement::from_string(conn.get_database_backend(), select))
        .await
        .unwrap();
    let mut steps: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    for row in rows {
        let order_id: String = row.try_get("", "order_id").unwrap();
        steps
            .entry(order_id)
            .or_default()
            .push(row.try_get("", "step").unwrap());
    }
    let expected: BTreeMap<String, Vec<i32>> = (1..=6)
        .map(|order| (format!("order-{order}"), vec![1, 2, 3]))
        .collect();
    assert_eq!(
        steps, expected,
        "each step applied once, each order's steps in order"
    );
    let inbox = "SELECT count(*) FROM inbox WHERE consumer = 'shipping.track-orders'";
    assert_eq!(
        count(&db, inbox).await,
        Some(18),
        "one inbox row per message"
    );
    let outbox = OutboxRecord::count(conn, &Outbox::default()).await.unwrap();
    assert_eq!(
        outbox, 0,
        "every row published (and deleted once published)"
    );
    db.close().await;
}
