//! The log relay on MariaDB's binary log (issue 34), against a private server with the
//! binlog on (`outbox_tests::binlog_mariadb`).

#![allow(clippy::unwrap_used)]

use outbox_tests::binlog_mariadb::BinlogMariaDb;
use outbox_tests::db::TestDb;
use sea_orm::{ConnectionTrait, DbBackend, Statement};

/// The value of a server variable.
async fn variable(db: &TestDb, name: &str) -> String {
    let row = db
        .conn()
        .query_one_raw(Statement::from_string(
            DbBackend::MySql,
            format!("SELECT @@{name}"),
        ))
        .await
        .unwrap()
        .unwrap();
    row.try_get_by_index::<String>(0)
        .or_else(|_| row.try_get_by_index::<i64>(0).map(|n| n.to_string()))
        .or_else(|_| row.try_get_by_index::<u64>(0).map(|n| n.to_string()))
        .unwrap()
}

/// The tests' server writes the binary log the relay needs, and a dedicated one survives a
/// restart with its data.
#[tokio::test]
async fn the_test_server_writes_a_row_image_binlog_and_restarts() {
    let test = "the_test_server_writes_a_row_image_binlog_and_restarts";
    let Some(db) = TestDb::binlog_mariadb(test).await else {
        return;
    };
    assert_eq!(variable(&db, "log_bin").await, "1");
    assert_eq!(variable(&db, "binlog_format").await, "ROW");
    assert_eq!(variable(&db, "binlog_row_image").await, "FULL");
    assert_eq!(variable(&db, "binlog_row_metadata").await, "FULL");
    db.close().await;

    let Some(mut server) = BinlogMariaDb::dedicated(test, &["--server-id=7"]).await else {
        return;
    };
    let restarted = TestDb::server_at(
        outbox_tests::Service::MariaDb,
        outbox_tests::db::Backend::MariaDb,
        server.admin_url(),
    )
    .await;
    restarted
        .conn()
        .execute_unprepared("CREATE TABLE kept (id INT PRIMARY KEY); INSERT INTO kept VALUES (1)")
        .await
        .unwrap();
    assert_eq!(variable(&restarted, "server_id").await, "7");
    server.restart().await;
    let count = restarted
        .conn()
        .query_one_raw(Statement::from_string(
            DbBackend::MySql,
            "SELECT COUNT(*) FROM kept",
        ))
        .await
        .unwrap()
        .unwrap()
        .try_get_by_index::<i64>(0)
        .unwrap();
    assert_eq!(count, 1, "{}", server.log());
    restarted.close().await;
}
