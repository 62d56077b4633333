//! `GET /api/v1/stats`: the dashboard's figures (rollups and live state).

use app::ssr::AppState;
use axum::{Json, extract::State};
use domain::ops::stats::{self, StatsView, Window};
use serde::Deserialize;

use super::auth::{ApiError, ApiPrincipal, ApiQuery, ErrorBody};

#[derive(Deserialize, utoipa::IntoParams)]
pub struct StatsQuery {
    /// A tenant slug; empty for every tenant the caller can see.
    pub tenant: Option<String>,
    /// `1h`, `24h` (default) or `7d`.
    pub window: Option<String>,
}

#[utoipa::path(get, path = "/api/v1/stats", tag = "stats", params(StatsQuery),
    responses((status = 200, body = StatsView), (status = 404, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn get_stats(
    State(st): State<AppState>,
    ApiPrincipal(p): ApiPrincipal,
    ApiQuery(q): ApiQuery<StatsQuery>,
) -> Result<Json<StatsView>, ApiError> {
    let window = Window::parse(q.window.as_deref())?;
    Ok(Json(stats::stats(&st.db, &p, q.tenant.as_deref(), window).await?))
}
