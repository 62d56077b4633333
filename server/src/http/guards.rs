//! Cross-cutting request guards.

use axum::{
    body::Body,
    extract::Request,
    middleware::Next,
    response::{IntoResponse, Response},
};
use http::{header, HeaderValue, Method, StatusCode};

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
                axum::Json(serde_json::json!({"error": "bad_origin", "message": "cross-origin or Origin-less request refused"})),
            )
                .into_response();
        }
    }
    next.run(req).await
}

/// Headers every response carries. Pages and API answers are never cached
/// (they may show a secret once); built assets under `/pkg` may be.
pub async fn security_headers(req: Request<Body>, next: Next) -> Response {
    let cacheable = req.uri().path().starts_with("/pkg/");
    let mut res = next.run(req).await;
    let h = res.headers_mut();
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    // Rendered pages set their own nonce-based policy (app::ssr::set_page_csp);
    // everything else (JSON, assets, errors) gets one that runs no script.
    if !h.contains_key(header::CONTENT_SECURITY_POLICY) {
        h.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static("default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"),
        );
    }
    if !cacheable {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    res
}
