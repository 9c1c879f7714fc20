//! The operator console in a real browser: headless Chromium driven through chromedriver
//! (WebDriver), against the `outbox` service relaying a PostgreSQL outbox to NATS. A
//! stream that captures nothing makes the broker refuse an order's event (a poison
//! publisher: JetStream has no responder); the operator logs in, sees the dead letter, opens
//! it (its `<script>` payload shows as text and never runs), fixes the broker, requeues it
//! and watches it publish.
//!
//! Fails, never skips, when Chromium or chromedriver is missing and services are required
//! (`scripts/provision` installs Debian's `chromium` and `chromium-driver`).
//! `OUTBOX_CONSOLE_SCREENSHOTS=DIR` saves the overview and the dead letter as PNG there (the
//! book's screenshots: `OUTBOX_CONSOLE_SCREENSHOTS=docs/book/src/console`).

#![allow(clippy::unwrap_used)]

mod support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{Client as Browser, ClientBuilder, Locator};
use outbox_brokers::nats::{self, async_nats};
use outbox_core::schedule::Schedule;
use outbox_core::{Raise, RaiseLater};
use outbox_seaorm::ops::Operations;
use outbox_seaorm::{Outbox, schema};
use outbox_tests::Service as TestService;
use outbox_tests::bookstore::{OrderingContracts, OrderingEvent};
use outbox_tests::db::TestDb;
use serde_json::json;
use support::{ServiceProcess, eventually, free_port};

const TOKEN: &str = "ana-browser-token-0123456789";
const INSTALL: &str = "install Debian's chromium and chromium-driver (scripts/provision does)";

/// chromedriver on a port of its own, killed on drop.
struct Driver {
    child: Child,
    port: u16,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn start_driver(path: &Path) -> Driver {
    let port = free_port();
    let child = Command::new(path)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let address: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    assert!(
        eventually(Duration::from_secs(20), || async {
            tokio::net::TcpStream::connect(address).await.is_ok()
        })
        .await,
        "chromedriver did not listen on {address}"
    );
    Driver { child, port }
}

async fn open_browser(driver: &Driver, chromium: &Path, profile: &Path) -> Browser {
    let mut capabilities = serde_json::Map::new();
    capabilities.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": chromium,
            "args": [
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--disable-quic", "--no-first-run",
                "--window-size=1280,900",
                format!("--user-data-dir={}", profile.display()),
            ],
        }),
    );
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(capabilities)
        .connect(&format!("http://127.0.0.1:{}", driver.port))
        .await
        .unwrap()
}

/// Saves a screenshot of the page as `name` under `OUTBOX_CONSOLE_SCREENSHOTS`, if set.
async fn screenshot(browser: &Browser, name: &str) {
    let png = browser.screenshot().await.unwrap();
    assert!(png.starts_with(b"\x89PNG"), "a PNG");
    if let Ok(dir) = std::env::var("OUTBOX_CONSOLE_SCREENSHOTS") {
        let dir = PathBuf::from(dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(name), png).unwrap();
    }
}

async fn click(browser: &Browser, locator: Locator<'_>) {
    browser.find(locator).await.unwrap().click().await.unwrap();
}

async fn type_into(browser: &Browser, locator: Locator<'_>, text: &str) {
    browser
        .find(locator)
        .await
        .unwrap()
        .send_keys(text)
        .await
        .unwrap();
}

async fn wait_for(browser: &Browser, locator: Locator<'_>) {
    browser.wait().for_element(locator).await.unwrap();
}

