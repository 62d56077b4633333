//! W3C trace context (`traceparent`) for the spans Signet exports: what is
//! stored with an outbox intent, how the relay's send continues it, and the
//! ids a JSON log line carries. Everything here is a no-op while traces are
//! off ([`super::enabled`]).

use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// `00-<trace id>-<span id>-<flags>` of a span context.
fn format(sc: &SpanContext) -> String {
    format!("00-{}-{}-{:02x}", sc.trace_id(), sc.span_id(), sc.trace_flags().to_u8())
}

/// The span's `traceparent`, if traces are exported and it has a context.
pub fn traceparent(span: &tracing::Span) -> Option<String> {
    if !super::enabled() || span.is_disabled() {
        return None;
    }
    let cx = span.context();
    let sc = cx.span().span_context().clone();
    sc.is_valid().then(|| format(&sc))
}

/// The `traceparent` of the span the caller runs in.
pub fn current_traceparent() -> Option<String> {
    if !super::enabled() {
        return None;
    }
    traceparent(&tracing::Span::current())
}

/// The trace and span id of the current span, for a JSON log line.
pub fn current_ids() -> Option<(String, String)> {
    if !super::enabled() {
        return None;
    }
    let span = tracing::Span::current();
    if span.is_disabled() {
        return None;
    }
    let sc = span.context().span().span_context().clone();
    sc.is_valid().then(|| (sc.trace_id().to_string(), sc.span_id().to_string()))
}

/// Parses a stored `traceparent` (version 00); `None` if it is not one.
pub fn parse(text: &str) -> Option<SpanContext> {
    let mut parts = text.trim().split('-');
    let (version, trace, span, flags) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if version != "00" || parts.next().is_some() || trace.len() != 32 || span.len() != 16 || flags.len() != 2 {
        return None;
    }
    let trace = TraceId::from_hex(trace).ok()?;
    let span = SpanId::from_hex(span).ok()?;
    let flags = TraceFlags::new(u8::from_str_radix(flags, 16).ok()?);
    let sc = SpanContext::new(trace, span, flags, true, TraceState::default());
    sc.is_valid().then_some(sc)
}

/// Makes `span` (not yet entered) continue the stored receive context: a
/// child of the receive span, in its trace, and linked to it.
pub fn continue_from(span: &tracing::Span, stored: &str) {
    if !super::enabled() || span.is_disabled() {
        return;
    }
    let Some(receive) = parse(stored) else { return };
    // The link first: setting the parent may build the span.
    span.add_link(receive.clone());
    let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(receive));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparents_round_trip_and_junk_is_refused() {
        let text = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let sc = parse(text).unwrap();
        assert_eq!(format(&sc), text);
        for bad in [
            "",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-00",
            "00-4bf92f3577b34da6a3ce929d0e0e473z-00f067aa0ba902b7-01",
        ] {
            assert!(parse(bad).is_none(), "{bad}");
        }
    }
}
