//! What the environment asks of logs and traces, validated before anything
//! starts: `SIGNET_LOG_FORMAT` and the standard `OTEL_*` variables. A bad
//! value is one line naming the variable; `serve` refuses to start with it
//! and `signet config check` reports it.

use std::str::FromStr;

/// How log lines are written on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines (the default).
    Text,
    /// One JSON object per line, with the trace and span id of the span it
    /// was written in while traces are exported.
    Json,
}

impl FromStr for LogFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "" | "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            other => Err(format!(
                "SIGNET_LOG_FORMAT: `{}` is not a log format; use text or json",
                other.chars().take(40).flat_map(char::escape_debug).collect::<String>()
            )),
        }
    }
}

impl LogFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            LogFormat::Text => "text",
            LogFormat::Json => "json",
        }
    }
}

/// Where spans go: the OTLP/HTTP traces URL (`…/v1/traces`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Otlp {
    /// The URL spans are posted to.
    pub url: String,
    /// The URL as shown (no query).
    pub shown: String,
}

/// A variable of the process environment (empty counts as unset).
fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// Whether spans are exported, and where, from the standard variables:
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as is) or
/// `OTEL_EXPORTER_OTLP_ENDPOINT` (`/v1/traces` appended). Neither set,
/// `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`: off. Only
/// OTLP over HTTP with protobuf is built in.
pub fn otlp_from_env() -> Result<Option<Otlp>, String> {
    if var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return Ok(None);
    }
    match var("OTEL_TRACES_EXPORTER").as_deref() {
        None | Some("otlp") => {}
        Some("none") => return Ok(None),
        Some(other) => {
            return Err(format!("OTEL_TRACES_EXPORTER: `{}` is not supported; use otlp or none", printable(other)));
        }
    }
    for name in ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"] {
        if let Some(p) = var(name).filter(|p| p != "http/protobuf") {
            return Err(format!("{name}: `{}` is not supported; Signet exports http/protobuf", printable(&p)));
        }
    }
    let (name, url, append) = match (var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), var("OTEL_EXPORTER_OTLP_ENDPOINT")) {
        (Some(url), _) => ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", url, false),
        (None, Some(url)) => ("OTEL_EXPORTER_OTLP_ENDPOINT", url, true),
        (None, None) => return Ok(None),
    };
    // The value is not repeated: an endpoint may carry a token.
    let shown = endpoint(&url, append).map_err(|why| format!("{name}: the OTLP endpoint {why}"))?;
    let url = url.trim();
    let url = if append { format!("{}/v1/traces", url.trim_end_matches('/')) } else { url.to_owned() };
    Ok(Some(Otlp { url, shown }))
}

/// Checks an OTLP/HTTP endpoint: an `http://` or `https://` URL with a host.
/// Returns the traces URL as shown (without user info or query).
fn endpoint(url: &str, append: bool) -> Result<String, &'static str> {
    let uri = http::Uri::from_str(url.trim()).map_err(|_| "is not a URL")?;
    let scheme = uri.scheme_str().ok_or("is not an http:// or https:// URL")?;
    if scheme != "http" && scheme != "https" {
        return Err("is not an http:// or https:// URL");
    }
    let host = uri.host().filter(|h| !h.is_empty()).ok_or("has no host")?;
    if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
        return Err("carries credentials in the URL; use OTEL_EXPORTER_OTLP_HEADERS");
    }
    let port = uri.port_u16().map(|p| format!(":{p}")).unwrap_or_default();
    let path = uri.path().trim_end_matches('/');
    let path = if append {
        format!("{path}/v1/traces")
    } else if path.is_empty() {
        "/".into()
    } else {
        path.into()
    };
    Ok(format!("{scheme}://{host}{port}{path}"))
}

fn printable(s: &str) -> String {
    s.chars().take(80).flat_map(char::escape_debug).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_http_urls_with_a_host() {
        assert_eq!(endpoint("http://127.0.0.1:4318", true).unwrap(), "http://127.0.0.1:4318/v1/traces");
        assert_eq!(endpoint("https://otel.example/", true).unwrap(), "https://otel.example/v1/traces");
        assert_eq!(endpoint("http://c:4318/v1/traces", false).unwrap(), "http://c:4318/v1/traces");
        assert_eq!(endpoint("localhost:4318", true), Err("is not an http:// or https:// URL"));
        assert_eq!(endpoint("ftp://collector", true), Err("is not an http:// or https:// URL"));
        assert_eq!(endpoint("not a url", true), Err("is not a URL"));
        assert!(endpoint("http://user:pw@collector:4318", true).is_err());
    }

    #[test]
    fn log_formats_are_text_or_json() {
        assert_eq!("json".parse::<LogFormat>(), Ok(LogFormat::Json));
        assert_eq!("text".parse::<LogFormat>(), Ok(LogFormat::Text));
        let err = "yaml\n".parse::<LogFormat>().unwrap_err();
        assert_eq!(err, "SIGNET_LOG_FORMAT: `yaml\\n` is not a log format; use text or json");
    }
}
