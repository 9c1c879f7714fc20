//! Runs the `example-log-relay` binary on a database of the tests' `wal_level = logical`
//! cluster and a NATS stream of the test's own, then checks from outside: the stream holds
//! exactly the outbox rows' message ids (`Nats-Msg-Id`), in commit order, on
//! `<stream>.<event type>`; the rows stay `pending` (the log relay does not mark them); the
//! slot and its publication exist and the slot acknowledged a position.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use outbox::Outbox;
use outbox::brokers::nats::{self, NatsStream, async_nats::jetstream};
use outbox::record::OutboxRecord;
use outbox::schema::OutboxStatus;
use outbox_tests::Service;
use outbox_tests::db::TestDb;
use sea_orm::{ConnectionTrait, Statement};
use tokio::process::Command;

/// The stream's messages as (subject, `Nats-Msg-Id`), in stream order.
async fn messages(client: &nats::async_nats::Client, stream: &str) -> Vec<(String, String)> {
    let Ok(mut stream) = jetstream::new(client.clone()).get_stream(stream).await else {
        return Vec::new(); // never created: the example failed before, its output says why
    };
    let state = stream.info().await.unwrap().state.clone();
    let mut messages = Vec::new();
    for sequence in state.first_sequence..=state.last_sequence {
        if state.messages == 0 {
            break;
        }
        let message = stream.get_raw_message(sequence).await.unwrap();
        let id = message
            .headers
            .get("Nats-Msg-Id")
            .unwrap()
            .as_str()
            .to_owned();
        messages.push((message.subject.to_string(), id));
    }
    messages
}

async fn one_value(db: &TestDb, sql: String) -> Option<String> {
    let conn = db.conn();
    let statement = Statement::from_string(conn.get_database_backend(), sql);
    let row = conn.query_one_raw(statement).await.unwrap()?;
    Some(row.try_get_by_index::<String>(0).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_relay_publishes_every_committed_row_to_nats() {
    let test = "the_log_relay_publishes_every_committed_row_to_nats";
    let Some(nats_url) = outbox_tests::service(Service::Nats, test) else {
        return;
    };
    let Some(db) = TestDb::logical_postgres(test).await else {
        return;
    };
    let id = uuid::Uuid::now_v7().simple();
    let (stream, slot) = (format!("EXAMPLE_{id}"), format!("example_{id}"));
    let run = Command::new(env!("CARGO_BIN_EXE_example-log-relay"))
        .env("DATABASE_URL", db.url())
        .env("NATS_URL", &nats_url)
        .env("STREAM", &stream)
        .env("SLOT", &slot)
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(120), run).await;
    let client = nats::connect(&nats_url).await.unwrap();
    let published = messages(&client, &stream).await;
    NatsStream::new(&stream, Vec::<String>::new())
        .delete(&client)
        .await
        .unwrap();

    let output = output.expect("the example finished within 120 s").unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains(&format!("published 3 events to stream {stream}")),
        "{stdout}"
    );

    let rows = OutboxRecord::list(db.conn(), &Outbox::default(), 10)
        .await
        .unwrap();
    let orders: Vec<&str> = rows
        .iter()
        .map(|row| row.envelope.aggregate_id.as_str())
        .collect();
    assert_eq!(orders, ["order-1", "order-2", "order-3"]);
    assert!(
        rows.iter().all(|row| row.status == OutboxStatus::Pending),
        "left as written"
    );
    let subject = format!("{stream}.shop.ordering.order-placed.v1");
    let expected: Vec<(String, String)> = rows
        .iter()
        .map(|row| (subject.clone(), row.envelope.message_id.to_string()))
        .collect();
    assert_eq!(
        published, expected,
        "each row once, in commit order, under its message id"
    );

    let publication = format!("SELECT pubname::text FROM pg_publication WHERE pubname = '{slot}'");
    assert_eq!(
        one_value(&db, publication).await.as_deref(),
        Some(slot.as_str())
    );
    let confirmed = format!(
        "SELECT confirmed_flush_lsn::text FROM pg_replication_slots \
         WHERE slot_name = '{slot}' AND plugin = 'pgoutput'"
    );
    let lsn = one_value(&db, confirmed).await.expect("the slot exists");
    assert_ne!(lsn, "0/0", "the slot acknowledged what was published");
    db.close().await;
}
