//! `POST /hooks/{tenant}/{endpoint}`: read the request, run the pipeline,
//! map the outcome to the contract's status table. Never logs a body or a
//! secret.

use std::{sync::Arc, time::Instant};

use axum::{
    Json, Router,
    body::Body,
    extract::{Path, State},
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
    routing::post,
};
use domain::{
    TRACE_TARGET,
    crypto::signature::HeaderSource,
    evidence::drill_fixture::DRILL_PREFIX,
    receiver::{self, Delivery, Outcome, Receipt, Receiver, Refusal, telemetry::Telemetry},
};

use tracing::{Instrument, field::Empty};

use super::limits::{self, BodyBudget, BodyReservation};
use crate::{drills::RunnerToken, metrics::Metrics};

/// What the receiver route needs.
#[derive(Clone)]
pub struct HookState {
    pub receiver: Arc<Receiver>,
    pub telemetry: Arc<Telemetry>,
    pub metrics: Arc<Metrics>,
    /// How long a webhook body may take to arrive (`SIGNET_BODY_TIMEOUT_SECS`).
    pub body_read: std::time::Duration,
    /// Lines about unknown paths are rationed: anyone can send those.
    pub unknown_log: Arc<LogBudget>,
    /// Body bytes held at once by all deliveries (`SIGNET_MAX_INFLIGHT_BODY_BYTES`).
    pub body_budget: Arc<BodyBudget>,
    /// Lines about deliveries refused for the body budget, rationed too.
    pub shed_log: Arc<LogBudget>,
    /// What the drill runner sends, to tell its deliveries from anyone
    /// else's to `/hooks/_drill…`.
    pub drill_runner: Arc<RunnerToken>,
    /// Lines about `/hooks/_drill…` requests the runner did not send.
    pub drill_log: Arc<LogBudget>,
}

/// At most [`LogBudget::LINES`] log lines per [`LogBudget::WINDOW`]; counts
/// what it held back so the next line can say so. Unknown `/hooks` paths
/// are chosen by whoever sends them, so their lines must not let a flood
/// through to the log.
#[derive(Default)]
pub struct LogBudget {
    state: std::sync::Mutex<Option<(Instant, u32, u64)>>,
}

impl LogBudget {
    pub const LINES: u32 = 20;
    pub const WINDOW: std::time::Duration = std::time::Duration::from_secs(10);

    /// `Some(held back since the last line)` when a line may be written.
    pub fn take(&self) -> Option<u64> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (started, used, held) = state.get_or_insert((Instant::now(), 0, 0));
        if started.elapsed() >= Self::WINDOW {
            (*started, *used) = (Instant::now(), 0);
        }
        if *used >= Self::LINES {
            *held += 1;
            return None;
        }
        *used += 1;
        Some(std::mem::take(held))
    }
}

/// A path segment as it may appear in a log line: at most 64 characters,
/// with control characters, quotes and backslashes escaped, so a path can
/// never forge a line or a field.
fn printable(segment: &str) -> String {
    segment.chars().take(64).flat_map(char::escape_debug).collect()
}

pub fn routes(state: HookState) -> Router {
    Router::new().route("/{tenant}/{endpoint}", post(receive)).with_state(state)
}

struct Headers(HeaderMap);

impl HeaderSource for Headers {
    fn header(&self, name: &str) -> Option<&[u8]> {
        self.0.get(name).map(HeaderValue::as_bytes)
    }
}

/// An HTTP request as the receiver's delivery: its body is read at gate 2,
/// within the endpoint's limit, the body timeout and the shared body
/// budget. The budget is held until the delivery is dropped, when the
/// pipeline is done with the body.
struct HttpDelivery {
    headers: Headers,
    body: Option<Body>,
    within: std::time::Duration,
    held: BodyReservation,
    /// The webhook span's `traceparent` (traces exported only).
    trace_context: Option<String>,
}

impl Delivery for HttpDelivery {
    type Headers = Headers;
    fn headers(&self) -> &Headers {
        &self.headers
    }
    async fn body(&mut self, limit: usize) -> Result<bytes::Bytes, Refusal> {
        let body = self.body.take().ok_or(Refusal::BodyIncomplete)?;
        match read_limited(body, limit, &self.headers.0, self.within, &mut self.held).await {
            Ok(bytes) => Ok(bytes),
            Err(BodyError::TooLarge) => Err(Refusal::BodyTooLarge),
            Err(BodyError::Incomplete) => Err(Refusal::BodyIncomplete),
            Err(BodyError::Overloaded) => Err(Refusal::Overloaded),
        }
    }
    fn trace_context(&self) -> Option<String> {
        self.trace_context.clone()
    }
}

