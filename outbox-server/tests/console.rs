//! The operator console over HTTP, as a browser talks to it: login and sessions, the
//! read-only role, CSRF, escaping, and the actions on a dead letter, on a real database.
//! (`console_browser.rs` drives it in Chromium.)

#![allow(clippy::unwrap_used)]

mod support;

use outbox_core::Raise;
use outbox_core::in_process::InProcessBroker;
use outbox_core::publish::PublishError;
use outbox_seaorm::relay::Relay;
use outbox_seaorm::{Outbox, schema};
use outbox_server::config::{ConsoleSettings, Role};
use outbox_tests::bookstore::{OrderingContracts, OrderingEvent};
use outbox_tests::db::TestDb;
use support::{Client, hidden};

const OPERATOR: &str = "ana-token-0123456789";
const READER: &str = "bo-token-0123456789";
const POISON: &str = "<script>alert('owned')</script>";

/// A database whose outbox holds one dead row whose aggregate id (and so payload) is
/// `POISON`, and the console of it served under `prefix`; returns the base URL.
async fn console_with_a_dead_row(prefix: &str) -> (TestDb, String, uuid::Uuid) {
    let db = TestDb::sqlite_file().await;
    let outbox = Outbox::default();
    schema::install(db.conn(), &outbox).await.unwrap();
    let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
    uow.raise(OrderingEvent::Noted {
        order_id: POISON.into(),
        n: 0,
    });
    uow.commit().await.unwrap();
    let broker = InProcessBroker::new();
    broker.fail_messages(|_| Some(PublishError::rejected("<b>schema</b> says no")));
    let mut relay = Relay::builder(db.conn().clone(), outbox.clone(), broker)
        .build()
        .unwrap();
    relay.drain().await.unwrap();
    let ops = outbox_seaorm::ops::Operations::new(db.conn().clone(), outbox.clone());
    let dead = ops.dead_letters(None, 10).await.unwrap();
    assert_eq!(dead.len(), 1);
    let settings = ConsoleSettings::builder()
        .user("ana", Role::Operator, OPERATOR)
        .user("bo", Role::Reader, READER)
        .build()
        .unwrap();
    let console = outbox_server::console::router(db.conn().clone(), outbox, settings);
    let app = if prefix.is_empty() {
        console
    } else {
        axum::Router::new().nest(prefix, console)
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (db, format!("http://{address}"), dead[0].envelope.message_id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_and_action_needs_a_login() {
    let (db, base, id) = console_with_a_dead_row("").await;
    let mut client = Client::new(&base);
    for path in [
        "/".to_owned(),
        "/contracts".to_owned(),
        format!("/relays/outbox/dead-letters/{id}"),
        "/relays/outbox/operator-log".to_owned(),
    ] {
        let answer = client.get(&path).await;
        assert_eq!(answer.status, 401, "{path}");
        assert!(
            answer.body.contains("Operator token"),
            "{path}: the login form"
        );
        assert!(
            !answer.body.contains("schema"),
            "{path}: nothing of the outbox"
        );
    }
    let answer = client
        .post(
            &format!("/relays/outbox/dead-letters/{id}/requeue"),
            &[("csrf", "x")],
        )
        .await;
    assert_eq!(answer.status, 401);
    // A forged session id is no session.
    client.set("outbox_session", &"0".repeat(64));
    assert_eq!(client.get("/").await.status, 401);
    // The assets are public (the login page needs its stylesheet).
    let mut anonymous = Client::new(&base);
    let css = anonymous.get("/assets/console.css").await;
    assert_eq!(css.status, 200);
    assert_eq!(css.headers["content-type"], "text/css; charset=utf-8");
    db.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_opens_a_strict_http_only_session() {
    let (db, base, _) = console_with_a_dead_row("").await;
    let mut client = Client::new(&base);
    let form = client.get("/login").await;
    assert_eq!(form.status, 200);
    let login_cookie = &client.set_cookies[0];
    assert!(login_cookie.starts_with("outbox_login="), "{login_cookie}");
    assert!(login_cookie.contains("HttpOnly") && login_cookie.contains("SameSite=Strict"));
    let csrf = hidden(&form.body, "csrf").unwrap();
    // Every response carries the security headers.
    assert_eq!(
        form.headers["content-security-policy"],
        outbox_server::console::CONTENT_SECURITY_POLICY
    );
    assert_eq!(form.headers["x-frame-options"], "DENY");
    assert_eq!(form.headers["x-content-type-options"], "nosniff");
    assert_eq!(form.headers["cache-control"], "no-store");

    // A wrong token: 401, no session.
    let refused = client
        .post(
            "/login",
            &[("token", "wrong-token-0123456789"), ("csrf", &csrf)],
        )
        .await;
    assert_eq!(refused.status, 401);
    assert!(refused.body.contains("unknown token"));
    assert!(
        client
            .set_cookies
            .iter()
            .all(|c| !c.starts_with("outbox_session="))
    );
    // A login form posted from another site (no login cookie): 403.
    let csrf = hidden(&refused.body, "csrf").unwrap();
    client.forget("outbox_login");
    let forged = client
        .post("/login", &[("token", OPERATOR), ("csrf", &csrf)])
        .await;
    assert_eq!(forged.status, 403);

    let answer = client.log_in("", OPERATOR).await;
    assert_eq!(answer.status, 303);
    assert_eq!(answer.location.as_deref(), Some("/"));
    let session = client
        .set_cookies
        .iter()
        .find(|c| c.starts_with("outbox_session="))
        .unwrap()
        .clone();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=28800"] {
        assert!(session.contains(attribute), "{attribute} in {session}");
    }
    let overview = client.get("/").await;
    assert_eq!(overview.status, 200);
    assert!(overview.body.contains("ana · operator"));
    assert!(
        overview
            .body
            .contains(r#"<td class="dead"><a href="/relays/outbox/dead-letters">1</a>"#),
        "{}",
        overview.body
    );

    // Logging out ends the session: the old cookie opens nothing.
    let old = client.set_cookies.clone();
    let csrf = hidden(&overview.body, "csrf").unwrap();
    let out = client.post("/logout", &[("csrf", &csrf)]).await;
    assert_eq!(out.status, 303);
    let id = session
        .split(';')
        .next()
        .unwrap()
        .split_once('=')
        .unwrap()
        .1;
    client.set("outbox_session", id);
    assert_eq!(client.get("/").await.status, 401, "{old:?}");
    db.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_shows_escaped_and_actions_need_the_csrf_token_and_the_operator_role() {
    let (db, base, id) = console_with_a_dead_row("").await;
    let page = format!("/relays/outbox/dead-letters/{id}");

    // The reader sees, escaped, but cannot act.
    let mut reader = Client::new(&base);
    assert_eq!(reader.log_in("", READER).await.status, 303);
    let list = reader.get("/relays/outbox/dead-letters").await;
    assert_eq!(list.status, 200);
    assert!(list.body.contains(&id.to_string()));
    let shown = reader.get(&page).await;
    assert_eq!(shown.status, 200);
    assert!(
        !shown.body.contains(POISON),
        "the payload's script is never markup"
    );
    assert!(!shown.body.contains("<b>schema</b>"));
    assert!(
        shown
            .body
            .contains("&lt;script&gt;alert('owned')&lt;/script&gt;"),
        "{}",
        shown.body
    );
    assert!(shown.body.contains("&lt;b&gt;schema&lt;/b&gt; says no"));
    assert!(shown.body.contains("Read-only"));
    assert!(!shown.body.contains(r#"id="requeue""#));
    let csrf = hidden(&shown.body, "csrf").unwrap();
    let refused = reader
        .post(&format!("{page}/requeue"), &[("csrf", &csrf)])
        .await;
    assert_eq!(refused.status, 403, "a reader cannot requeue");
    assert!(refused.body.contains("read-only"));

    // The operator: without the CSRF token, or with another session's, 403.
    let mut operator = Client::new(&base);
    assert_eq!(operator.log_in("", OPERATOR).await.status, 303);
    let shown = operator.get(&page).await;
    assert!(shown.body.contains(r#"id="requeue""#));
    let csrf = hidden(&shown.body, "csrf").unwrap();
    for form in [vec![], vec![("csrf", "")], vec![("csrf", "0123")]] {
        let answer = operator
            .post(
                &format!("{page}/skip"),
                &[&form[..], &[("reason", "x")]].concat(),
            )
            .await;
        assert_eq!(answer.status, 403, "{form:?}");
    }
    let readers_csrf = hidden(&reader.get(&page).await.body, "csrf").unwrap();
    let answer = operator
        .post(
            &format!("{page}/skip"),
            &[("csrf", &readers_csrf), ("reason", "x")],
        )
        .await;
    assert_eq!(answer.status, 403, "another session's token");
    let still = operator.get(&page).await;
    assert!(
        still.body.contains(r#"data-status="dead""#),
        "nothing changed"
    );

    // Skip needs a reason.
    let answer = operator
        .post(
            &format!("{page}/skip"),
            &[("csrf", &csrf), ("reason", "  ")],
        )
        .await;
    assert_eq!(answer.status, 409, "{}", answer.body);

    // Requeue, then skip with a reason: both in the operator log, with who and why.
    let answer = operator
        .post(
            &format!("{page}/requeue"),
            &[("csrf", &csrf), ("reason", "schema fixed")],
        )
        .await;
    assert_eq!(
        (answer.status, answer.location.as_deref()),
        (303, Some(page.as_str()))
    );
    let shown = operator.get(&page).await;
    assert!(shown.body.contains(r#"data-status="pending""#));
    let answer = operator
        .post(
            &format!("{page}/skip"),
            &[("csrf", &csrf), ("reason", "<i>obsolete</i> order")],
        )
        .await;
    assert_eq!(answer.status, 303);
    let log = operator.get("/relays/outbox/operator-log").await;
    assert_eq!(log.status, 200);
    assert!(
        log.body
            .contains(r#"<td class="actor">ana</td><td class="action">skip</td>"#),
        "{}",
        log.body
    );
    assert!(
        log.body
            .contains(r#"<td class="actor">ana</td><td class="action">requeue</td>"#)
    );
    assert!(log.body.contains("&lt;i&gt;obsolete&lt;/i&gt; order"));
    assert!(log.body.contains("schema fixed"));
    db.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_under_a_prefix_links_and_cookies_follow_it() {
    let (db, base, id) = console_with_a_dead_row("/ops/outbox").await;
    let mut client = Client::new(&base);
    let answer = client.get("/ops/outbox").await;
    assert_eq!(answer.status, 401);
    assert!(
        answer.body.contains(r#"action="/ops/outbox/login""#),
        "{}",
        answer.body
    );
    let answer = client.log_in("/ops/outbox", OPERATOR).await;
    assert_eq!(answer.location.as_deref(), Some("/ops/outbox"));
    assert!(
        client.set_cookies[0].contains("Path=/ops/outbox;"),
        "{:?}",
        client.set_cookies
    );
    let overview = client.get("/ops/outbox").await;
    assert_eq!(overview.status, 200);
    assert!(
        overview
            .body
            .contains(r#"<a class="brand" href="/ops/outbox">"#),
        "{}",
        overview.body
    );
    let list = client.get("/ops/outbox/relays/outbox/dead-letters").await;
    assert!(list.body.contains(&format!(
        r#"href="/ops/outbox/relays/outbox/dead-letters/{id}""#
    )));
    assert!(
        list.body
            .contains(r#"href="/ops/outbox/assets/console.css""#)
    );
    // Unknown relay, malformed id: clear errors, not panics.
    assert_eq!(
        client
            .get("/ops/outbox/relays/nope/dead-letters")
            .await
            .status,
        404
    );
    let bad = client
        .get("/ops/outbox/relays/outbox/dead-letters/not-a-uuid")
        .await;
    assert_eq!(bad.status, 400);
    assert!(bad.body.contains("is not a message id"));
    db.close().await;
}

fn settings() -> ConsoleSettings {
    ConsoleSettings::builder()
        .user("ana", Role::Operator, OPERATOR)
        .user("bo", Role::Reader, READER)
        .build()
        .unwrap()
}

async fn serve(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{address}")
}

/// Fails the notes of aggregate `poison…`: the consumer dead letters of the console tests.
#[outbox_seaorm::inbox_handler(consumer = "console.notes")]
async fn take_note(
    _uow: &outbox_seaorm::UnitOfWork,
    event: outbox_tests::bookstore::OrderNotedV2,
) -> Result<(), sea_orm::DbErr> {
    if event.order_id.starts_with("poison") {
        return Err(sea_orm::DbErr::Custom(
            "<em>cannot</em> take this note".into(),
        ));
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_dead_letters_are_listed_shown_requeued_and_skipped() {
    let db = TestDb::sqlite_file().await;
    let outbox = Outbox::default();
    schema::install(db.conn(), &outbox).await.unwrap();
    let consumer =
        outbox_seaorm::inbox::Consumer::builder(db.conn().clone(), outbox.clone(), "console.notes")
            .max_attempts(1)
            .build()
            .unwrap();
    for order in ["poison-1", "poison-2"] {
        let envelope = outbox_core::Envelope::from_event(&outbox_tests::bookstore::OrderNotedV2 {
            order_id: order.into(),
            n: 0,
        })
        .unwrap();
        consumer.deliver(&envelope).await.unwrap();
    }
    let ops = outbox_seaorm::ops::Operations::new(db.conn().clone(), outbox.clone());
    let letters = ops.consumer_dead_letters(None, None, 10).await.unwrap();
    assert_eq!(letters.len(), 2);
    let base = serve(outbox_server::console::router(
        db.conn().clone(),
        outbox,
        settings(),
    ))
    .await;
    let mut client = Client::new(&base);
    assert_eq!(client.log_in("", OPERATOR).await.status, 303);
    let list = client.get("/relays/outbox/inbox-dead-letters").await;
    assert_eq!(list.status, 200);
    assert!(list.body.contains("console.notes"), "{}", list.body);
    assert!(!list.body.contains("<em>cannot</em>"), "escaped");
    let [first, second] = [letters[0].id, letters[1].id];
    let page = format!("/relays/outbox/inbox-dead-letters/{first}");
    let shown = client.get(&page).await;
    assert!(
        shown
            .body
            .contains("&lt;em&gt;cannot&lt;/em&gt; take this note"),
        "{}",
        shown.body
    );
    assert!(shown.body.contains("poison-1"));
    let csrf = hidden(&shown.body, "csrf").unwrap();
    let answer = client
        .post(&format!("{page}/requeue"), &[("csrf", &csrf)])
        .await;
    assert_eq!(
        (answer.status, answer.location.as_deref()),
        (303, Some(page.as_str()))
    );
    assert!(
        client
            .get(&page)
            .await
            .body
            .contains(r#"data-status="requeued""#)
    );
    // Requeued already: a second requeue is refused, clearly.
    let again = client
        .post(&format!("{page}/requeue"), &[("csrf", &csrf)])
        .await;
    assert_eq!(again.status, 400);
    let page = format!("/relays/outbox/inbox-dead-letters/{second}");
    let answer = client
        .post(
            &format!("{page}/skip"),
            &[("csrf", &csrf), ("reason", "note withdrawn")],
        )
        .await;
    assert_eq!(answer.status, 303);
    let shown = client.get(&page).await;
    assert!(shown.body.contains(r#"data-status="skipped""#));
    assert!(shown.body.contains("skipped by ana") && shown.body.contains("note withdrawn"));
    db.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contracts_compiled_in_and_from_an_exported_folder() {
    let db = TestDb::sqlite_file().await;
    let outbox = Outbox::default();
    schema::install(db.conn(), &outbox).await.unwrap();
    let folder = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(folder.path().join("schemas")).unwrap();
    let event_type = "outboxtest.folder.thing-done.v1";
    std::fs::write(
        folder.path().join("index.json"),
        serde_json::json!({
            "format_version": 1,
            "contracts": [{
                "event_type": event_type, "name": "outboxtest.folder.thing-done",
                "version": 1, "aggregate_type": "thing", "key_field": "thing_id",
                "rust_type": "folder::ThingDoneV1", "schema": format!("schemas/{event_type}.json"),
                "description": "A thing was <b>done</b>.",
            }],
        })
        .to_string(),
    )
    .unwrap();
    std::fs::write(
        folder.path().join(format!("schemas/{event_type}.json")),
        r#"{"type":"object","properties":{"thing_id":{"type":"string"}}}"#,
    )
    .unwrap();
    let settings = ConsoleSettings::builder()
        .user("ana", Role::Operator, OPERATOR)
        .contracts(folder.path())
        .build()
        .unwrap();
    let base = serve(outbox_server::console::router(
        db.conn().clone(),
        outbox.clone(),
        settings,
    ))
    .await;
    let mut client = Client::new(&base);
    assert_eq!(client.log_in("", OPERATOR).await.status, 303);
    let list = client.get("/contracts").await;
    assert_eq!(list.status, 200);
    assert!(
        list.body.contains("outboxtest.ordering.order-noted.v2"),
        "compiled in: {}",
        list.body
    );
    assert!(list.body.contains(event_type), "from the folder");
    let shown = client.get(&format!("/contracts/{event_type}")).await;
    assert_eq!(shown.status, 200);
    assert!(shown.body.contains("A thing was &lt;b&gt;done&lt;/b&gt;."));
    assert!(
        shown.body.contains("&quot;thing_id&quot;"),
        "the schema, pretty-printed and escaped: {}",
        shown.body
    );
    let compiled = client
        .get("/contracts/outboxtest.ordering.order-noted.v2")
        .await;
    assert!(
        compiled.body.contains("$schema") || compiled.body.contains("properties"),
        "{}",
        compiled.body
    );
    assert_eq!(client.get("/contracts/nope.nope.nope.v1").await.status, 404);

    // A folder that cannot be read: said on the page, the compiled contracts still shown.
    let settings = ConsoleSettings::builder()
        .user("ana", Role::Operator, OPERATOR)
        .contracts("/nonexistent/contracts")
        .build()
        .unwrap();
    let base = serve(outbox_server::console::router(
        db.conn().clone(),
        outbox,
        settings,
    ))
    .await;
    let mut client = Client::new(&base);
    client.log_in("", OPERATOR).await;
    let list = client.get("/contracts").await;
    assert!(
        list.body
            .contains("Some contracts could not be read: /nonexistent/contracts"),
        "{}",
        list.body
    );
    assert!(list.body.contains("outboxtest.ordering.order-noted.v2"));
    db.close().await;
}

/// The log relay's dead letters: a permanently rejected event is dead-lettered, shown, and
/// once requeued in the console the running log relay publishes it; the overview shows the
/// slot, its lag (WAL bytes) and its acknowledged position.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_relay_dead_letter_is_requeued_from_the_console_and_published() {
    const TEST: &str = "a_log_relay_dead_letter_is_requeued_from_the_console_and_published";
    let Some(db) = TestDb::logical_postgres(TEST).await else {
        return;
    };
    let slot = format!("console_{}", uuid::Uuid::now_v7().simple());
    requeued_from_the_console(&db, &slot, None, "B").await;
    use sea_orm::ConnectionTrait as _;
    let _ = db
        .conn()
        .execute_unprepared(&format!("SELECT pg_drop_replication_slot('{slot}')"))
        .await;
    db.close().await;
}

/// The same on MariaDB's binlog: the overview's lag counts binlogged transactions, the
/// acknowledged position is a GTID.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binlog_relay_dead_letter_is_requeued_from_the_console_and_published() {
    const TEST: &str = "a_binlog_relay_dead_letter_is_requeued_from_the_console_and_published";
    let Some(db) = TestDb::binlog_mariadb(TEST).await else {
        return;
    };
    let slot = format!("console_{}", uuid::Uuid::now_v7().simple());
    requeued_from_the_console(&db, &slot, Some(db.url()), "transaction").await;
    db.close().await;
}

/// A log relay on `db` (its replication connection at `connection_url` when given) dead-letters
/// an event; the console shows and requeues it; the overview's lag cell holds `lag_unit`.
async fn requeued_from_the_console(
    db: &TestDb,
    slot: &str,
    connection_url: Option<&str>,
    lag_unit: &str,
) {
    let outbox = Outbox::default();
    schema::install(db.conn(), &outbox).await.unwrap();
    let broker = InProcessBroker::new();
    let refusing = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let refuse = refusing.clone();
    broker.fail_messages(move |envelope| {
        (envelope.aggregate_id == "poison" && refuse.load(std::sync::atomic::Ordering::SeqCst))
            .then(|| PublishError::rejected("not today"))
    });
    let relay = outbox_seaorm::relay::log::LogRelay::builder(
        db.conn().clone(),
        outbox.clone(),
        broker.clone(),
    )
    .slot(slot)
    .heartbeat_interval(std::time::Duration::from_millis(200));
    let relay = match connection_url {
        Some(url) => relay.connection_url(url),
        None => relay,
    }
    .build()
    .unwrap();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let running = tokio::spawn(relay.run(shutdown.clone()));
    let ops = outbox_seaorm::ops::Operations::new(db.conn().clone(), outbox.clone());
    let streaming = support::eventually(std::time::Duration::from_secs(30), || async {
        ops.log_slots()
            .await
            .is_ok_and(|slots| slots.iter().any(|s| s.streaming))
    })
    .await;
    assert!(streaming, "the log relay streams");
    let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
    uow.raise(OrderingEvent::Noted {
        order_id: "poison".into(),
        n: 1,
    });
    uow.commit().await.unwrap();
    let dead = support::eventually(std::time::Duration::from_secs(30), || async {
        ops.log_dead_letters(None, None, None, 10)
            .await
            .is_ok_and(|letters| letters.len() == 1)
    })
    .await;
    assert!(dead, "dead-lettered");
    let id = ops.log_dead_letters(None, None, None, 10).await.unwrap()[0].id;

    let base = serve(outbox_server::console::router(
        db.conn().clone(),
        outbox.clone(),
        settings(),
    ))
    .await;
    let mut client = Client::new(&base);
    client.log_in("", OPERATOR).await;
    let list = client.get("/relays/outbox/log-dead-letters").await;
    assert!(list.body.contains(slot), "{}", list.body);
    // PostgreSQL's relay stores its position with the lease renewal.
    let stored = support::eventually(std::time::Duration::from_secs(30), || async {
        ops.log_slots()
            .await
            .is_ok_and(|slots| slots.iter().any(|s| s.acknowledged_lsn.is_some()))
    })
    .await;
    assert!(stored, "a stored position");
    let acknowledged = async || {
        ops.log_slots()
            .await
            .unwrap()
            .into_iter()
            .find_map(|s| s.acknowledged_lsn)
            .expect("a stored position")
    };
    // Read before and after the page: a lease renewal may store a later one meanwhile.
    let before = acknowledged().await;
    let overview = client.get("/").await;
    let after = acknowledged().await;
    assert!(
        overview.body.contains("Log slots") && overview.body.contains(slot),
        "{}",
        overview.body
    );
    let lag = overview
        .body
        .split(r#"<td class="lag">"#)
        .nth(1)
        .and_then(|cell| cell.split("</td>").next())
        .unwrap_or_default();
    assert!(
        lag.contains(lag_unit),
        "lag cell {lag:?}, expected {lag_unit:?}"
    );
    assert!(
        [&before, &after]
            .iter()
            .any(|position| overview.body.contains(&format!("<code>{position}</code>"))),
        "{before} or {after}: {}",
        overview.body
    );
    let page = format!("/relays/outbox/log-dead-letters/{id}");
    let shown = client.get(&page).await;
    assert!(shown.body.contains(r#"data-status="dead""#) && shown.body.contains("not today"));
    refusing.store(false, std::sync::atomic::Ordering::SeqCst);
    let csrf = hidden(&shown.body, "csrf").unwrap();
    let answer = client
        .post(&format!("{page}/requeue"), &[("csrf", &csrf)])
        .await;
    assert_eq!(answer.status, 303);
    let published = support::eventually(std::time::Duration::from_secs(30), || {
        let broker = broker.clone();
        async move { broker.published_for("order", "poison").len() == 1 }
    })
    .await;
    assert!(published, "the requeued event went out");
    let shown = client.get(&page).await;
    assert!(
        shown.body.contains(r#"data-status="published""#),
        "{}",
        shown.body
    );
    shutdown.cancel();
    running.await.unwrap().unwrap();
}

/// Scheduled rows (`/relays/{relay}/scheduled`): listed in due order with their keys
/// (escaped), the overview counts them; a reader sees no action and is refused one; an
/// operator makes one row due now and cancels a whole key with a reason (refused without
/// one), each recorded in the operator log with the due times.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduled_rows_are_listed_run_now_and_cancelled_by_key() {
    use outbox_core::RaiseLater as _;
    use outbox_core::schedule::Schedule;

    let (db, base, _) = console_with_a_dead_row("").await;
    let outbox = Outbox::default();
    let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
    let in_hours = |hours| chrono::Utc::now() + chrono::TimeDelta::hours(hours);
    for (n, hours, key) in [(1, 1, "remind"), (2, 2, POISON), (3, 3, POISON)] {
        uow.raise_scheduled(
            OrderingEvent::Noted {
                order_id: "o-9".into(),
                n,
            },
            Schedule::at(in_hours(hours)).key(key),
        );
    }
    let ids = uow.commit().await.unwrap().scheduled;
    let page = "/relays/outbox/scheduled";
    // A periodic job the service's relays have seen (written by a relay of the service's
    // own code: the relay service knows no contract).
    let nightly = Outbox::builder()
        .periodic(outbox_seaorm::Periodic::new(
            "nightly-report",
            "0 3 * * *",
            |_| outbox_tests::bookstore::OrderNotedV2 {
                order_id: "report".into(),
                n: 0,
            },
        ))
        .build()
        .unwrap();
    Relay::builder(db.conn().clone(), nightly, InProcessBroker::new())
        .build()
        .unwrap()
        .enqueue_periodic()
        .await
        .unwrap();
    // A unique job's key (its job waits: the key holds).
    let unique = Outbox::builder()
        .job(
            outbox_seaorm::job::Job::of::<outbox_tests::bookstore::OrderNotedV2>()
                .unique(outbox_seaorm::job::Unique::by_aggregate()),
        )
        .build()
        .unwrap();
    let uow = unique.begin(db.conn(), &OrderingContracts).await.unwrap();
    uow.raise(OrderingEvent::Noted {
        order_id: "o-unique".into(),
        n: 1,
    });
    let holder = uow.commit().await.unwrap().message_ids[0];

    let mut reader = Client::new(&base);
    assert_eq!(reader.log_in("", READER).await.status, 303);
    let overview = reader.get("/").await;
    assert!(
        overview
            .body
            .contains(r#"<td class="scheduled"><a href="/relays/outbox/scheduled">3</a>"#),
        "{}",
        overview.body
    );
    let list = reader.get(page).await;
    assert_eq!(list.status, 200);
    let positions: Vec<usize> = ids
        .iter()
        .map(|id| list.body.find(&id.to_string()).unwrap())
        .collect();
    assert!(
        positions.windows(2).all(|pair| pair[0] < pair[1]),
        "due order"
    );
    assert!(!list.body.contains(POISON), "keys are escaped");
    assert!(
        list.body.contains(r#"<tr data-periodic="nightly-report"><td><code>nightly-report</code></td><td><code>0 3 * * *</code></td>"#),
        "{}",
        list.body
    );
    assert!(
        list.body.contains(&format!(
            r#"<tr data-unique-key="o-unique"><td>outboxtest.ordering.order-noted.v2</td><td><code>o-unique</code></td><td><code>{holder}</code></td><td>while pending</td>"#
        )),
        "{}",
        list.body
    );
    assert!(list.body.contains(r#"<td class="holds">yes</td>"#));
    assert!(!list.body.contains("class=\"run-now\""));
    assert!(list.body.contains("Read-only"));
    let csrf = hidden(&list.body, "csrf").unwrap();
    let refused = reader
        .post(&format!("{page}/{}/run-now", ids[0]), &[("csrf", &csrf)])
        .await;
    assert_eq!(refused.status, 403);

    let mut operator = Client::new(&base);
    assert_eq!(operator.log_in("", OPERATOR).await.status, 303);
    let list = operator.get(page).await;
    assert!(list.body.contains("class=\"run-now\""));
    let csrf = hidden(&list.body, "csrf").unwrap();
    let answer = operator
        .post(&format!("{page}/{}/run-now", ids[0]), &[("csrf", &csrf)])
        .await;
    assert_eq!(
        (answer.status, answer.location.as_deref()),
        (303, Some(page))
    );
    let encoded: String = url::form_urlencoded::byte_serialize(POISON.as_bytes()).collect();
    let by_key = operator.get(&format!("{page}?key={encoded}")).await;
    assert!(
        by_key.body.contains(r#"id="cancel-key""#),
        "{}",
        by_key.body
    );
    assert!(!by_key.body.contains(&ids[0].to_string()));
    let cancel = format!("{page}/key/cancel?key={encoded}");
    let answer = operator
        .post(&cancel, &[("csrf", &csrf), ("reason", " ")])
        .await;
    assert_eq!(answer.status, 409, "a reason is required");
    let answer = operator
        .post(&cancel, &[("csrf", &csrf), ("reason", "order closed")])
        .await;
    assert_eq!(answer.status, 303);

    let ops = outbox_seaorm::ops::Operations::new(db.conn().clone(), outbox.clone());
    let waiting = ops.scheduled(None, 10).await.unwrap();
    assert_eq!(waiting.len(), 1);
    assert_eq!(waiting[0].record.envelope.message_id, ids[0]);
    assert!(waiting[0].due_at() <= chrono::Utc::now(), "due now");
    let log = operator.get("/relays/outbox/operator-log").await;
    assert!(
        log.body
            .contains(r#"<td class="actor">ana</td><td class="action">run-now</td>"#),
        "{}",
        log.body
    );
    assert_eq!(
        log.body
            .matches(r#"<td class="action">cancel</td>"#)
            .count(),
        2
    );
    assert!(log.body.contains("was due "));
    db.close().await;
}

/// With many tenants the overview reads one page of them (keyset paging by name) and
/// searches by name; a small console shows neither.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_pages_and_searches_many_tenants() {
    use outbox_server::console::{Console, Tenant};
    let db = TestDb::sqlite_file().await;
    let outbox = Outbox::default();
    schema::install(db.conn(), &outbox).await.unwrap();
    let tenants: Vec<Tenant> = (0..45)
        .map(|n| Tenant::new(format!("tenant-{n:02}"), db.conn().clone(), outbox.clone()))
        .collect();
    let settings = ConsoleSettings::builder()
        .user("bo", Role::Reader, READER)
        .build()
        .unwrap();
    let app = Console::new(tenants, settings).router();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let mut client = Client::new(format!("http://{address}"));
    assert_eq!(client.log_in("", READER).await.status, 303);
    let cards = |body: &str| body.matches("data-relay=\"").count();
    let first = client.get("/").await;
    assert_eq!(first.status, 200);
    assert_eq!(cards(&first.body), 20);
    assert!(first.body.contains("data-relay=\"tenant-00\""));
    assert!(first.body.contains("45 of 45 tenants"), "{}", first.body);
    assert!(
        first.body.contains("href=\"/?after=tenant-19\""),
        "{}",
        first.body
    );
    let third = client.get("/?after=tenant-39").await;
    assert_eq!(cards(&third.body), 5);
    assert!(third.body.contains("data-relay=\"tenant-40\""));
    assert!(!third.body.contains("next page"));
    let found = client.get("/?q=tenant-3").await;
    assert_eq!(cards(&found.body), 10, "tenant-30 … tenant-39");
    assert!(found.body.contains("10 of 45 tenants"));
    let escaped = client.get("/?q=%3Cb%3E").await;
    assert_eq!(cards(&escaped.body), 0);
    assert!(
        escaped.body.contains("value=\"&lt;b&gt;\""),
        "the search text is escaped"
    );
    db.close().await;
}
