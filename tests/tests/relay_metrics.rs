//! The relay's metrics through the `metrics` facade: names from `outbox_core::metric`,
//! bounded labels. A test binary of its own, since it installs the global recorder.

#![allow(clippy::unwrap_used)]

use outbox_core::Raise;
use outbox_core::in_process::InProcessBroker;
use outbox_core::metric;
use outbox_core::publish::PublishError;
use outbox_seaorm::ops::Operations;
use outbox_seaorm::relay::Relay;
use outbox_seaorm::{Outbox, schema};
use outbox_tests::bookstore::{OrderingContracts, OrderingEvent};
use outbox_tests::db::TestDb;
use outbox_tests::metrics::Memory;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_emits_documented_metrics() {
    let memory = Memory::shared();
    let db = TestDb::sqlite_memory().await;
    let outbox = Outbox::default();
    schema::install(db.conn(), &outbox).await.unwrap();
    let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
    for (order, n) in [
        ("ok-1", 0),
        ("ok-2", 0),
        ("rejected", 0),
        ("flaky", 0),
        ("rejected", 1),
    ] {
        uow.raise(OrderingEvent::Noted {
            order_id: order.into(),
            n,
        });
    }
    uow.commit().await.unwrap();
    let broker = InProcessBroker::new();
    broker.fail_messages(|e| match e.aggregate_id.as_str() {
        "rejected" => Some(PublishError::rejected("schema")),
        "flaky" => Some(PublishError::timeout("no ack")),
        _ => None,
    });
    let mut relay = Relay::builder(db.conn().clone(), outbox.clone(), broker)
        .build()
        .unwrap();
    relay.drain().await.unwrap();
    Operations::new(db.conn().clone(), outbox)
        .status()
        .await
        .unwrap();

    let o = "outbox=outbox";
    assert_eq!(memory.counter(&format!("{}{{{o}}}", metric::PUBLISHED)), 2);
    assert_eq!(
        memory.counter(&format!(
            "{}{{{o},class=transient}}",
            metric::PUBLISH_FAILURES
        )),
        1
    );
    assert_eq!(
        memory.counter(&format!(
            "{}{{{o},class=permanent}}",
            metric::PUBLISH_FAILURES
        )),
        1
    );
    assert_eq!(
        memory.counter(&format!(
            "{}{{{o},event_type=outboxtest.ordering.order-noted.v2}}",
            metric::DEAD_LETTERED
        )),
        1
    );
    assert_eq!(
        memory.gauge(&format!("{}{{{o}}}", metric::PENDING_ROWS)),
        2.0
    );
    assert_eq!(
        memory.gauge(&format!("{}{{{o}}}", metric::BACKOFF_ROWS)),
        1.0,
        "flaky"
    );
    assert_eq!(
        memory.gauge(&format!("{}{{{o}}}", metric::HELD_ROWS)),
        1.0,
        "rejected's second row, behind its dead row"
    );
    assert_eq!(memory.gauge(&format!("{}{{{o}}}", metric::DEAD_ROWS)), 1.0);
    assert_eq!(
        memory.gauge(&format!("{}{{{o}}}", metric::OLDEST_CLAIMABLE_AGE)),
        0.0,
        "in backoff"
    );
    assert_eq!(
        memory.gauge(&format!("{}{{{o}}}", metric::LEASES_OWNED)),
        1.0
    );
    assert!(memory.gauge(&format!("{}{{{o}}}", metric::RELAY_HEARTBEAT)) > 1.7e9);
    assert_eq!(
        memory.samples(&format!("{}{{{o}}}", metric::BATCH_DURATION)),
        1
    );
    assert_eq!(memory.samples(&format!("{}{{{o}}}", metric::BATCH_SIZE)), 1);
    // No label carries an id.
    for key in memory.counter_keys() {
        assert!(!key.contains("ok-1") && !key.contains("relay-"), "{key}");
    }
    db.close().await;
}

/// Two databases with an outbox table of the same name, told apart by the extra label of
/// each `Outbox` (what a process relaying for several tenants does): each relay's metrics and
/// each status report carry its own label, and their counts do not mix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extra_label_tells_two_databases_apart() {
    let memory = Memory::shared();
    let mut tenants = Vec::new();
    for (tenant, orders) in [("tenant_a", 3), ("tenant_b", 5)] {
        let db = TestDb::sqlite_memory().await;
        let outbox = Outbox::builder()
            .outbox_table("labelled_outbox")
            .metric_label("relay", tenant)
            .build()
            .unwrap();
        schema::install(db.conn(), &outbox).await.unwrap();
        let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
        for n in 0..orders {
            uow.raise(OrderingEvent::Noted {
                order_id: format!("{tenant}-{n}"),
                n: 0,
            });
        }
        uow.commit().await.unwrap();
        tenants.push((tenant, orders, db, outbox));
    }
    let broker = InProcessBroker::new();
    for (_, _, db, outbox) in &tenants {
        let mut relay = Relay::builder(db.conn().clone(), outbox.clone(), broker.clone())
            .build()
            .unwrap();
        relay.drain().await.unwrap();
        Operations::new(db.conn().clone(), outbox.clone())
            .status()
            .await
            .unwrap();
    }
    for (tenant, orders, _, _) in &tenants {
        let labels = format!("outbox=labelled_outbox,relay={tenant}");
        assert_eq!(
            memory.counter(&format!("{}{{{labels}}}", metric::PUBLISHED)),
            *orders,
            "{tenant}"
        );
        assert_eq!(
            memory.gauge(&format!("{}{{{labels}}}", metric::PENDING_ROWS)),
            0.0
        );
        assert!(memory.gauge(&format!("{}{{{labels}}}", metric::RELAY_HEARTBEAT)) > 1.7e9);
    }
    assert_eq!(
        memory.counter(&format!("{}{{outbox=labelled_outbox}}", metric::PUBLISHED)),
        0,
        "no unlabelled series"
    );
    for (_, _, db, _) in tenants {
        db.close().await;
    }
}
