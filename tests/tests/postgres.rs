//! PostgreSQL specifics: `NOTIFY` is delivered when the unit of work commits and never when
//! it does not; schema-qualified table names.

// Scenarios are plain async functions called by generated #[tokio::test]s, which clippy's
// `allow-unwrap-in-tests` does not see as tests.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use outbox_seaorm::record::OutboxRecord;
use outbox_seaorm::{CommitError, Outbox, schema};
use outbox_tests::bookstore::{
    Order, OrderingContracts, PlaceOrder, count_orders, create_business_tables,
};
use outbox_tests::db::{Backend, TestDb, run_scenario};
use sea_orm::sqlx::postgres::PgListener;
use sea_orm::{ConnectionTrait, DbBackend, Statement};

const CHANNEL: &str = "ordering_outbox";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notify_is_delivered_on_commit_only() {
    run_scenario(
        Backend::Postgres,
        "notify_is_delivered_on_commit_only",
        async |db: &TestDb| {
            let outbox = Outbox::builder()
                .notify_channel(Some(CHANNEL))
                .build()
                .unwrap();
            schema::install(db.conn(), &outbox).await.unwrap();
            create_business_tables(db.conn()).await.unwrap();
            // A constraint checked at COMMIT, to make a commit fail after the NOTIFY ran.
            db.conn()
                .execute_unprepared(
                    "CREATE TABLE guard (id integer, \
                     CONSTRAINT guard_once UNIQUE (id) DEFERRABLE INITIALLY DEFERRED)",
                )
                .await
                .unwrap();

            let mut listener = PgListener::connect_with(db.conn().get_postgres_connection_pool())
                .await
                .unwrap();
            listener.listen(CHANNEL).await.unwrap();

            // The NOTIFY runs inside the transaction, then COMMIT fails: nothing delivered.
            let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
            Order::place(&uow, PlaceOrder::sample("c-1"))
                .save(&uow)
                .await
                .unwrap();
            uow.execute_unprepared("INSERT INTO guard VALUES (1), (1)")
                .await
                .unwrap();
            let error = uow.commit().await.expect_err("COMMIT fails");
            assert!(matches!(error, CommitError::Commit(_)), "{error:?}");
            assert!(
                tokio::time::timeout(Duration::from_millis(500), listener.recv())
                    .await
                    .is_err(),
                "no notification from a transaction that did not commit"
            );
            assert_eq!(count_orders(db.conn()).await.unwrap(), 0);
            assert_eq!(OutboxRecord::count(db.conn(), &outbox).await.unwrap(), 0);

            // Open and not yet committed: nothing either.
            let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
            Order::place(&uow, PlaceOrder::sample("c-2"))
                .save(&uow)
                .await
                .unwrap();
            assert!(
                tokio::time::timeout(Duration::from_millis(200), listener.recv())
                    .await
                    .is_err()
            );
            let report = uow.commit().await.unwrap();
            assert!(report.notified);
            let notification = tokio::time::timeout(Duration::from_secs(5), listener.recv())
                .await
                .expect("notified after commit")
                .unwrap();
            assert_eq!(notification.channel(), CHANNEL);
            assert_eq!(notification.payload(), "");
            // By the time the relay wakes up, the row is visible.
            assert_eq!(OutboxRecord::count(db.conn(), &outbox).await.unwrap(), 1);

            // No channel, no NOTIFY.
            let silent = Outbox::builder().notify_channel(None).build().unwrap();
            let uow = silent.begin(db.conn(), &OrderingContracts).await.unwrap();
            Order::place(&uow, PlaceOrder::sample("c-3"))
                .save(&uow)
                .await
                .unwrap();
            assert!(!uow.commit().await.unwrap().notified);
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schema_qualified_tables() {
    run_scenario(
        Backend::Postgres,
        "schema_qualified_tables",
        async |db: &TestDb| {
            db.conn()
                .execute_unprepared("CREATE SCHEMA billing")
                .await
                .unwrap();
            let outbox = Outbox::builder()
                .outbox_table("billing.outbox")
                .inbox_table("billing.inbox")
                .build()
                .unwrap();
            schema::install(db.conn(), &outbox).await.unwrap();
            create_business_tables(db.conn()).await.unwrap();
            let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
            Order::place(&uow, PlaceOrder::sample("c-1"))
                .save(&uow)
                .await
                .unwrap();
            uow.commit().await.unwrap();
            assert_eq!(OutboxRecord::count(db.conn(), &outbox).await.unwrap(), 1);
            let tables = db
                .conn()
                .query_all_raw(Statement::from_string(
                    DbBackend::Postgres,
                    "SELECT table_name FROM information_schema.tables \
                     WHERE table_schema = 'billing' ORDER BY table_name",
                ))
                .await
                .unwrap()
                .iter()
                .map(|row| row.try_get::<String>("", "table_name").unwrap())
                .collect::<Vec<_>>();
            assert_eq!(tables, ["inbox", "outbox"]);
            let indexes = db
                .conn()
                .query_all_raw(Statement::from_string(
                    DbBackend::Postgres,
                    "SELECT indexname, indexdef FROM pg_indexes \
                     WHERE schemaname = 'billing' AND tablename = 'outbox' ORDER BY indexname",
                ))
                .await
                .unwrap();
            let partial = indexes
                .iter()
                .map(|row| row.try_get::<String>("", "indexdef").unwrap())
                .filter(|def| def.contains("WHERE ((status)::text = 'pending'::text)"))
                .count();
            assert_eq!(partial, 3, "three partial indexes on pending rows");
        },
    )
    .await;
}
