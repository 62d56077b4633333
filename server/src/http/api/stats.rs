//! `GET /api/v1/stats`: the dashboard's figures (rollups and live state).

use app::ssr::SharedState;
use axum::{Json, extract::State};
use domain::stats::{self, Window};
use serde::Deserialize;
use views::stats::StatsView;

use super::auth::{ApiError, ApiPrincipal, ApiQuery};

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct StatsQuery {
    /// A tenant slug; empty for every tenant the caller can see.
    pub tenant: Option<String>,
    /// `1h`, `24h` (default) or `7d`.
    #[param(schema_with = Window::schema)]
    pub window: Option<String>,
}

#[utoipa::path(get, path = "/stats", tag = "stats", params(StatsQuery),
    responses((status = 200, body = StatsView)))]
pub async fn get_stats(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    ApiQuery(q): ApiQuery<StatsQuery>,
) -> Result<Json<StatsView>, ApiError> {
    let window = Window::parse(q.window.as_deref())?;
    let tenant = domain::ids::named_filter(q.tenant.as_deref())?;
    Ok(Json(stats::stats(&st.db, &p, tenant.as_ref(), window).await?))
}
