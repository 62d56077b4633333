//! Received events (metadata only) and reminders.

use app::ssr::AppState;
use axum::{
    Json,
    extract::{Path, State},
};
use domain::events::{self, EventView, ReminderView};
use serde::Deserialize;

use super::auth::{ApiError, ApiPrincipal, ApiQuery, ErrorBody, NoQuery};

#[derive(Deserialize, utoipa::IntoParams)]
pub struct EventQuery {
    /// `applied` or `quarantined`.
    pub status: Option<String>,
    pub limit: Option<u64>,
}

#[utoipa::path(get, path = "/api/v1/tenants/{tenant}/events", tag = "events", params(("tenant" = String, Path), EventQuery),
    responses((status = 200, body = [EventView]), (status = 404, body = ErrorBody)))]
pub async fn list_events(
    State(st): State<AppState>,
    ApiPrincipal(p): ApiPrincipal,
    Path(tenant): Path<String>,
    ApiQuery(q): ApiQuery<EventQuery>,
) -> Result<Json<Vec<EventView>>, ApiError> {
    Ok(Json(events::list_events(&st.db, &p, &tenant, q.status.as_deref(), q.limit.unwrap_or(100)).await?))
}

#[utoipa::path(get, path = "/api/v1/tenants/{tenant}/reminders/{reminder_id}", tag = "events",
    params(("tenant" = String, Path), ("reminder_id" = String, Path)), responses((status = 200, body = ReminderView), (status = 404, body = ErrorBody)))]
pub async fn get_reminder(
    State(st): State<AppState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
    Path((tenant, reminder_id)): Path<(String, String)>,
) -> Result<Json<ReminderView>, ApiError> {
    Ok(Json(events::get_reminder(&st.db, &p, &tenant, &reminder_id).await?))
}
