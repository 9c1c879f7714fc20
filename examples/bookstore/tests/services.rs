//! The Bookstore as three processes (`bookstore-services up`): orders placed over HTTP on
//! the Ordering API (PostgreSQL) go through the `outbox` relay service (from
//! `services/outbox.toml`) to NATS, and Inventory (MariaDB) reserves their stock once each.

#![allow(clippy::unwrap_used)]

use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use outbox_tests::Service;
use outbox_tests::db::TestDb;
use serde_json::{Value, json};

fn free_address() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

struct Launcher(Child);

impl Drop for Launcher {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = Command::new("kill")
                .args(["-TERM", &self.0.id().to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(20);
            while Instant::now() < deadline && self.0.try_wait().ok().flatten().is_none() {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

async fn until<F, Fut>(what: &str, timeout: Duration, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    while !condition().await {
        assert!(Instant::now() < deadline, "{what} within {timeout:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn status(http: &reqwest::Client, url: &str) -> u16 {
    match http.get(url).send().await {
        Ok(response) => response.status().as_u16(),
        Err(_) => 0,
    }
}

async fn reserved(http: &reqwest::Client, inventory: SocketAddr) -> u64 {
    match http
        .get(format!("http://{inventory}/stock/dune"))
        .send()
        .await
    {
        Ok(response) if response.status().is_success() => {
            let stock: Value = response.json().await.unwrap();
            stock["reserved"].as_u64().unwrap()
        }
        _ => 0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orders_placed_over_http_reserve_stock_once_through_the_relay_service() {
    const TEST: &str = "orders_placed_over_http_reserve_stock_once_through_the_relay_service";
    const ORDERS: u64 = 20;
    let Some(nats_url) = outbox_tests::service(Service::Nats, TEST) else {
        return;
    };
    let Some(ordering_db) = TestDb::postgres(TEST).await else {
        return;
    };
    let Some(inventory_db) = TestDb::mariadb(TEST).await else {
        return;
    };
    // A fresh stream: the demo's stream and durable are the Bookstore's own names.
    let client = outbox_brokers::nats::connect(&nats_url).await.unwrap();
    let jetstream = outbox_brokers::nats::async_nats::jetstream::new(client.clone());
    let _ = jetstream.delete_stream(bookstore::services::STREAM).await;

    let ordering = free_address();
    let inventory = free_address();
    let console = free_address();
    let ops = free_address();
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/services/outbox.toml");
    let log = tempfile::NamedTempFile::new().unwrap();
    let launcher = Launcher(
        Command::new(env!("CARGO_BIN_EXE_bookstore-services"))
            .args(["up", "--ordering-database", ordering_db.url()])
            .args(["--inventory-database", inventory_db.url()])
            .args(["--nats-url", &nats_url])
            .args(["--ordering-listen", &ordering.to_string()])
            .args(["--inventory-listen", &inventory.to_string()])
            .args(["--relay-config", config])
            .env("OUTBOX_HTTP_LISTEN", console.to_string())
            .env("OUTBOX_HTTP_OPS_LISTEN", ops.to_string())
            .env(
                "OUTBOX_CONSOLE_USER_OPERATOR_TOKEN",
                "bookstore-test-token-0123",
            )
            .stdout(Stdio::null())
            .stderr(log.reopen().unwrap())
            .spawn()
            .unwrap(),
    );
    let logged = || std::fs::read_to_string(log.path()).unwrap_or_default();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let ready = async {
        until(
            "the three services answer",
            Duration::from_secs(60),
            || async {
                status(&http, &format!("http://{ordering}/healthz")).await == 200
                    && status(&http, &format!("http://{inventory}/healthz")).await == 200
                    && status(&http, &format!("http://{ops}/readyz")).await == 200
            },
        )
        .await;
    };
    tokio::time::timeout(Duration::from_secs(61), ready)
        .await
        .unwrap_or_else(|_| panic!("{}", logged()));

    let place = |checkout: uuid::Uuid, copies: u32| {
        http.post(format!("http://{ordering}/orders"))
            .json(&json!({
                "checkout_id": checkout,
                "customer_id": uuid::Uuid::now_v7(),
                "currency": "EUR",
                "lines": [{"book_id": "dune", "quantity": copies, "unit_price_cents": 1250}],
            }))
            .send()
    };
    let mut first_checkout = None;
    for _ in 0..ORDERS {
        let checkout = uuid::Uuid::now_v7();
        first_checkout.get_or_insert(checkout);
        let response = place(checkout, 2).await.unwrap();
        assert_eq!(response.status().as_u16(), 201);
        let body: Value = response.json().await.unwrap();
        assert!(body["order_id"].as_str().is_some());
    }
    // A double click places nothing; an order of no copies is refused.
    let again = place(first_checkout.unwrap(), 2).await.unwrap();
    assert_eq!(again.status().as_u16(), 409);
    let none = place(uuid::Uuid::now_v7(), 0).await.unwrap();
    assert_eq!(none.status().as_u16(), 422);

    let expected = ORDERS * 2;
    until(
        "every order's stock reserved",
        Duration::from_secs(60),
        || async { reserved(&http, inventory).await >= expected },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        reserved(&http, inventory).await,
        expected,
        "reserved once per order"
    );

    let metrics = http
        .get(format!("http://{ops}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(&format!(
            r#"outbox_published_total{{outbox="outbox",relay="ordering"}} {ORDERS}"#
        )),
        "{metrics}"
    );
    // The console answers on its own address (login first).
    assert_eq!(status(&http, &format!("http://{console}/")).await, 401);

    // A quiet start (issue 32): the relay service starts after Ordering installed its
    // tables, so no loop warned about a missing table, and SQL statements are not logged
    // by default (the lines a newcomer should read stay visible).
    let log_text = logged();
    assert!(!log_text.contains("does not exist"), "{log_text}");
    assert!(!log_text.contains("relay batch failed"), "{log_text}");
    assert!(
        !log_text.contains(" WARN "),
        "no warning at start: {log_text}"
    );
    assert!(
        !log_text.contains("sqlx::query"),
        "no SQL at INFO: {log_text}"
    );
    assert!(log_text.contains("console_token"), "{log_text}");

    let mut launcher = launcher;
    Command::new("kill")
        .args(["-TERM", &launcher.0.id().to_string()])
        .status()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let exit = loop {
        if let Some(exit) = launcher.0.try_wait().unwrap() {
            break Some(exit);
        }
        if Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        exit.is_some_and(|exit| exit.success()),
        "{exit:?}\n{}",
        logged()
    );
    let _ = jetstream.delete_stream(bookstore::services::STREAM).await;
    ordering_db.close().await;
    inventory_db.close().await;
}
