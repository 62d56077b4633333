//! Logs and traces. Logs go to stderr as text or JSON lines
//! (`SIGNET_LOG_FORMAT`). With `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) set, `serve` also exports the spans
//! of target [`domain::TRACE_TARGET`] over OTLP/HTTP (protobuf): one per
//! webhook with its verification, claim and answer, and one per outbox send.
//!
//! Free when off: that target is switched off in the log filter, so with no
//! exporter those spans are disabled at their call site (no subscriber
//! work, no allocation), and nothing reads or stores a trace context.

mod context;
mod json_log;
pub mod settings;

use std::sync::atomic::{AtomicBool, Ordering};

pub use context::{continue_from, current_traceparent, traceparent};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
pub use settings::LogFormat;
use tracing_subscriber::{EnvFilter, Layer, filter::Targets, layer::SubscriberExt, util::SubscriberInitExt};

static ENABLED: AtomicBool = AtomicBool::new(false);

/// Whether spans are being exported.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Owns the exporter: [`Guard::shutdown`] sends what is still buffered.
pub struct Guard(Option<SdkTracerProvider>);

impl Guard {
    pub fn shutdown(self) {
        if let Some(provider) = self.0
            && let Err(e) = provider.shutdown()
        {
            eprintln!("warning: the last spans could not be exported: {e}");
        }
    }
}

/// Sets up logging (and for the server, trace export). The server refuses
/// a bad `SIGNET_LOG_FORMAT` or `OTEL_*` setting with one line; CLI commands
/// log as text then (`signet config check` reports it) and never export.
///
/// Logs go to stderr (stdout is reserved for command output and `--json`).
/// The server logs at info; CLI commands only warn, so a failing command's
/// stderr is its one error line. Never a secret, a password or a payload:
/// callers choose fields.
pub fn init(server: bool, log_format: &str) -> Result<Guard, String> {
    let filter = log_filter(server);
    let (format, otlp) = if server {
        (log_format.parse::<LogFormat>()?, settings::otlp_from_env()?)
    } else {
        (log_format.parse().unwrap_or(LogFormat::Text), None)
    };
    let Some(otlp) = otlp else {
        let logs = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
        match format {
            LogFormat::Text => logs.init(),
            LogFormat::Json => logs.event_format(json_log::JsonLines).init(),
        }
        return Ok(Guard(None));
    };
    let provider = provider(&otlp)?;
    let logs = match format {
        LogFormat::Text => tracing_subscriber::fmt::layer().with_writer(std::io::stderr).boxed(),
        LogFormat::Json => {
            tracing_subscriber::fmt::layer().with_writer(std::io::stderr).event_format(json_log::JsonLines).boxed()
        }
    };
    let spans = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("signet"))
        .with_location(false)
        .with_threads(false)
        .with_filter(Targets::new().with_target(domain::TRACE_TARGET, tracing::Level::TRACE));
    tracing_subscriber::registry().with(logs.with_filter(filter)).with(spans).init();
    ENABLED.store(true, Ordering::Relaxed);
    tracing::info!(endpoint = %otlp.shown, "exporting traces over OTLP/HTTP");
    Ok(Guard(Some(provider)))
}

/// `SIGNET_LOG` (or `RUST_LOG`, or the default), with the trace spans'
/// target switched off: they are never log lines, whatever it says.
fn log_filter(server: bool) -> EnvFilter {
    let default = if server { "info,sqlx=warn,sea_orm=warn,sea_orm_migration=warn" } else { "warn" };
    let filter = EnvFilter::try_from_env("SIGNET_LOG")
        .or_else(|_| EnvFilter::try_from_default_env())
        .unwrap_or_else(|_| EnvFilter::new(default));
    match format!("{}=off", domain::TRACE_TARGET).parse() {
        Ok(off) => filter.add_directive(off),
        Err(_) => filter,
    }
}

/// The batch exporter to `otlp`. `OTEL_SERVICE_NAME` names the service
/// (default `signet`); the SDK reads `OTEL_RESOURCE_ATTRIBUTES`,
/// `OTEL_TRACES_SAMPLER*`, `OTEL_BSP_*`, `OTEL_EXPORTER_OTLP_HEADERS` and
/// `OTEL_EXPORTER_OTLP_TIMEOUT` itself.
fn provider(otlp: &settings::Otlp) -> Result<SdkTracerProvider, String> {
    use opentelemetry_otlp::WithExportConfig;
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
        .with_endpoint(otlp.url.clone())
        .build()
        .map_err(|e| format!("OTEL_EXPORTER_OTLP_ENDPOINT: cannot start the OTLP exporter: {e}"))?;
    let mut resource = opentelemetry_sdk::Resource::builder()
        .with_attribute(opentelemetry::KeyValue::new("service.version", env!("CARGO_PKG_VERSION")));
    let named = std::env::var("OTEL_RESOURCE_ATTRIBUTES").is_ok_and(|a| a.contains("service.name="));
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() && !named {
        resource = resource.with_service_name("signet");
    }
    Ok(SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(resource.build()).build())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Free when off: under the log subscriber alone (no exporter) the trace
    /// spans are disabled at their call site, so nothing is built or
    /// recorded for them, while ordinary log lines still pass.
    #[test]
    fn without_an_exporter_the_trace_spans_are_disabled() {
        let logs = tracing_subscriber::fmt().with_env_filter(log_filter(true)).with_writer(std::io::sink).finish();
        tracing::subscriber::with_default(logs, || {
            let span = tracing::info_span!(target: domain::TRACE_TARGET, "webhook", outcome = tracing::field::Empty);
            assert!(span.is_disabled());
            assert_eq!(traceparent(&span), None);
            assert!(tracing::enabled!(tracing::Level::INFO), "log lines still pass");
        });
    }
}
