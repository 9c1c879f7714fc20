//! Runs the `example-axum-service` binary on PostgreSQL and on a SQLite file, sends it good
//! and bad orders over HTTP, and reads the database: each accepted order is one `orders` row
//! and one pending outbox row with the message id the response named; a refused one (409,
//! 422, 400) wrote neither.

#![allow(clippy::unwrap_used)]

use std::process::Stdio;
use std::time::Duration;

use outbox::Outbox;
use outbox::record::OutboxRecord;
use outbox::schema::OutboxStatus;
use outbox_tests::db::TestDb;
use sea_orm::{ConnectionTrait, Statement};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// Starts the service on `url` and port 0; returns it (killed when dropped) and its base URL.
async fn start(url: &str) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_example-axum-service"))
        .env("DATABASE_URL", url)
        .env("LISTEN", "127.0.0.1:0")
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
        .await
        .expect("the service printed its address within 60 s")
        .unwrap()
        .expect("the service printed its address before exiting");
    let base = line
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line: {line}"))
        .to_owned();
    (child, base)
}

async fn post(http: &reqwest::Client, base: &str, body: String) -> (u16, String) {
    let response = http
        .post(format!("{base}/orders"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

fn order(id: &str, books: &[&str]) -> String {
    json!({ "order_id": id, "books": books }).to_string()
}

async fn scenario(db: &TestDb) {
    let (_service, base) = start(db.url()).await;
    let http = reqwest::Client::new();

    let (status, first) = post(&http, &base, order("order-1", &["dune"])).await;
    assert_eq!(status, 201, "{first}");
    // Refused: a second order-1 (its event was raised, then rolled back), no book, bad JSON,
    // a missing field.
    let (status, body) = post(&http, &base, order("order-1", &["emma"])).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(post(&http, &base, order("order-2", &[])).await.0, 422);
    assert_eq!(post(&http, &base, "{".into()).await.0, 400);
    assert_eq!(
        post(&http, &base, r#"{"order_id":"order-3"}"#.into())
            .await
            .0,
        422
    );
    let (status, second) = post(&http, &base, order("order-2", &["emma", "dune"])).await;
    assert_eq!(status, 201, "{second}");

    let conn = db.conn();
    let select = "SELECT id FROM orders ORDER BY id";
    let rows = conn
        .query_all_raw(Statement::from_string(conn.get_database_backend(), select))
        .await
        .unwrap();
    let orders: Vec<String> = rows
        .iter()
        .map(|row| row.try_get("", "id").unwrap())
        .collect();
    assert_eq!(orders, ["order-1", "order-2"]);

    let events = OutboxRecord::list(conn, &Outbox::default(), 100)
        .await
        .unwrap();
    assert_eq!(
        events.len(),
        2,
        "one event per accepted order, none for a refused one"
    );
    let expected = [
        ("order-1", first, json!(["dune"])),
        ("order-2", second, json!(["emma", "dune"])),
    ];
    for (event, (order_id, response, books)) in events.iter().zip(expected) {
        let envelope = &event.envelope;
        assert_eq!(envelope.event_type, "shop.ordering.order-placed.v1");
        assert_eq!(envelope.aggregate_id, order_id);
        let named: Value = serde_json::from_str(&response).unwrap();
        assert_eq!(named, json!([envelope.message_id]), "the response names it");
        let payload: Value = serde_json::from_str(envelope.payload.get()).unwrap();
        assert_eq!(payload["books"], books, "the refused order-1 left no trace");
        assert_eq!(
            event.status,
            OutboxStatus::Pending,
            "no relay runs in the example"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orders_and_their_events_commit_together_on_postgres() {
    let test = "orders_and_their_events_commit_together_on_postgres";
    let Some(db) = TestDb::postgres(test).await else {
        return;
    };
    scenario(&db).await;
    db.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orders_and_their_events_commit_together_on_sqlite() {
    let db = TestDb::sqlite_file().await;
    scenario(&db).await;
    db.close().await;
}
