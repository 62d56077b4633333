//! Cross-cutting request guards.

use axum::{
    body::Body,
    extract::Request,
    middleware::Next,
    response::{IntoResponse, Response},
};
use http::{HeaderValue, Method, StatusCode, header};

/// Server functions under `/fn/` authenticate with the session cookie, so a
/// state-changing call must come from our own pages: its `Origin` must name
/// the host it was sent to. (`SameSite=Strict` already withholds the cookie
/// from cross-site requests; this is the second lock.)
pub async fn origin_check(req: Request, next: Next) -> Response {
    let mutating = !matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    if mutating && req.uri().path().starts_with("/fn/") {
        let host = req.headers().get(header::HOST).and_then(|h| h.to_str().ok());
        let origin = req.headers().get(header::ORIGIN).and_then(|o| o.to_str().ok());
        let same = match (origin, host) {
            (Some(o), Some(h)) => o.split_once("://").is_some_and(|(_, rest)| rest.trim_end_matches('/') == h),
            _ => false,
        };
        if !same {
            tracing::warn!(path = %req.uri().path(), "refused a state-changing request without a matching Origin");
            return (
                StatusCode::FORBIDDEN,
                axum::Json(serde_json::json!({
                    "error": "bad_origin",
                    "message": "cross-origin or Origin-less request refused",
                })),
            )
                .into_response();
        }
    }
    next.run(req).await
}

/// The nonce a rendered page's scripts carry. `security_headers` chooses it
/// and puts it in the page's policy; the router's Leptos context hands the
/// same value to the renderer (`page_nonce`), so header and page cannot
/// disagree, whatever path the rendered response takes.
#[derive(Clone)]
pub struct PageNonce(pub String);

/// The nonce chosen for this request, as the renderer's [`leptos::nonce::Nonce`].
/// Called from the Leptos context closure, where the request's parts are.
pub fn page_nonce() -> Option<leptos::nonce::Nonce> {
    let parts = leptos::prelude::use_context::<http::request::Parts>()?;
    parts.extensions.get::<PageNonce>().map(|n| leptos::nonce::Nonce::from_value(n.0.as_str()))
}

/// A rendered page's policy: scripts run only with this response's nonce
/// (Leptos puts it on its hydration scripts), so injected markup cannot
/// execute.
fn page_policy(nonce: &str) -> String {
    format!(
        "default-src 'self'; script-src 'nonce-{nonce}' 'strict-dynamic' 'wasm-unsafe-eval'; \
         style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; object-src 'none'; \
         frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
    )
}

/// Everything that is not a rendered page (JSON, assets, errors) runs no script.
const NO_SCRIPT_POLICY: &str = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/// Headers every response carries. Pages and API answers are never cached
/// (they may show a secret once); built assets under `/pkg` may be.
pub async fn security_headers(mut req: Request<Body>, next: Next) -> Response {
    let path = req.uri().path();
    let cacheable = path.starts_with("/pkg/");
    // Only the console renders pages: no nonce for webhooks, the API or assets.
    let renders = !(cacheable || path.starts_with("/hooks/") || path.starts_with("/api/"));
    let nonce = renders.then(|| leptos::nonce::Nonce::new().to_string());
    if let Some(n) = &nonce {
        req.extensions_mut().insert(PageNonce(n.clone()));
    }
    let mut res = next.run(req).await;
    let h = res.headers_mut();
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    // A handler's own policy stays (the evidence page's hash-based one).
    if !h.contains_key(header::CONTENT_SECURITY_POLICY) {
        let html =
            h.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.starts_with("text/html"));
        let policy = nonce.filter(|_| html).and_then(|n| HeaderValue::from_str(&page_policy(&n)).ok());
        h.insert(header::CONTENT_SECURITY_POLICY, policy.unwrap_or(HeaderValue::from_static(NO_SCRIPT_POLICY)));
    }
    if !cacheable {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    res
}

/// The most a console server function or an `/api/v1` call may send. Every
/// form and JSON body Signet takes is far smaller; webhooks (`/hooks`) have
/// their own limit, enforced while reading.
pub const CONTROL_BODY_LIMIT: usize = 64 * 1024;
/// A declared over-limit body up to this size is read and dropped before
/// the 413 (see `control_body_limit`).
const DRAIN_LIMIT: usize = 1024 * 1024;

/// Reads a `/fn/*` or `/api/v1/*` body up to [`CONTROL_BODY_LIMIT`] before
/// any handler sees it: a declared or streamed body over the limit gets 413
/// and is never buffered past it, so no handler can answer it with a 500.
pub async fn control_body_limit(req: Request<Body>, next: Next) -> Response {
    let path = req.uri().path();
    if !(path.starts_with("/fn/") || path.starts_with("/api/v1/")) {
        return next.run(req).await;
    }
    let declared =
        req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > CONTROL_BODY_LIMIT as u64) {
        // Read (and drop) a modest body first, so its sender gets to read
        // the 413 instead of a connection reset mid-upload; a larger one is
        // not worth reading and the connection simply closes.
        if declared.is_some_and(|n| n <= DRAIN_LIMIT as u64) {
            let _ = axum::body::to_bytes(req.into_body(), DRAIN_LIMIT).await;
        }
        return too_large();
    }
    let (parts, body) = req.into_parts();
    let bytes = match axum::body::to_bytes(body, CONTROL_BODY_LIMIT).await {
        Ok(b) => b,
        Err(e) if is_length_limit(&e) => return too_large(),
        Err(_) => {
            return (
                StatusCode::BAD_REQUEST,
                axum::Json(serde_json::json!({"error": "bad_body", "message": "the request body could not be read"})),
            )
                .into_response();
        }
    };
    // Server functions take exactly their arguments: a form field or query
    // parameter they do not declare is refused, as `/api/v1` refuses
    // unknown JSON fields (`app::api::forms`).
    if path_is_fn(&parts.uri) {
        let form = parts
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
        let unknown = app::api::forms::unknown_field(parts.uri.path(), parts.uri.query().unwrap_or("").as_bytes())
            .or_else(|| form.then(|| app::api::forms::unknown_field(parts.uri.path(), &bytes)).flatten());
        if let Some(name) = unknown {
            tracing::info!(path = %parts.uri.path(), "refused a server-function call with an unknown field");
            return (
                StatusCode::UNPROCESSABLE_ENTITY,
                axum::Json(serde_json::json!({
                    "error": "unknown_field",
                    "message": format!(
                        "unknown field `{}`; nothing was changed",
                        name.chars().take(64).collect::<String>()
                    ),
                })),
            )
                .into_response();
        }
    }
    next.run(Request::from_parts(parts, Body::from(bytes))).await
}

fn path_is_fn(uri: &http::Uri) -> bool {
    uri.path().starts_with("/fn/")
}

fn is_length_limit(e: &axum::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if err.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        source = err.source();
    }
    false
}

fn too_large() -> Response {
    (
        StatusCode::PAYLOAD_TOO_LARGE,
        axum::Json(serde_json::json!({
            "error": "body_too_large",
            "message": format!("request bodies here are limited to {} KiB", CONTROL_BODY_LIMIT / 1024),
        })),
    )
        .into_response()
}

/// `Strict-Transport-Security` on every answer when the public URL is https:
/// a browser that has seen Signet once never tries plain http for it again.
pub async fn hsts(on: bool, req: Request<Body>, next: Next) -> Response {
    let mut res = next.run(req).await;
    if on {
        res.headers_mut()
            .insert(header::STRICT_TRANSPORT_SECURITY, HeaderValue::from_static("max-age=31536000; includeSubDomains"));
    }
    res
}
