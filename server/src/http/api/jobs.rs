//! `GET /api/v1/jobs`: every background job at a glance (leases, the latest
//! KEK rewrap, the latest bulk releases).

use app::ssr::SharedState;
use axum::{Json, extract::State};
use domain::jobs::{self, StaleAfter};
use views::jobs_overview::JobsView;

use super::auth::{ApiError, ApiPrincipal, NoQuery};

#[utoipa::path(get, path = "/jobs", tag = "jobs", responses((status = 200, body = JobsView)))]
pub async fn list_jobs(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
) -> Result<Json<JobsView>, ApiError> {
    let stale = StaleAfter { kek_ms: st.kek_stale_ms, bulk_ms: st.bulk_stale_ms };
    Ok(Json(jobs::overview(&st.db, &p, &crate::jobs::LEASED, stale).await?))
}
