//! `traceparent` from the current tracing span (the `otel` feature of outbox-seaorm) and from
//! a custom hook.

// Scenarios are plain async functions called by generated #[tokio::test]s, which clippy's
// `allow-unwrap-in-tests` does not see as tests.
#![allow(clippy::unwrap_used)]

use opentelemetry::trace::{
    SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId, TraceState,
};
use outbox_seaorm::record::OutboxRecord;
use outbox_seaorm::trace::TraceContext;
use outbox_seaorm::{Outbox, schema};
use outbox_tests::bookstore::{Order, OrderingContracts, PlaceOrder, create_business_tables};
use outbox_tests::db::TestDb;
use tracing::Instrument as _;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::layer::SubscriberExt as _;

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const SPAN_ID: &str = "00f067aa0ba902b7";

// A current-thread runtime: the subscriber is set for this thread only.
#[tokio::test]
async fn traceparent_comes_from_the_current_span() {
    let subscriber = tracing_subscriber::registry().with(tracing_opentelemetry::layer());
    let _guard = tracing::subscriber::set_default(subscriber);

    let db = TestDb::sqlite_memory().await;
    let outbox = Outbox::default();
    schema::install(db.conn(), &outbox).await.unwrap();
    create_business_tables(db.conn()).await.unwrap();

    // The span of a request whose caller sent a traceparent.
    let remote = SpanContext::new(
        TraceId::from_hex(TRACE_ID).unwrap(),
        SpanId::from_hex(SPAN_ID).unwrap(),
        TraceFlags::SAMPLED,
        true,
        TraceState::from_key_value([("congo", "t61rcWkgMzE")]).unwrap(),
    );
    let span = tracing::info_span!("place_order");
    span.set_parent(opentelemetry::Context::new().with_remote_span_context(remote))
        .unwrap();

    let uow = async { outbox.begin(db.conn(), &OrderingContracts).await }
        .instrument(span)
        .await
        .unwrap();
    let expected = format!("00-{TRACE_ID}-{SPAN_ID}-01");
    assert_eq!(
        uow.trace_context().map(TraceContext::traceparent),
        Some(expected.as_str())
    );
    Order::place(&uow, PlaceOrder::sample("c-1"))
        .save(&uow)
        .await
        .unwrap();
    uow.commit().await.unwrap();
    let records = OutboxRecord::list(db.conn(), &outbox, 10).await.unwrap();
    assert_eq!(
        records[0].envelope.traceparent.as_deref(),
        Some(expected.as_str())
    );
    assert_eq!(
        records[0].envelope.tracestate.as_deref(),
        Some("congo=t61rcWkgMzE")
    );

    // Outside any span there is no trace context.
    let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
    assert_eq!(uow.trace_context(), None);
    uow.rollback().await.unwrap();
    db.close().await;
}

fn fixed_trace_context() -> Option<TraceContext> {
    TraceContext::new(format!("00-{TRACE_ID}-{SPAN_ID}-00"), None).ok()
}

#[tokio::test]
async fn a_custom_hook_supplies_the_trace_context() {
    let db = TestDb::sqlite_memory().await;
    let outbox = Outbox::builder()
        .trace_context_source(fixed_trace_context)
        .build()
        .unwrap();
    let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
    assert_eq!(uow.trace_context(), fixed_trace_context().as_ref());
    uow.rollback().await.unwrap();
    // An explicit context wins over the hook.
    let uow = outbox
        .unit_of_work(&OrderingContracts)
        .trace_context(None)
        .begin(db.conn())
        .await
        .unwrap();
    assert_eq!(uow.trace_context(), None);
    uow.rollback().await.unwrap();
    db.close().await;
}
