//! `outbox inbox-dead list|show|requeue` (feature `cli` of outbox-seaorm) on every backend:
//! dead letters made by a real [`Consumer`] (a malformed payload, a handler that keeps
//! failing), listed, shown, requeued through the command line, then redelivered.

// Scenarios are plain async functions called by generated #[tokio::test]s, which clippy's
// `allow-unwrap-in-tests` does not see as tests.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use outbox_core::clock::ManualClock;
use outbox_core::policy::Backoff;
use outbox_core::{ContractRegistry, Envelope, IntegrationEvent};
use outbox_seaorm::inbox::{Consumer, DeadLetterReason, Delivered};
use outbox_seaorm::{Outbox, UnitOfWork, cli, inbox_handler, schema};
use outbox_tests::backend_tests;
use outbox_tests::db::TestDb;
use schemars::JsonSchema;
use sea_orm::{ConnectionTrait, DbBackend, DbErr, Statement};
use serde::{Deserialize, Serialize};

backend_tests!(inbox_dead_letter_command_line);

const CONSUMER: &str = "tests.cli-dead-letters";

/// A book was ordered: reserve it.
#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "outboxtest.cli.book-ordered.v1", key = order_id)]
pub struct BookOrderedV1 {
    /// The order.
    pub order_id: String,
    /// The book.
    pub book_id: String,
    /// Copies.
    pub quantity: u32,
}

/// Reserves the copies; fails while the book has no stock row.
#[inbox_handler(consumer = "tests.cli-dead-letters")]
async fn reserve_book(uow: &UnitOfWork, event: BookOrderedV1) -> Result<(), DbErr> {
    let backend = uow.get_database_backend();
    let sql = if backend == DbBackend::Postgres {
        "UPDATE cli_stock SET reserved = reserved + $1 WHERE book_id = $2"
    } else {
        "UPDATE cli_stock SET reserved = reserved + ? WHERE book_id = ?"
    };
    let updated = uow
        .execute_raw(Statement::from_sql_and_values(
            backend,
            sql,
            [
                i64::from(event.quantity).into(),
                event.book_id.clone().into(),
            ],
        ))
        .await?;
    if updated.rows_affected() == 0 {
        return Err(DbErr::RecordNotFound(format!(
            "no stock row for book {}",
            event.book_id
        )));
    }
    Ok(())
}

/// Runs the command line; returns (exit code, stdout, stderr).
async fn ops(db: &TestDb, outbox: &Outbox, args: &[&str]) -> (u8, String, String) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = cli::run_with(
        std::iter::once("ops").chain(args.iter().copied()),
        db.conn().clone(),
        outbox.clone(),
        || ContractRegistry::from_registrations([]),
        &mut out,
        &mut err,
    )
    .await;
    (
        code,
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    )
}

fn ordered(order_id: &str, book_id: &str) -> Envelope {
    Envelope::from_event(&BookOrderedV1 {
        order_id: order_id.into(),
        book_id: book_id.into(),
        quantity: 2,
    })
    .unwrap()
}

async fn reserved(db: &TestDb, book_id: &str) -> i64 {
    let row = db
        .conn()
        .query_one_raw(Statement::from_string(
            db.conn().get_database_backend(),
            format!("SELECT reserved FROM cli_stock WHERE book_id = '{book_id}'"),
        ))
        .await
        .unwrap()
        .unwrap();
    row.try_get_by_index::<i64>(0)
        .or_else(|_| row.try_get_by_index::<i32>(0).map(i64::from))
        .unwrap()
}

