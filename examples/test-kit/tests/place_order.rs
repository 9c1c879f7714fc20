//! The ordering service's own tests, written with the test kit (book: The test kit): the
//! service's relay and its `inventory.reserve-stock` consumer run on the test's database,
//! publishing to the in-process broker, until nothing moves any more. Each scenario runs on
//! SQLite in memory and on a PostgreSQL database of its own.

use example_test_kit::{OrderPlacedV1, PlaceOrderError, install, place_order, reserved};
use outbox::Outbox;
use outbox::testing::{Crash, TestKit};
use outbox_tests::db::TestDb;
use sea_orm::ConnectionTrait;

type TestResult = Result<(), Box<dyn std::error::Error>>;

const CONSUMER: &str = "inventory.reserve-stock";

/// The service's tables with two books in stock, and a kit running its relay and consumer.
async fn set_up(db: &TestDb) -> Result<(Outbox, TestKit), Box<dyn std::error::Error>> {
    let outbox = Outbox::default();
    install(db.conn(), &outbox).await?;
    let books = "INSERT INTO stock (book, reserved) VALUES ('dune', 0), ('emma', 0)";
    db.conn().execute_unprepared(books).await?;
    let kit = TestKit::builder(db.conn().clone(), outbox.clone())
        .consumer(CONSUMER)
        .build()?;
    Ok((outbox, kit))
}

/// The relay dies after publishing and before marking (the order is published twice, with
/// one message id), the consumer dies after its handler and before its commit (the
/// reservation rolls back and the message comes again): the books are reserved once.
async fn an_order_reserves_its_books_once_through_both_crashes(db: &TestDb) -> TestResult {
    let (outbox, mut kit) = set_up(db).await?;
    place_order(db.conn(), &outbox, "order-42", &["dune", "emma"]).await?;

    kit.crash(Crash::AfterPublishBeforeMark)?;
    kit.crash(Crash::after_handler_before_commit(CONSUMER))?;
    let report = kit.drain_until_idle().await?;

    assert_eq!(report.crashes, 2, "both crashes happened");
    assert_eq!(
        report.duplicates, 1,
        "the second copy was skipped by the inbox"
    );
    let placed = OrderPlacedV1 {
        order_id: "order-42".into(),
        books: vec!["dune".into(), "emma".into()],
    };
    assert_eq!(kit.published::<OrderPlacedV1>()?, [placed]);
    assert_eq!(reserved(db.conn(), "dune").await?, Some(1));
    assert_eq!(reserved(db.conn(), "emma").await?, Some(1));
    Ok(())
}

/// An order without books, or with a known id, writes nothing: nothing is published,
/// nothing reserved.
async fn a_refused_order_publishes_nothing(db: &TestDb) -> TestResult {
    let (outbox, mut kit) = set_up(db).await?;
    place_order(db.conn(), &outbox, "order-1", &["dune"]).await?;
    let no_books = place_order(db.conn(), &outbox, "order-2", &[]).await;
    assert!(
        matches!(no_books, Err(PlaceOrderError::NoBooks)),
        "{no_books:?}"
    );
    let known = place_order(db.conn(), &outbox, "order-1", &["emma"]).await;
    assert!(
        matches!(known, Err(PlaceOrderError::Database(_))),
        "{known:?}"
    );

    let report = kit.drain_until_idle().await?;

    assert_eq!(report.duplicates, 0);
    let published = kit.published::<OrderPlacedV1>()?;
    let orders: Vec<&str> = published.iter().map(|o| o.order_id.as_str()).collect();
    assert_eq!(orders, ["order-1"]);
    assert_eq!(reserved(db.conn(), "dune").await?, Some(1));
    assert_eq!(
        reserved(db.conn(), "emma").await?,
        Some(0),
        "order-1's second try"
    );
    Ok(())
}

/// Runs `scenario` on a fresh PostgreSQL database, then drops it.
async fn on_postgres(test: &str, scenario: impl AsyncFnOnce(&TestDb) -> TestResult) -> TestResult {
    let Some(db) = TestDb::postgres(test).await else {
        return Ok(()); // OUTBOX_ALLOW_MISSING_SERVICES=1 and no PostgreSQL: skipped, loudly
    };
    let result = scenario(&db).await;
    db.close().await;
    result
}

#[tokio::test]
async fn an_order_reserves_its_books_once_through_both_crashes_on_sqlite() -> TestResult {
    an_order_reserves_its_books_once_through_both_crashes(&TestDb::sqlite_memory().await).await
}

#[tokio::test]
async fn an_order_reserves_its_books_once_through_both_crashes_on_postgres() -> TestResult {
    let test = "an_order_reserves_its_books_once_through_both_crashes_on_postgres";
    on_postgres(test, an_order_reserves_its_books_once_through_both_crashes).await
}

#[tokio::test]
async fn a_refused_order_publishes_nothing_on_sqlite() -> TestResult {
    a_refused_order_publishes_nothing(&TestDb::sqlite_memory().await).await
}

#[tokio::test]
async fn a_refused_order_publishes_nothing_on_postgres() -> TestResult {
    on_postgres(
        "a_refused_order_publishes_nothing_on_postgres",
        a_refused_order_publishes_nothing,
    )
    .await
}
