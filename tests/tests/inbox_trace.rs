//! The consumer's handler span continues the producer's trace: the envelope's `traceparent`
//! becomes the OpenTelemetry parent of the handler span (`otel` feature), and the events the
//! handler raises carry it on.

#![allow(clippy::unwrap_used)]

use std::cell::RefCell;

use opentelemetry::trace::TraceContextExt as _;
use outbox_core::mapping::{ContractMapper, ContractSink, MapError};
use outbox_core::{Envelope, IntegrationEvent, Raise};
use outbox_seaorm::inbox::{self, InboxOutcome};
use outbox_seaorm::record::OutboxRecord;
use outbox_seaorm::{Outbox, UnitOfWork, inbox_handler, schema};
use outbox_tests::db::TestDb;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::layer::SubscriberExt as _;

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const SPAN_ID: &str = "00f067aa0ba902b7";

#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "tests.trace.ping.v1", key = ping_id)]
struct PingV1 {
    ping_id: String,
}

#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "tests.trace.pong.v1", key = ping_id)]
struct PongV1 {
    ping_id: String,
}

enum TraceEvent {
    Ponged(String),
}

struct TraceContracts;

impl ContractMapper<TraceEvent> for TraceContracts {
    fn map(&self, event: &TraceEvent, out: &mut ContractSink<'_>) -> Result<(), MapError> {
        match event {
            TraceEvent::Ponged(id) => out.emit(&PongV1 {
                ping_id: id.clone(),
            }),
        }
    }
}

thread_local! {
    /// The trace id of the handler's span (per thread: each test has its own
    /// current-thread runtime).
    static SEEN: RefCell<Option<String>> = const { RefCell::new(None) };
}

#[inbox_handler(consumer = "tests.trace-ping", mapper = &TraceContracts)]
async fn answer_ping(
    uow: &UnitOfWork<TraceEvent>,
    ping: PingV1,
) -> Result<(), std::convert::Infallible> {
    let context = tracing::Span::current().context();
    let trace_id = context.span().span_context().trace_id().to_string();
    SEEN.with(|seen| *seen.borrow_mut() = Some(trace_id));
    uow.raise(TraceEvent::Ponged(ping.ping_id));
    Ok(())
}

// A current-thread runtime: the subscriber is set for this thread only.
#[tokio::test]
async fn handler_span_continues_the_envelope_trace() {
    let subscriber = tracing_subscriber::registry().with(tracing_opentelemetry::layer());
    let _guard = tracing::subscriber::set_default(subscriber);

    let db = TestDb::sqlite_memory().await;
    let outbox = Outbox::default();
    schema::install(db.conn(), &outbox).await.unwrap();

    let traceparent = format!("00-{TRACE_ID}-{SPAN_ID}-01");
    let ping = Envelope::from_event(&PingV1 {
        ping_id: "p-1".into(),
    })
    .unwrap()
    .with_trace_context(traceparent.clone(), Some("congo=t61rcWkgMzE".into()));

    let outcome = inbox::apply::<answer_ping>(db.conn(), &outbox, &ping)
        .await
        .unwrap();
    assert_eq!(outcome, InboxOutcome::Applied);
    assert_eq!(
        SEEN.with(|seen| seen.borrow().clone()).as_deref(),
        Some(TRACE_ID)
    );

    // The pong the handler raised carries the trace on, and is caused by the ping.
    let records = OutboxRecord::list(db.conn(), &outbox, 10).await.unwrap();
    assert_eq!(records.len(), 1);
    let pong = &records[0].envelope;
    assert_eq!(pong.event_type, PongV1::EVENT_TYPE);
    assert_eq!(pong.causation_id, Some(ping.message_id));
    assert_eq!(pong.correlation_id, Some(ping.message_id));
    let carried = pong.traceparent.as_deref().unwrap();
    assert!(
        carried.starts_with(&format!("00-{TRACE_ID}-")),
        "{carried} does not continue trace {TRACE_ID}"
    );
    db.close().await;
}

// Without an OpenTelemetry layer, the envelope's trace context is still carried on to the
// events the handler raises. (A subscriber here too: a test without one would let tracing
// cache "nobody is interested" for the handler span's callsite, racing with the test above.)
#[tokio::test]
async fn without_otel_layer_the_trace_context_is_carried_on() {
    let _guard = tracing::subscriber::set_default(tracing_subscriber::registry());
    let db = TestDb::sqlite_memory().await;
    let outbox = Outbox::default();
    schema::install(db.conn(), &outbox).await.unwrap();
    let traceparent = format!("00-{TRACE_ID}-{SPAN_ID}-01");
    let ping = Envelope::from_event(&PingV1 {
        ping_id: "p-2".into(),
    })
    .unwrap()
    .with_trace_context(traceparent.clone(), None);
    assert_eq!(
        inbox::apply::<answer_ping>(db.conn(), &outbox, &ping)
            .await
            .unwrap(),
        InboxOutcome::Applied
    );
    let records = OutboxRecord::list(db.conn(), &outbox, 10).await.unwrap();
    assert_eq!(
        records[0].envelope.traceparent.as_deref(),
        Some(traceparent.as_str())
    );
    db.close().await;
}
