//! `SIGNET_LOG_FORMAT=json`: one JSON object per line on stderr, with the
//! trace and span id of the span the line was written in (while traces are
//! exported), so a log line leads to its trace. Fields are exactly what the
//! caller logged, which is never a secret or a body.

use std::fmt;

use serde_json::{Map, Value};
use tracing::{
    Event, Subscriber,
    field::{Field, Visit},
};
use tracing_subscriber::{
    fmt::{FmtContext, FormatEvent, FormatFields, format::Writer},
    registry::LookupSpan,
};

/// The JSON lines format.
pub struct JsonLines;

impl<S, N> FormatEvent<S, N> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(&self, _: &FmtContext<'_, S, N>, mut w: Writer<'_>, event: &Event<'_>) -> fmt::Result {
        let meta = event.metadata();
        let mut fields = Map::new();
        event.record(&mut Fields(&mut fields));
        let mut line = Map::new();
        line.insert("timestamp".into(), Value::String(timestamp()));
        line.insert("level".into(), meta.level().as_str().into());
        line.insert("target".into(), meta.target().into());
        if let Some(message) = fields.remove("message") {
            line.insert("message".into(), message);
        }
        if !fields.is_empty() {
            line.insert("fields".into(), Value::Object(fields));
        }
        if let Some((trace_id, span_id)) = super::context::current_ids() {
            line.insert("trace_id".into(), trace_id.into());
            line.insert("span_id".into(), span_id.into());
        }
        writeln!(w, "{}", Value::Object(line))
    }
}

/// RFC 3339 in UTC with milliseconds.
fn timestamp() -> String {
    let now = time::OffsetDateTime::now_utc();
    let now = now.replace_nanosecond(now.millisecond() as u32 * 1_000_000).unwrap_or(now);
    now.format(&time::format_description::well_known::Rfc3339).unwrap_or_default()
}

struct Fields<'a>(&'a mut Map<String, Value>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, f: &Field, v: &dyn fmt::Debug) {
        self.0.insert(f.name().into(), Value::String(format!("{v:?}")));
    }
    fn record_str(&mut self, f: &Field, v: &str) {
        self.0.insert(f.name().into(), v.into());
    }
    fn record_i64(&mut self, f: &Field, v: i64) {
        self.0.insert(f.name().into(), v.into());
    }
    fn record_u64(&mut self, f: &Field, v: u64) {
        self.0.insert(f.name().into(), v.into());
    }
    fn record_bool(&mut self, f: &Field, v: bool) {
        self.0.insert(f.name().into(), v.into());
    }
    fn record_f64(&mut self, f: &Field, v: f64) {
        self.0.insert(f.name().into(), v.into());
    }
}
