//! Issue 25 item 3: OpenTelemetry traces. The real binary exports its spans
//! over OTLP/HTTP to a receiver inside the test, which decodes them: one
//! span per webhook with its verification, claim (and the batch it joined)
//! and answer as children, ids and labels as attributes and never a body or
//! a secret; the relay's send continues the webhook's trace, is linked to
//! it, and sends `traceparent` to the notify URL. JSON log lines carry the
//! trace id. With tracing off nothing is sent. Bad settings refuse to start.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{
    Router,
    body::Bytes,
    extract::State,
    http::{HeaderMap, StatusCode, header},
    response::IntoResponse,
    routing::post,
};
use opentelemetry_proto::tonic::{
    collector::trace::v1::ExportTraceServiceRequest,
    common::v1::{AnyValue, any_value},
    trace::v1::Span,
};
use prost::Message;
use serde_json::Value;

use crate::{both_engines, support::Install};

/// An OTLP/HTTP traces receiver: keeps every request body as sent.
#[derive(Clone, Default)]
struct Collector {
    bodies: Arc<Mutex<Vec<Bytes>>>,
}

impl Collector {
    /// Starts it; returns the base URL (`OTEL_EXPORTER_OTLP_ENDPOINT`).
    async fn start(&self) -> String {
        async fn export(State(c): State<Collector>, headers: HeaderMap, body: Bytes) -> impl IntoResponse {
            assert_eq!(headers.get(header::CONTENT_TYPE).unwrap(), "application/x-protobuf");
            c.bodies.lock().unwrap().push(body);
            ([(header::CONTENT_TYPE, "application/x-protobuf")], Vec::<u8>::new())
        }
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let app = Router::new().route("/v1/traces", post(export)).with_state(self.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        url
    }

    /// Every exported byte, and every span with its service name.
    fn decoded(&self) -> (Vec<u8>, Vec<(String, Span)>) {
        let bodies = self.bodies.lock().unwrap().clone();
        let mut spans = Vec::new();
        for body in &bodies {
            let req = ExportTraceServiceRequest::decode(body.as_ref()).expect("an ExportTraceServiceRequest");
            for rs in req.resource_spans {
                let service = rs
                    .resource
                    .as_ref()
                    .and_then(|r| r.attributes.iter().find(|kv| kv.key == "service.name"))
                    .and_then(|kv| text(kv.value.as_ref()))
                    .unwrap_or_default();
                for ss in rs.scope_spans {
                    spans.extend(ss.spans.into_iter().map(|s| (service.clone(), s)));
                }
            }
        }
        (bodies.concat(), spans)
    }

    /// Waits until `done` holds for the spans exported so far.
    async fn wait_for(&self, what: &str, done: impl Fn(&[Span]) -> bool) -> (Vec<u8>, Vec<(String, Span)>) {
        for _ in 0..300 {
            let (bytes, spans) = self.decoded();
            if done(&spans.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>()) {
                return (bytes, spans);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let names: Vec<String> = self.decoded().1.into_iter().map(|(_, s)| s.name).collect();
        panic!("the collector never saw {what}; spans: {names:?}");
    }
}

fn text(v: Option<&AnyValue>) -> Option<String> {
    Some(match v?.value.as_ref()? {
        any_value::Value::StringValue(s) => s.clone(),
        any_value::Value::IntValue(i) => i.to_string(),
        any_value::Value::BoolValue(b) => b.to_string(),
        other => format!("{other:?}"),
    })
}

fn attr(s: &Span, key: &str) -> Option<String> {
    text(s.attributes.iter().find(|kv| kv.key == key)?.value.as_ref())
}

/// A relayed request: its `traceparent` and body.
type Relayed = (Option<String>, String);

/// A notify URL that records each request's `traceparent` and body.
#[derive(Clone, Default)]
struct Relay {
    seen: Arc<Mutex<Vec<Relayed>>>,
}

impl Relay {
    async fn start(&self) -> String {
        async fn notify(State(r): State<Relay>, headers: HeaderMap, body: String) -> StatusCode {
            let tp = headers.get("traceparent").and_then(|v| v.to_str().ok()).map(str::to_owned);
            r.seen.lock().unwrap().push((tp, body));
            StatusCode::OK
        }
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/notify", listener.local_addr().unwrap());
        let app = Router::new().route("/notify", post(notify)).with_state(self.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        url
    }

    async fn wait_for(&self, n: usize) -> Vec<Relayed> {
        for _ in 0..300 {
            if self.seen.lock().unwrap().len() >= n {
                return self.seen.lock().unwrap().clone();
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the relay saw fewer than {n} requests");
    }
}

/// Tenant `clinic` relaying to `notify`, endpoint `hooks`; the key's secret.
fn clinic(i: &Install, notify: &str) -> String {
    i.cli_json(&["tenant", "create", "clinic", "--notify-url", notify]);
    i.cli_json(&["endpoint", "create", "clinic", "hooks", "--scheme", "standard-webhooks"]);
    i.cli_json(&["key", "provision", "clinic", "hooks", "--approve-as", "rita"])["secret"].as_str().unwrap().to_owned()
}

fn otp_body(request: &str) -> String {
    format!(r#"{{"type":"otp.requested","data":{{"otp_request_id":"{request}","channel":"sms"}}}}"#)
}

/// The relay targets listen on loopback, which needs `SIGNET_RELAY_ALLOW`.
const RELAY: [(&str, &str); 2] = [("SIGNET_RELAY_ALLOW", "127.0.0.0/8"), ("SIGNET_OUTBOX_POLL_MS", "50")];

both_engines!(spans_are_exported_and_the_relay_continues_the_trace, async |i: &Install| {
    let relay = Relay::default();
    let notify = relay.start().await;
    let secret = clinic(i, &notify);
    let hooks = |s: &crate::support::Server| s.url("/hooks/clinic/hooks");

    // Off (the default): no trace context is sent to the relay.
    let s = i.serve_with(&RELAY);
    i.send_event(&hooks(&s), &secret, "evt-off", &otp_body("req-off"));
    let seen = relay.wait_for(1).await;
    assert_eq!(seen[0].0, None, "a traceparent was sent with tracing off");
    drop(s);

    let collector = Collector::default();
    let endpoint = collector.start().await;
    let mut env = RELAY.to_vec();
    env.extend([
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_SERVICE_NAME", "signet-under-test"),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ("SIGNET_LOG_FORMAT", "json"),
    ]);
    let s = i.serve_with(&env);
    let marker = "req-body-marker-7f3a";
    i.send_event(&hooks(&s), &secret, "evt-on", &otp_body(marker));
    // A forged delivery: refused, and logged (at info) inside its span.
    let forged = reqwest::Client::new()
        .post(hooks(&s))
        .header("webhook-id", "evt-forged")
        .header("webhook-timestamp", (std::time::UNIX_EPOCH.elapsed().unwrap().as_secs()).to_string())
        .header("webhook-signature", "v1,Zm9yZ2Vk")
        .body(otp_body("req-forged"))
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 401);
    let seen = relay.wait_for(2).await;
    let (relayed_tp, relayed_body) = seen.into_iter().find(|(_, body)| body.contains(marker)).expect("relayed");
    let relayed_tp = relayed_tp.expect("the relay got a traceparent");

    let (bytes, spans) = collector
        .wait_for("two webhooks and a send", |spans| {
            spans.iter().filter(|s| s.name == "webhook").count() >= 2 && spans.iter().any(|s| s.name == "outbox.send")
        })
        .await;
    assert!(spans.iter().all(|(service, _)| service == "signet-under-test"), "OTEL_SERVICE_NAME is the service");
    let spans: Vec<Span> = spans.into_iter().map(|(_, s)| s).collect();
    let webhook = spans
        .iter()
        .find(|s| s.name == "webhook" && attr(s, "outcome").as_deref() == Some("applied"))
        .expect("the applied webhook's span");
    assert!(webhook.parent_span_id.is_empty(), "the webhook span is a root");
    assert_eq!(attr(webhook, "tenant").as_deref(), Some("clinic"));
    assert_eq!(attr(webhook, "endpoint").as_deref(), Some("hooks"));
    assert_eq!(attr(webhook, "scheme").as_deref(), Some("standard-webhooks"));
    assert!(attr(webhook, "key_id").is_some_and(|k| !k.is_empty()));
    assert_eq!(attr(webhook, "http.response.status_code").as_deref(), Some("200"));
    let child = |name: &str| {
        spans
            .iter()
            .find(|s| s.name == name && s.parent_span_id == webhook.span_id)
            .unwrap_or_else(|| panic!("no {name} span under the webhook"))
    };
    let verify = child("verify");
    assert_eq!(attr(verify, "outcome").as_deref(), Some("verified"));
    assert_eq!(attr(verify, "scheme").as_deref(), Some("standard-webhooks"));
    assert_eq!(attr(verify, "key_id"), attr(webhook, "key_id"));
    let claim = child("claim");
    assert_eq!(attr(claim, "outcome").as_deref(), Some("applied"));
    assert_eq!(attr(claim, "path").as_deref(), Some("batch"));
    assert!(attr(claim, "batch").is_some() && attr(claim, "batch_size").as_deref() == Some("1"), "{claim:?}");
    assert_eq!(attr(child("answer"), "http.response.status_code").as_deref(), Some("200"));
    for s in [verify, claim, child("answer")] {
        assert_eq!(s.trace_id, webhook.trace_id);
    }

    // The relay's send: in the webhook's trace, linked to it; and the
    // traceparent the relay got names that trace and the send span.
    let send = spans.iter().find(|s| s.name == "outbox.send").unwrap();
    assert_eq!(send.trace_id, webhook.trace_id);
    assert_eq!(send.parent_span_id, webhook.span_id);
    assert!(send.links.iter().any(|l| l.trace_id == webhook.trace_id && l.span_id == webhook.span_id));
    assert_eq!(attr(send, "outcome").as_deref(), Some("delivered"));
    let trace_hex: String = webhook.trace_id.iter().map(|b| format!("{b:02x}")).collect();
    let send_hex: String = send.span_id.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(relayed_tp, format!("00-{trace_hex}-{send_hex}-01"));

    // The refused one: its own trace, with the reason.
    let refused = spans
        .iter()
        .find(|s| s.name == "webhook" && attr(s, "outcome").as_deref() == Some("verification_failed"))
        .expect("the forged webhook's span");
    assert_eq!(attr(refused, "http.response.status_code").as_deref(), Some("401"));
    assert_ne!(refused.trace_id, webhook.trace_id);

    // Never a body, a secret or the code the relay got.
    let code = serde_json::from_str::<Value>(&relayed_body).unwrap()["payload"]["code"].as_str().unwrap().to_owned();
    let exported = String::from_utf8_lossy(&bytes);
    for never in [marker, "req-forged", secret.as_str(), code.as_str(), "otp.requested", "Zm9yZ2Vk"] {
        assert!(!exported.contains(never), "exported spans contain {never:?}");
    }

    // JSON log lines: each parses; the forged delivery's carries its trace id.
    let output = s.output();
    let logs: Vec<Value> = output
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert!(logs.iter().all(|l| l["level"].is_string() && l["timestamp"].is_string()), "{output}");
    let text_lines = output.lines().filter(|l| !l.starts_with('{') && (l.contains("INFO") || l.contains("WARN")));
    assert_eq!(text_lines.count(), 0, "a text log line in JSON mode: {output}");
    let refused_hex: String = refused.trace_id.iter().map(|b| format!("{b:02x}")).collect();
    let line = logs
        .iter()
        .find(|l| l["message"] == "webhook not applied")
        .unwrap_or_else(|| panic!("no JSON line for the forged delivery: {output}"));
    assert_eq!(line["trace_id"], refused_hex.as_str(), "{line}");
    assert_eq!(line["fields"]["outcome"], "verification_failed", "{line}");
});

/// `serve` with `env`: must refuse to start with one line on stderr.
fn refuses(env: &[(&str, &str)]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = std::process::Command::new(crate::support::BIN);
    cmd.env_clear()
        .env("SIGNET_DATA_DIR", dir.path())
        .env("SIGNET_ADDR", "127.0.0.1:0")
        .env("SIGNET_METRICS_ADDR", "127.0.0.1:0")
        .envs(env.iter().copied())
        .arg("serve");
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{env:?}: started");
    assert_eq!(err.trim_end().lines().count(), 1, "{env:?}: one line: {err}");
    // config check reports the same problem.
    let check = std::process::Command::new(crate::support::BIN)
        .env_clear()
        .env("SIGNET_DATA_DIR", dir.path())
        .envs(env.iter().copied())
        .args(["config", "check"])
        .output()
        .unwrap();
    assert!(!check.status.success(), "{env:?}: config check passed");
    let problems = String::from_utf8_lossy(&check.stderr);
    assert!(problems.contains(err.trim_end().trim_start_matches("error: ")), "{env:?}: {problems}");
    err
}

#[test]
fn a_bad_otlp_endpoint_or_log_format_refuses_to_start() {
    for bad in ["localhost:4318", "ftp://collector:4318", "http://", "not a url"] {
        let err = refuses(&[("OTEL_EXPORTER_OTLP_ENDPOINT", bad)]);
        assert!(err.starts_with("error: OTEL_EXPORTER_OTLP_ENDPOINT: the OTLP endpoint "), "{bad}: {err}");
    }
    let err =
        refuses(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"), ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]);
    assert!(err.contains("OTEL_EXPORTER_OTLP_PROTOCOL") && err.contains("http/protobuf"), "{err}");
    let err = refuses(&[("SIGNET_LOG_FORMAT", "yaml")]);
    assert_eq!(err.trim_end(), "error: SIGNET_LOG_FORMAT: `yaml` is not a log format; use text or json");
    // A credential in the URL is refused, and never repeated.
    let err = refuses(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://user:hunter2@collector:4318")]);
    assert!(!err.contains("hunter2"), "{err}");
}