async fn receive(
    State(st): State<HookState>,
    Path((tenant, endpoint)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    // The webhook's span (exported as a trace only; disabled and free
    // otherwise). Its attributes are ids and labels, never a body or secret.
    let span = tracing::info_span!(
        target: TRACE_TARGET, "webhook", otel.kind = "server", tenant = Empty, endpoint = Empty, scheme = Empty,
        key_id = Empty, outcome = Empty, reason = Empty, http.response.status_code = Empty
    );
    let trace_context = crate::otel::traceparent(&span);
    let res = handle(st, tenant, endpoint, headers, body, trace_context, &span).instrument(span.clone()).await;
    span.record("http.response.status_code", res.status().as_u16());
    res
}

async fn handle(
    st: HookState,
    tenant: String,
    endpoint: String,
    headers: HeaderMap,
    body: Body,
    trace_context: Option<String>,
    span: &tracing::Span,
) -> Response {
    let started = Instant::now();
    let from_runner = st.drill_runner.sent_with(&headers);
    let held = BodyReservation::new(st.body_budget.clone());
    let delivery =
        HttpDelivery { headers: Headers(headers), body: Some(body), within: st.body_read, held, trace_context };
    let Receipt { outcome, endpoint: ep, key_id } = match receiver::address(&tenant, &endpoint) {
        Some((t, e)) => receiver::receive(&st.receiver, &t, &e, delivery).await,
        None => Receipt::unknown_endpoint(),
    };
    if !span.is_disabled() {
        let (label, reason) = outcome.labels();
        span.record("tenant", printable(&tenant).as_str());
        span.record("endpoint", printable(&endpoint).as_str());
        if let Some(ep) = &ep {
            span.record("scheme", ep.scheme.as_str());
        }
        if let Some(key_id) = &key_id {
            span.record("key_id", key_id.as_str());
        }
        span.record("outcome", label);
        if !reason.is_empty() {
            span.record("reason", reason.as_str());
        }
    }
    // Shed like the in-flight limit: not a verdict on the request, so it
    // stays out of the tenant's figures.
    if outcome == Outcome::Refused(Refusal::Overloaded) {
        st.metrics.observe_shed("body_bytes");
        if let Some(held_back) = st.shed_log.take() {
            tracing::warn!(
                tenant = %printable(&tenant), endpoint = %printable(&endpoint), held_back,
                held_bytes = st.body_budget.used(),
                "webhook refused: the in-flight body budget is spent"
            );
        }
        return limits::overloaded("too many webhook body bytes in flight; retry shortly");
    }
    // Drill traffic (the synthetic tenant, and the unknown-tenant drill's
    // `_drill…` paths, which no real tenant can have) has its own counter and
    // never moves real tenants' figures, rollups or dashboards. The same
    // paths from anyone but the runner are counted apart and logged: nobody
    // else has a reason to send them.
    let drill = ep.as_ref().map_or(tenant.starts_with(DRILL_PREFIX), |e| e.synthetic);
    if drill && from_runner {
        st.metrics.observe_drill(&outcome);
        return respond(outcome);
    }
    if drill {
        st.metrics.observe_drill_foreign(&outcome);
        if let Some(held_back) = st.drill_log.take() {
            tracing::warn!(
                tenant = %printable(&tenant), endpoint = %printable(&endpoint), outcome = outcome.labels().0,
                held_back, "a request to the drill tenant's paths that the drill runner did not send"
            );
        }
        return respond(outcome);
    }
    st.telemetry.record(ep.as_deref(), &outcome, key_id.as_deref(), started.elapsed());
    st.metrics.observe(ep.as_deref(), &outcome, key_id.as_deref(), started.elapsed());
    let (label, reason) = outcome.labels();
    match &outcome {
        Outcome::Applied { .. } | Outcome::Duplicate { .. } => {
            let key_id = key_id.as_deref().unwrap_or("-");
            let (tenant, endpoint) = (printable(&tenant), printable(&endpoint));
            tracing::debug!(%tenant, %endpoint, key_id, outcome = label, "webhook");
        }
        Outcome::Refused(Refusal::UnknownEndpoint) => {
            if let Some(held_back) = st.unknown_log.take() {
                tracing::info!(
                    tenant = %printable(&tenant), endpoint = %printable(&endpoint), held_back,
                    "webhook to an unknown endpoint"
                );
            }
        }
        _ => tracing::info!(
            tenant = %printable(&tenant),
            endpoint = %printable(&endpoint),
            key_id = key_id.as_deref().unwrap_or("-"),
            outcome = label,
            reason = %reason,
            "webhook not applied"
        ),
    }
    respond(outcome)
}

/// At most this much of an oversized body is read (and discarded) before
/// answering 413, so the client can read the answer instead of seeing its
/// connection reset; beyond it the connection is simply closed.
const DRAIN_LIMIT: usize = 1024 * 1024;

enum BodyError {
    TooLarge,
    /// The client stopped sending (or was too slow); nothing is processed.
    Incomplete,
    /// The shared body budget has no room for this body; nothing more is read.
    Overloaded,
}

/// The first allocation for a body of unknown length.
const FIRST_CHUNK: usize = 16 * 1024;

/// Gate 2: reads the body, keeping at most `limit` bytes in memory. A
/// declared `Content-Length` over the limit is refused without keeping
/// anything; a streamed body is refused as soon as it crosses the limit.
///
/// Every byte of buffer is taken from the shared budget (`held`) before it
/// is allocated: a declared length at once, a streamed body as its buffer
/// grows (at most doubling, never past `limit`). Where the budget has no
/// room, the body is refused without reading on.
async fn read_limited(
    body: Body,
    limit: usize,
    headers: &HeaderMap,
    within: std::time::Duration,
    held: &mut BodyReservation,
) -> Result<bytes::Bytes, BodyError> {
    use http_body_util::BodyExt;
    let declared =
        headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    let mut too_large = declared.is_some_and(|n| n > limit as u64);
    let mut kept: Vec<u8> = Vec::new();
    if let Some(n) = declared.filter(|_| !too_large).map(|n| n as usize) {
        if !held.grow_to(n) {
            return Err(BodyError::Overloaded);
        }
        kept.reserve_exact(n);
    }
    let mut seen = 0usize;
    let mut body = body;
    let read = async {
        while let Some(frame) = body.frame().await {
            let data = match frame {
                Ok(f) => match f.into_data() {
                    Ok(d) => d,
                    Err(_) => continue,
                },
                Err(_) => return Err(BodyError::Incomplete),
            };
            seen += data.len();
            let wanted = kept.len() + data.len();
            if !too_large && wanted > limit {
                too_large = true;
                kept = Vec::new();
            }
            if too_large {
                if seen > DRAIN_LIMIT {
                    break;
                }
                continue;
            }
            if wanted > kept.capacity() {
                let grown = wanted.max(kept.capacity() * 2).max(FIRST_CHUNK).min(limit);
                if !held.grow_to(grown) {
                    return Err(BodyError::Overloaded);
                }
                kept.reserve_exact(grown - kept.len());
            }
            kept.extend_from_slice(&data);
        }
        Ok(())
    };
    let finished = tokio::time::timeout(within, read).await;
    if too_large {
        return Err(BodyError::TooLarge);
    }
    match finished {
        Ok(Ok(())) => Ok(bytes::Bytes::from(kept)),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(BodyError::Incomplete),
    }
}

/// The contract's answer (docs/contract.md §3; the table is `Outcome::status` and
/// `Outcome::body`), with `Retry-After` on 503.
fn respond(outcome: Outcome) -> Response {
    let status = StatusCode::from_u16(outcome.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let span = tracing::info_span!(target: TRACE_TARGET, "answer", http.response.status_code = status.as_u16());
    let _entered = span.enter();
    let mut res = (status, Json(outcome.body())).into_response();
    if matches!(outcome, Outcome::Unavailable) {
        res.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_segments_cannot_forge_log_lines() {
        let forged = "x\nINFO signet: login ok user=admin\r\t\"\\\u{1b}[31m";
        let shown = printable(forged);
        assert!(!shown.chars().any(char::is_control), "{shown:?}");
        assert!(shown.starts_with("x\\nINFO"), "{shown:?}");
        assert_eq!(printable(&"a".repeat(500)).len(), 64);
    }

    #[test]
    fn the_log_budget_holds_back_a_flood_and_counts_it() {
        let budget = LogBudget::default();
        let written = (0..1000).filter(|_| budget.take().is_some()).count();
        assert_eq!(written, LogBudget::LINES as usize);
        let held = budget.state.lock().unwrap().map(|(_, _, held)| held);
        assert_eq!(held, Some(1000 - u64::from(LogBudget::LINES)));
    }
}
