//! W3C trace context carried from the producing span through the outbox row to consumers.
//!
//! A unit of work stamps its [`TraceContext`] on every envelope it writes (`traceparent`,
//! `tracestate` columns). It gets one, in this order of precedence:
//!
//! 1. set explicitly ([`UnitOfWorkBuilder::trace_context`](crate::UnitOfWorkBuilder::trace_context)
//!    or [`UnitOfWork::set_trace_context`](crate::UnitOfWork::set_trace_context));
//! 2. the configured [`TraceContextSource`] hook, called once when the unit of work begins
//!    ([`OutboxBuilder::trace_context_source`](crate::OutboxBuilder::trace_context_source)).
//!    The default hook is `current_span_context` with the `otel` cargo feature (the
//!    OpenTelemetry context of the current `tracing` span, through `tracing-opentelemetry`)
//!    and [`no_trace_context`] without it;
//! 3. for a unit of work started by a consumer, the incoming envelope's trace context;
//! 4. none.
//!
//! ```
//! use outbox_seaorm::trace::TraceContext;
//!
//! let context = TraceContext::new("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", None)?;
//! assert_eq!(context.traceparent(), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
//! assert!(TraceContext::new("00-zz-00f067aa0ba902b7-01", None).is_err());
//! # Ok::<(), outbox_seaorm::trace::InvalidTraceparent>(())
//! ```

/// A W3C trace context: a validated `traceparent` and an optional `tracestate`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    traceparent: String,
    tracestate: Option<String>,
}

/// A `traceparent` that does not follow the W3C Trace Context format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid traceparent {value:?}: {reason}")]
#[non_exhaustive]
pub struct InvalidTraceparent {
    /// The rejected value.
    pub value: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

fn is_lower_hex(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn check_traceparent(value: &str) -> Result<(), &'static str> {
    let mut fields = value.split('-');
    let (Some(version), Some(trace_id), Some(parent_id), Some(flags)) =
        (fields.next(), fields.next(), fields.next(), fields.next())
    else {
        return Err("expected `version-traceid-parentid-flags`");
    };
    if version.len() != 2 || !is_lower_hex(version) {
        return Err("the version is not two lowercase hex digits");
    }
    if version == "ff" {
        return Err("version ff is forbidden");
    }
    if version == "00" && fields.next().is_some() {
        return Err("version 00 has exactly four fields");
    }
    if trace_id.len() != 32 || !is_lower_hex(trace_id) {
        return Err("the trace id is not 32 lowercase hex digits");
    }
    if trace_id.bytes().all(|b| b == b'0') {
        return Err("the trace id is all zeros");
    }
    if parent_id.len() != 16 || !is_lower_hex(parent_id) {
        return Err("the parent id is not 16 lowercase hex digits");
    }
    if parent_id.bytes().all(|b| b == b'0') {
        return Err("the parent id is all zeros");
    }
    if flags.len() != 2 || !is_lower_hex(flags) {
        return Err("the flags are not two lowercase hex digits");
    }
    Ok(())
}

impl TraceContext {
    /// A trace context from a `traceparent` header value and an optional `tracestate`.
    ///
    /// # Errors
    /// [`InvalidTraceparent`] when `traceparent` is not `version-traceid-parentid-flags` in
    /// lowercase hex with non-zero ids.
    pub fn new(
        traceparent: impl Into<String>,
        tracestate: Option<String>,
    ) -> Result<Self, InvalidTraceparent> {
        let traceparent = traceparent.into();
        match check_traceparent(&traceparent) {
            Ok(()) => Ok(Self {
                traceparent,
                tracestate: tracestate.filter(|state| !state.is_empty()),
            }),
            Err(reason) => Err(InvalidTraceparent {
                value: traceparent,
                reason,
            }),
        }
    }

    /// The `traceparent` header value.
    pub fn traceparent(&self) -> &str {
        &self.traceparent
    }

    /// The `tracestate` header value, if any.
    pub fn tracestate(&self) -> Option<&str> {
        self.tracestate.as_deref()
    }

    /// The trace context an envelope carries, if its `traceparent` is valid.
    pub fn of_envelope(envelope: &outbox_core::Envelope) -> Option<Self> {
        let traceparent = envelope.traceparent.as_deref()?;
        Self::new(traceparent, envelope.tracestate.clone()).ok()
    }
}

/// The hook a unit of work calls when it begins to learn the current trace context.
///
/// A plain function, so it can read thread-local or task-local state (the current span)
/// but holds none itself.
pub type TraceContextSource = fn() -> Option<TraceContext>;

/// A [`TraceContextSource`] that never finds a trace context.
pub fn no_trace_context() -> Option<TraceContext> {
    None
}

/// The default [`TraceContextSource`]: `current_span_context` with the `otel` feature,
/// [`no_trace_context`] without it.
pub fn default_source() -> TraceContextSource {
    #[cfg(feature = "otel")]
    {
        current_span_context
    }
    #[cfg(not(feature = "otel"))]
    {
        no_trace_context
    }
}

/// The OpenTelemetry span context of the current `tracing` span, when a
/// `tracing_opentelemetry` layer is installed and the context is valid. (`otel` feature.)
#[cfg(feature = "otel")]
pub fn current_span_context() -> Option<TraceContext> {
    use opentelemetry::trace::TraceContextExt as _;
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;

    let context = tracing::Span::current().context();
    let span = context.span();
    let span_context = span.span_context();
    if !span_context.is_valid() {
        return None;
    }
    let traceparent = format!(
        "00-{}-{}-{:02x}",
        span_context.trace_id(),
        span_context.span_id(),
        span_context.trace_flags().to_u8()
    );
    let tracestate = span_context.trace_state().header();
    TraceContext::new(traceparent, Some(tracestate)).ok()
}

/// The OpenTelemetry context whose remote parent is `envelope`'s trace context, for the
/// consumer span that continues the producer's trace. (`otel` feature.)
#[cfg(feature = "otel")]
pub(crate) fn remote_parent(envelope: &outbox_core::Envelope) -> Option<opentelemetry::Context> {
    use opentelemetry::trace::{
        SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId, TraceState,
    };

    let context = TraceContext::of_envelope(envelope)?;
    let mut parts = context.traceparent().split('-');
    let (_version, trace_id, span_id, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let trace_id = TraceId::from_hex(trace_id).ok()?;
    let span_id = SpanId::from_hex(span_id).ok()?;
    let flags = u8::from_str_radix(flags, 16).ok()?;
    let state = context
        .tracestate()
        .and_then(|state| state.parse::<TraceState>().ok())
        .unwrap_or_default();
    let span = SpanContext::new(trace_id, span_id, TraceFlags::new(flags), true, state);
    Some(opentelemetry::Context::new().with_remote_span_context(span))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validates_traceparent() {
        let ok = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert!(TraceContext::new(ok, None).is_ok());
        // A future version may append fields.
        assert!(
            TraceContext::new(
                "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
                None
            )
            .is_ok()
        );
        for bad in [
            "",
            "00",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
        ] {
            assert!(TraceContext::new(bad, None).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn empty_tracestate_is_none() {
        let context = TraceContext::new(
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            Some(String::new()),
        )
        .unwrap();
        assert_eq!(context.tracestate(), None);
    }
}