async fn text(browser: &Browser, css: &str) -> String {
    browser
        .find(Locator::Css(css))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_requeues_a_dead_letter_in_chromium_and_watches_it_publish() {
    const TEST: &str = "an_operator_requeues_a_dead_letter_in_chromium_and_watches_it_publish";
    let chromium = outbox_tests::program("Chromium", &["/usr/bin/chromium"], INSTALL, TEST);
    let chromedriver =
        outbox_tests::program("chromedriver", &["/usr/bin/chromedriver"], INSTALL, TEST);
    let (Some(chromium), Some(chromedriver)) = (chromium, chromedriver) else {
        return;
    };
    let Some(nats_url) = outbox_tests::service(TestService::Nats, TEST) else {
        return;
    };
    let Some(db) = TestDb::postgres(TEST).await else {
        return;
    };
    let outbox = Outbox::default();
    schema::install(db.conn(), &outbox).await.unwrap();
    let id = uuid::Uuid::now_v7().simple().to_string();
    let console: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    // The service's stream captures `…parked` only: the order's subject has no stream,
    // so JetStream does not answer, and with one attempt the row is dead at once.
    let config = format!(
        r#"
[http]
listen = "{console}"

[[console.user]]
name = "ana"
role = "operator"

[[relay]]
name = "orders"
database_url = "{}"
max_attempts = 1
retention = "forever"
poll_interval = "100ms"
[relay.broker]
kind = "nats"
url = "{nats_url}"
ack_timeout = "1s"
route = {{ kind = "event_type", prefix = "srvb{id}." }}
stream = {{ name = "SRVB_{id}", subjects = ["srvb{id}.parked"] }}
"#,
        db.url()
    );
    let mut service = ServiceProcess::start(&config, &[("OUTBOX_CONSOLE_USER_ANA_TOKEN", TOKEN)]);
    let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
    uow.raise(OrderingEvent::Noted {
        order_id: "<script>alert('owned')</script>".into(),
        n: 7,
    });
    uow.commit().await.unwrap();
    let ops = Operations::new(db.conn().clone(), outbox.clone());
    assert!(
        eventually(Duration::from_secs(30), || async {
            ops.dead_letters(None, 10).await.unwrap().len() == 1
        })
        .await,
        "the order's event is not dead: {}",
        service.log()
    );
    let message_id = ops.dead_letters(None, 10).await.unwrap()[0]
        .envelope
        .message_id;

    let driver = start_driver(&chromedriver).await;
    let profile = tempfile::tempdir().unwrap();
    let browser = open_browser(&driver, &chromium, profile.path()).await;
    let root = format!("http://{console}");

    // Not logged in: the login form.
    browser.goto(&root).await.unwrap();
    assert_eq!(browser.title().await.unwrap(), "Log in · outbox console");
    type_into(&browser, Locator::Css("#token"), TOKEN).await;
    click(&browser, Locator::Css("button[type=submit]")).await;
    wait_for(&browser, Locator::Css("section.tenant[data-relay=orders]")).await;
    assert_eq!(browser.title().await.unwrap(), "Overview · outbox console");
    assert_eq!(text(&browser, "td.dead").await, "1");
    assert_eq!(text(&browser, "span.phase").await, "running");
    assert!(
        text(&browser, "table.instances")
            .await
            .contains("partitions 0–63")
    );
    screenshot(&browser, "overview.png").await;

    // The dead letter: listed, opened, its payload shown as text.
    click(&browser, Locator::LinkText("Dead letters")).await;
    wait_for(&browser, Locator::Css("#dead-letters")).await;
    click(&browser, Locator::LinkText(&message_id.to_string())).await;
    wait_for(&browser, Locator::Css("#payload")).await;
    assert_eq!(text(&browser, "strong.status").await, "dead");
    assert!(
        text(&browser, "#payload")
            .await
            .contains("<script>alert('owned')</script>")
    );
    assert!(
        text(&browser, "#last-error")
            .await
            .contains("no JetStream stream captures subject")
    );
    assert!(
        browser.get_alert_text().await.is_err(),
        "the payload's script never ran"
    );
    screenshot(&browser, "dead-letter.png").await;

    // Fix the broker: a stream for the order's subjects.
    let client = nats::connect(&nats_url).await.unwrap();
    let jetstream = async_nats::jetstream::new(client.clone());
    let fixed = format!("SRVB2_{id}");
    jetstream
        .create_stream(async_nats::jetstream::stream::Config {
            name: fixed.clone(),
            subjects: vec![format!("srvb{id}.outboxtest.>")],
            ..Default::default()
        })
        .await
        .unwrap();

    // Requeue, confirm the dialog, and watch it publish.
    type_into(
        &browser,
        Locator::Css("#requeue input[name=reason]"),
        "stream created",
    )
    .await;
    click(&browser, Locator::Css("#requeue button")).await;
    assert_eq!(
        browser.get_alert_text().await.unwrap(),
        "Publish this message again?"
    );
    browser.accept_alert().await.unwrap();
    // The form's POST lands first (its redirect shows the row no longer dead): a refresh
    // while it is in flight would cancel it, and the requeue with it (CI saw the row stay
    // dead for 30 s).
    let requeued = eventually(Duration::from_secs(30), || async {
        match browser.find(Locator::Css("strong.status")).await {
            Ok(status) => status.text().await.is_ok_and(|text| text != "dead"),
            Err(_) => false,
        }
    })
    .await;
    assert!(requeued, "the requeue did not land: {}", service.log());
    let published = eventually(Duration::from_secs(30), || async {
        browser.refresh().await.unwrap();
        match browser.find(Locator::Css("strong.status")).await {
            Ok(status) => status.text().await.unwrap() == "published",
            Err(_) => false,
        }
    })
    .await;
    assert!(published, "{}", service.log());
    let mut stream = jetstream.get_stream(&fixed).await.unwrap();
    assert_eq!(stream.info().await.unwrap().state.messages, 1);
    let log = text(&browser, "table.operator-log").await;
    assert!(
        log.contains("ana") && log.contains("requeue") && log.contains("stream created"),
        "{log}"
    );

    // A reminder due in an hour: on the scheduled page, run now, confirm, and watch it go.
    let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
    uow.raise_scheduled(
        OrderingEvent::Noted {
            order_id: "o-remind".into(),
            n: 8,
        },
        Schedule::after(Duration::from_secs(3600)).key("o-remind/payment"),
    );
    let reminder = uow.commit().await.unwrap().scheduled[0];
    browser.goto(&root).await.unwrap();
    wait_for(&browser, Locator::Css("td.scheduled")).await;
    assert_eq!(text(&browser, "td.scheduled a").await, "1");
    click(&browser, Locator::LinkText("Scheduled")).await;
    wait_for(&browser, Locator::Css("#scheduled")).await;
    assert!(
        text(&browser, "#scheduled")
            .await
            .contains("o-remind/payment")
    );
    screenshot(&browser, "scheduled.png").await;
    click(
        &browser,
        Locator::Css(&format!(
            "tr[data-message-id='{reminder}'] form.run-now button"
        )),
    )
    .await;
    assert_eq!(
        browser.get_alert_text().await.unwrap(),
        "Make this row due now?"
    );
    browser.accept_alert().await.unwrap();
    let sent = eventually(Duration::from_secs(30), || async {
        match jetstream.get_stream(&fixed).await {
            Ok(mut stream) => stream
                .info()
                .await
                .is_ok_and(|info| info.state.messages == 2),
            Err(_) => false,
        }
    })
    .await;
    assert!(sent, "the reminder was not published: {}", service.log());
    assert!(ops.scheduled(None, 10).await.unwrap().is_empty());
    browser
        .goto(&format!("{root}/relays/orders/operator-log"))
        .await
        .unwrap();
    wait_for(&browser, Locator::Css("table.operator-log")).await;
    assert!(
        text(&browser, "table.operator-log")
            .await
            .contains("run-now")
    );

    browser.close().await.unwrap();
    drop(driver);
    service.terminate();
    assert!(
        service
            .wait(Duration::from_secs(20))
            .is_some_and(|s| s.success())
    );
    for stream in [format!("SRVB_{id}"), fixed] {
        let _ = jetstream.delete_stream(&stream).await;
    }
    db.close().await;
}