async fn inbox_dead_letter_command_line(db: &TestDb) {
    let clock = Arc::new(ManualClock::starting_at(
        "2026-03-01T09:00:00Z".parse().unwrap(),
    ));
    let outbox = Outbox::builder().clock(clock.clone()).build().unwrap();
    schema::install(db.conn(), &outbox).await.unwrap();
    let bigint = if db.conn().get_database_backend() == DbBackend::Sqlite {
        "integer"
    } else {
        "bigint"
    };
    db.conn()
        .execute_unprepared(&format!(
            "CREATE TABLE cli_stock (book_id varchar(64) NOT NULL PRIMARY KEY, \
             reserved {bigint} NOT NULL)"
        ))
        .await
        .unwrap();
    db.conn()
        .execute_unprepared("INSERT INTO cli_stock (book_id, reserved) VALUES ('dune', 0)")
        .await
        .unwrap();
    let consumer = Consumer::builder(db.conn().clone(), outbox.clone(), CONSUMER)
        .max_attempts(2)
        .inline_attempts(2)
        .backoff(
            Backoff::new()
                .with_min_delay(Duration::from_millis(1))
                .with_max_delay(Duration::from_millis(1))
                .with_jitter(false),
        )
        .build()
        .unwrap();

    // Applied: no dead letter.
    let applied = ordered("o-1", "dune");
    assert_eq!(
        consumer.deliver(&applied).await.unwrap(),
        Delivered::Applied { attempts: 1 }
    );
    // Malformed payload: dead-lettered at once, without an attempt.
    let mut malformed = ordered("o-2", "dune");
    malformed.payload = serde_json::json!({ "order_id": "o-2", "book_id": "dune" }).into();
    let Delivered::DeadLettered {
        id: malformed_id,
        reason: DeadLetterReason::Malformed { .. },
    } = consumer.deliver(&malformed).await.unwrap()
    else {
        panic!("a malformed payload is dead-lettered");
    };
    // A book without stock: the handler fails twice, then dead-lettered.
    clock.advance(chrono::TimeDelta::minutes(5));
    let failing = ordered("o-3", "emma");
    let Delivered::DeadLettered {
        id: failing_id,
        reason: DeadLetterReason::HandlerFailed { attempts: 2, .. },
    } = consumer.deliver(&failing).await.unwrap()
    else {
        panic!("a handler failing on every attempt is dead-lettered");
    };
    let (malformed_ref, failing_ref) = (malformed_id.to_string(), failing_id.to_string());
    let (malformed_message, failing_message) = (
        malformed.message_id.to_string(),
        failing.message_id.to_string(),
    );

    // list, human.
    let (code, out, err) = ops(db, &outbox, &["outbox", "inbox-dead", "list"]).await;
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "ID\tCONSUMER\tSTATUS\tREASON\tMESSAGE ID\tEVENT TYPE\tATTEMPTS\tDEAD AT\tERROR"
    );
    assert_eq!(lines.len(), 4, "{out}");
    let first: Vec<&str> = lines[1].split('\t').collect();
    assert_eq!(
        first[..8],
        [
            malformed_ref.as_str(),
            CONSUMER,
            "dead",
            "malformed",
            malformed_message.as_str(),
            BookOrderedV1::EVENT_TYPE,
            "0",
            "2026-03-01T09:00:00+00:00",
        ],
        "{out}"
    );
    assert!(
        first[8].contains("quantity"),
        "names the missing field: {out}"
    );
    let second: Vec<&str> = lines[2].split('\t').collect();
    assert_eq!(
        second[..8],
        [
            failing_ref.as_str(),
            CONSUMER,
            "dead",
            "handler_failed",
            failing_message.as_str(),
            BookOrderedV1::EVENT_TYPE,
            "2",
            "2026-03-01T09:05:00+00:00",
        ],
        "{out}"
    );
    assert!(second[8].contains("no stock row for book emma"), "{out}");
    assert_eq!(lines[3], "2 dead letter(s)");

    // list, JSON, filtered.
    let (code, out, _) = ops(
        db,
        &outbox,
        &[
            "outbox",
            "inbox-dead",
            "list",
            "--consumer",
            CONSUMER,
            "--status",
            "dead",
            "--limit",
            "1",
            "--format",
            "json",
        ],
    )
    .await;
    assert_eq!(code, 0);
    let listed: serde_json::Value = serde_json::from_str(&out).unwrap();
    let listed = listed.as_array().unwrap();
    assert_eq!(listed.len(), 1, "--limit 1: {out}");
    assert_eq!(listed[0]["id"], malformed_id);
    assert_eq!(listed[0]["consumer"], CONSUMER);
    assert_eq!(listed[0]["status"], "dead");
    assert_eq!(listed[0]["reason"], "malformed");
    assert_eq!(listed[0]["attempts"], 0);
    assert_eq!(listed[0]["message_id"], malformed.message_id.to_string());
    assert_eq!(listed[0]["event_type"], BookOrderedV1::EVENT_TYPE);
    assert_eq!(listed[0]["requeued_by"], serde_json::Value::Null);
    assert_eq!(listed[0]["format"], "envelope");
    assert_eq!(
        listed[0]["message"]["payload"],
        serde_json::json!({ "order_id": "o-2", "book_id": "dune" })
    );
    for (args, expected) in [
        (&["--consumer", "tests.someone-else"][..], 0),
        (&["--status", "requeued"][..], 0),
        (&["--status", "dead"][..], 2),
    ] {
        let mut all = vec!["outbox", "inbox-dead", "list", "--format", "json"];
        all.extend_from_slice(args);
        let (code, out, _) = ops(db, &outbox, &all).await;
        assert_eq!(code, 0);
        let listed: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            listed.as_array().unwrap().len(),
            expected,
            "{args:?}: {out}"
        );
    }

    // show, human: every field and the message pretty-printed.
    let (code, out, err) = ops(db, &outbox, &["outbox", "inbox-dead", "show", &failing_ref]).await;
    assert_eq!(code, 0, "{err}");
    for expected in [
        format!("id:           {failing_id}\n"),
        format!("consumer:     {CONSUMER}\n"),
        "status:       dead\n".to_owned(),
        "reason:       handler_failed\n".to_owned(),
        "attempts:     2\n".to_owned(),
        format!("message id:   {}\n", failing.message_id),
        format!("event type:   {}\n", BookOrderedV1::EVENT_TYPE),
        "dead at:      2026-03-01T09:05:00+00:00\n".to_owned(),
        "requeued at:  -\n".to_owned(),
        "requeued by:  -\n".to_owned(),
        "resolved at:  -\n".to_owned(),
        "format:       envelope\nmessage:\n{\n".to_owned(),
        format!("  \"message_id\": \"{}\",\n", failing.message_id),
        "    \"book_id\": \"emma\",\n".to_owned(),
    ] {
        assert!(out.contains(&expected), "{expected:?} in:\n{out}");
    }
    assert!(
        out.lines()
            .any(|line| line.starts_with("error:        ") && line.contains("emma")),
        "{out}"
    );
    // show, JSON.
    let (code, out, _) = ops(
        db,
        &outbox,
        &[
            "outbox",
            "inbox-dead",
            "show",
            &failing_ref,
            "--format",
            "json",
        ],
    )
    .await;
    assert_eq!(code, 0);
    let shown: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(shown["id"], failing_id);
    assert_eq!(shown["attempts"], 2);
    assert_eq!(shown["dead_at"], "2026-03-01T09:05:00Z");
    let stored: Envelope = serde_json::from_value(shown["message"].clone()).unwrap();
    assert_eq!(stored, failing);
    // show of an unknown id.
    let (code, out, err) = ops(db, &outbox, &["outbox", "inbox-dead", "show", "999999"]).await;
    assert_eq!((code, out.as_str()), (2, ""));
    assert!(
        err.contains("no consumer dead letter has id 999999"),
        "{err}"
    );

    // requeue: the book now has stock.
    db.conn()
        .execute_unprepared("INSERT INTO cli_stock (book_id, reserved) VALUES ('emma', 0)")
        .await
        .unwrap();
    clock.advance(chrono::TimeDelta::minutes(5));
    let (code, out, err) = ops(
        db,
        &outbox,
        &[
            "outbox",
            "inbox-dead",
            "requeue",
            &failing_ref,
            "--actor",
            "carol",
        ],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        format!(
            "requeued dead letter {failing_id} ({CONSUMER}, message {}) by carol\n\
             1 dead letter(s) requeued; the running consumer redelivers them\n",
            failing.message_id
        )
    );
    // Not dead any more, or unknown: exit code 2 and why.
    let (code, _, err) = ops(
        db,
        &outbox,
        &["outbox", "inbox-dead", "requeue", &failing_ref],
    )
    .await;
    assert_eq!(code, 2);
    assert_eq!(
        err,
        format!(
            "error: consumer dead letter {failing_id} is requeued; requeue and skip apply to dead letters\n"
        )
    );
    let (code, _, err) = ops(db, &outbox, &["outbox", "inbox-dead", "requeue", "999999"]).await;
    assert_eq!(code, 2);
    assert_eq!(err, "error: no consumer dead letter has id 999999\n");
    let (code, _, err) = ops(db, &outbox, &["outbox", "inbox-dead", "requeue", "x"]).await;
    assert_eq!(code, 2, "an id is a number: {err}");

    let (_, out, _) = ops(
        db,
        &outbox,
        &[
            "outbox",
            "inbox-dead",
            "list",
            "--status",
            "requeued",
            "--format",
            "json",
        ],
    )
    .await;
    let listed: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(listed[0]["id"], failing_id);
    assert_eq!(listed[0]["requeued_by"], "carol");
    assert_eq!(listed[0]["requeued_at"], "2026-03-01T09:10:00Z");

    // The consumer redelivers it: applied, resolved.
    let report = consumer.redeliver_requeued(10).await.unwrap();
    assert_eq!((report.resolved, report.failed), (1, 0));
    assert_eq!(reserved(db, "emma").await, 2);
    assert_eq!(reserved(db, "dune").await, 2, "only the applied message");
    let (_, out, _) = ops(db, &outbox, &["outbox", "inbox-dead", "show", &failing_ref]).await;
    assert!(out.contains("status:       resolved\n"), "{out}");
    assert!(out.contains("requeued by:  carol\n"), "{out}");
    assert!(
        out.contains("resolved at:  2026-03-01T09:10:00+00:00\n"),
        "{out}"
    );
    let (_, out, _) = ops(
        db,
        &outbox,
        &["outbox", "inbox-dead", "list", "--status", "dead"],
    )
    .await;
    assert!(out.ends_with("\n1 dead letter(s)\n"), "{out}");
    assert!(out.contains(&format!("\n{malformed_id}\t")), "{out}");

    // The malformed dead letter holds its order (`Block`): a later message of o-2 is parked.
    let behind = ordered("o-2", "dune");
    assert!(matches!(
        consumer.deliver(&behind).await.unwrap(),
        Delivered::Parked { .. }
    ));
    let (code, out, _) = ops(db, &outbox, &["outbox", "inbox-dead", "parked"]).await;
    assert_eq!(code, 0);
    assert!(out.contains(&behind.message_id.to_string()), "{out}");
    assert!(out.contains("\torder o-2\t"), "{out}");
    assert!(out.ends_with("1 parked message(s)\n"), "{out}");
    let (code, _, err) = ops(
        db,
        &outbox,
        &["outbox", "inbox-dead", "skip", &malformed_ref],
    )
    .await;
    assert_eq!(code, 2, "a skip needs a reason: {err}");
    let (code, out, err) = ops(
        db,
        &outbox,
        &[
            "outbox",
            "inbox-dead",
            "skip",
            &malformed_ref,
            "--reason",
            "sent by a broken producer",
            "--actor",
            "dave",
        ],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with(&format!("skipped dead letter {malformed_id} by dave")),
        "{out}"
    );
    let (_, out, _) = ops(
        db,
        &outbox,
        &["outbox", "inbox-dead", "show", &malformed_ref],
    )
    .await;
    assert!(out.contains("status:       skipped\n"), "{out}");
    assert!(out.contains("skipped by:   dave\n"), "{out}");
    assert!(
        out.contains("skip reason:  sent by a broken producer\n"),
        "{out}"
    );
    assert!(out.contains("aggregate:    order o-2\n"), "{out}");
    assert_eq!(consumer.redeliver_parked().await.unwrap().applied, 1);
    let (_, out, _) = ops(db, &outbox, &["outbox", "inbox-dead", "parked"]).await;
    assert!(out.ends_with("0 parked message(s)\n"), "{out}");

    // A body over the limit: `show` tells its size and digest, and that it was cut.
    let wire = outbox_core::cloudevents::to_binary(&ordered("o-9", "dune")).unwrap();
    let body = vec![b'x'; 300 * 1024];
    let Delivered::DeadLettered { id, .. } =
        consumer.deliver_binary(&wire.headers, &body).await.unwrap()
    else {
        panic!("an oversized body is dead-lettered");
    };
    let (_, out, _) = ops(
        db,
        &outbox,
        &["outbox", "inbox-dead", "show", &id.to_string()],
    )
    .await;
    assert!(out.contains("body size:    307200 bytes, sha256 "), "{out}");
    assert!(out.contains("stored cut:"), "{out}");
}
