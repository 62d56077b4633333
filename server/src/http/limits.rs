//! Request-level limits (the connection-level ones are in `listen`).

use std::{sync::Arc, time::Duration};

use axum::{
    Json,
    extract::Request,
    middleware::Next,
    response::{IntoResponse, Response},
};
use http::{HeaderValue, StatusCode, header};
use tokio::sync::Semaphore;

/// Answers 503 with `Retry-After` when a request is not answered within
/// `limit`. A webhook cut off here may still have committed; the provider's
/// retry then answers `duplicate`, so nothing is applied twice.
pub async fn request_timeout(limit: Duration, req: Request, next: Next) -> Response {
    match tokio::time::timeout(limit, next.run(req)).await {
        Ok(res) => res,
        Err(_) => {
            tracing::warn!(limit_secs = limit.as_secs(), "request timed out");
            unavailable("timeout", "the request took too long; retry later")
        }
    }
}

/// At most this many `/hooks` deliveries are processed at once; the rest
/// are told to come back (503 `Retry-After: 1`) rather than queued without
/// bound. Providers retry 5xx answers by design.
#[derive(Clone)]
pub struct InFlight(Arc<Semaphore>);

impl InFlight {
    pub fn new(limit: usize) -> Self {
        InFlight(Arc::new(Semaphore::new(limit.max(1))))
    }
}

pub async fn hooks_in_flight(limit: InFlight, req: Request, next: Next) -> Response {
    let Ok(_slot) = limit.0.try_acquire_owned() else {
        tracing::warn!("webhook refused: too many in flight");
        let mut res = unavailable("overloaded", "too many webhooks in flight; retry shortly");
        res.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        return res;
    };
    next.run(req).await
}

fn unavailable(code: &str, message: &str) -> Response {
    let mut res =
        (StatusCode::SERVICE_UNAVAILABLE, Json(serde_json::json!({"error": code, "message": message}))).into_response();
    res.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
    res
}
