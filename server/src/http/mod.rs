//! The HTTP surface: health, `/api/v1`, the Leptos console and its server
//! functions, with the cross-cutting guards (Origin check, security headers).

pub mod api;
mod evidence_files;
mod guards;
pub mod hooks;
pub mod limits;
pub mod state;

use app::{App, shell};
use axum::{Router, routing::get};
use leptos::prelude::provide_context;
use leptos_axum::{LeptosRoutes, generate_route_list};
use state::AppState;

/// Request-level limits (`serve`'s flags; see `limits`).
#[derive(Debug, Clone, Copy)]
pub struct RequestLimits {
    pub request_timeout: std::time::Duration,
    pub hooks_in_flight: usize,
}

pub fn router(state: AppState, hooks: hooks::HookState, limits: RequestLimits) -> Router {
    let routes = generate_route_list(App);
    let options = state.leptos_options.clone();
    let hsts = state.hsts;
    // The server functions read the shared state from their context (the
    // 404 page renders the console too, so its handler provides it as well).
    let shared = state.shared.clone();
    // The page's script nonce is the one `security_headers` put in its policy.
    let provide_shared = move || {
        provide_context(shared.clone());
        if let Some(nonce) = guards::page_nonce() {
            provide_context(nonce);
        }
    };
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        // Not here: see `metrics_router`. Say where, for the operator.
        .route(
            "/metrics",
            get(|| async {
                let body = serde_json::json!({
                    "error": "not_found",
                    "message": "metrics are served on the metrics listener (SIGNET_METRICS_ADDR)",
                });
                (http::StatusCode::NOT_FOUND, axum::Json(body))
            }),
        )
        .nest_service("/hooks", {
            let in_flight = limits::InFlight::new(limits.hooks_in_flight);
            let metrics = hooks.metrics.clone();
            let limit = axum::middleware::from_fn(move |req, next| {
                limits::hooks_in_flight(in_flight.clone(), metrics.clone(), req, next)
            });
            hooks::routes(hooks).layer(limit)
        })
        .nest("/api/v1", api::routes())
        .route("/evidence/files/{digest}/{file}", get(evidence_files::file))
        .leptos_routes_with_context(&state, routes, provide_shared.clone(), move || shell(options.clone()))
        .fallback(leptos_axum::file_and_error_handler_with_context::<AppState, _>(provide_shared, shell))
        .layer(axum::middleware::from_fn(guards::control_body_limit))
        .layer(axum::middleware::from_fn(move |req, next| limits::request_timeout(limits.request_timeout, req, next)))
        .layer(axum::middleware::from_fn(guards::origin_check))
        .layer(axum::middleware::from_fn(guards::security_headers))
        .layer(axum::middleware::from_fn(move |req, next| guards::hsts(hsts, req, next)))
        .with_state(state)
}

/// `/metrics` alone, for the separate metrics listener (`SIGNET_METRICS_ADDR`):
/// its labels name every tenant and endpoint, so the public router has no
/// such route.
pub fn metrics_router(hooks: &hooks::HookState) -> Router {
    let (metrics, receiver) = (hooks.metrics.clone(), hooks.receiver.clone());
    Router::new().route(
        "/metrics",
        get(move || {
            let (metrics, receiver) = (metrics.clone(), receiver.clone());
            async move {
                metrics.sync_batches(receiver.batch_stats());
                metrics.sync_retries(receiver.claim_retries());
                metrics.sync_delivery_log(receiver.delivery_log_stats());
                metrics.sync_rollbacks(receiver.claim_rollbacks());
                metrics.sync_test_deliveries(receiver.test_deliveries());
                ([(http::header::CONTENT_TYPE, "text/plain; version=0.0.4")], metrics.render())
            }
        }),
    )
}

async fn readyz(axum::extract::State(state): axum::extract::State<AppState>) -> (http::StatusCode, &'static str) {
    match state.shared.db.ping().await {
        Ok(()) => (http::StatusCode::OK, "ready"),
        Err(e) => {
            tracing::warn!(error = %e, "readiness check: database unreachable");
            (http::StatusCode::SERVICE_UNAVAILABLE, "database unreachable")
        }
    }
}
