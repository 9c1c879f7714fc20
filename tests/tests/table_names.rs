//! Configurable table names: anything that is not a plain SQL identifier is rejected before
//! a statement exists; valid names — reserved words, mixed case, 63 characters — are quoted
//! and work on every backend.

// Scenarios are plain async functions called by generated #[tokio::test]s, which clippy's
// `allow-unwrap-in-tests` does not see as tests.
#![allow(clippy::unwrap_used)]

use outbox_seaorm::record::OutboxRecord;
use outbox_seaorm::table::{IdentifierProblem, InvalidTableName};
use outbox_seaorm::{ConfigError, Outbox, schema};
use outbox_tests::backend_tests;
use outbox_tests::bookstore::{Order, OrderingContracts, PlaceOrder, create_business_tables};
use outbox_tests::db::TestDb;
use sea_orm::ConnectionTrait;

backend_tests!(
    injection_attempts_are_rejected_before_any_sql,
    unusual_valid_names_are_quoted
);

const ATTEMPTS: &[&str] = &[
    "outbox; DROP TABLE victim",
    "outbox; DROP TABLE victim; --",
    "victim\"; DROP TABLE victim; --",
    "\"victim\"",
    "`victim`",
    "victim` ; DROP TABLE victim ; `",
    "'victim'",
    "victim'--",
    "outbox /* comment */",
    "outbox--",
    "",
    " ",
    "out box",
    "outbox\n",
    "outbox\0",
    "outbøx",
    "アウトボックス",
    "public.victim.outbox",
    "public.",
    ".outbox",
    "1outbox",
    "out-box",
    "out$box",
    "outbox)",
];

fn rejection(name: &str) -> Option<InvalidTableName> {
    match Outbox::builder().outbox_table(name).build() {
        Err(ConfigError::TableName(error)) => Some(error),
        Err(other) => panic!("{name:?}: unexpected {other:?}"),
        Ok(_) => None,
    }
}

async fn injection_attempts_are_rejected_before_any_sql(db: &TestDb) {
    db.conn()
        .execute_unprepared("CREATE TABLE victim (id integer)")
        .await
        .unwrap();
    let too_long = "x".repeat(64);
    for name in ATTEMPTS.iter().copied().chain([too_long.as_str()]) {
        let error = rejection(name).unwrap_or_else(|| panic!("{name:?} was accepted"));
        assert_eq!(error.name, name);
        assert!(
            error.to_string().contains("[A-Za-z_][A-Za-z0-9_]*"),
            "{error}"
        );
        // The inbox name goes through the same check.
        assert!(matches!(
            Outbox::builder().inbox_table(name).build(),
            Err(ConfigError::TableName(_))
        ));
    }
    assert!(matches!(
        rejection(&too_long).map(|e| e.reason),
        Some(IdentifierProblem::TooLong {
            length: 64,
            max: 63
        })
    ));
    // Nothing ran: the victim is still there.
    db.conn()
        .execute_unprepared("SELECT id FROM victim")
        .await
        .expect("victim table intact");
}

async fn unusual_valid_names_are_quoted(db: &TestDb) {
    create_business_tables(db.conn()).await.unwrap();
    let long = format!("t{}", "_".repeat(62));
    for (outbox_table, inbox_table) in [
        ("select", "from"),
        ("Outbox_Mixed_Case", "inbox_mixed_case"),
        (
            long.as_str(),
            "i23456789_123456789_123456789_123456789_123456789_123456789_123",
        ),
    ] {
        let outbox = Outbox::builder()
            .outbox_table(outbox_table)
            .inbox_table(inbox_table)
            .build()
            .unwrap();
        schema::install(db.conn(), &outbox)
            .await
            .unwrap_or_else(|e| panic!("install {outbox_table}: {e}"));
        let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
        Order::place(&uow, PlaceOrder::sample(&format!("c-{outbox_table}")))
            .save(&uow)
            .await
            .unwrap();
        uow.commit().await.unwrap();
        assert_eq!(OutboxRecord::count(db.conn(), &outbox).await.unwrap(), 1);
    }
}
