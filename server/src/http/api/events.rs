//! Received events (metadata only) and reminders.

use app::ssr::SharedState;
use axum::{
    Json,
    extract::{Path, State},
};
use domain::events;
use domain::{DomainError, ids::named};
use serde::Deserialize;
use views::events::{EventStory, EventView, ReminderView};
use views::ids::EventId;

use super::auth::{ApiError, ApiPrincipal, ApiQuery, NoQuery};
use super::params::{EventPath, ReminderPath, TenantPath};

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EventQuery {
    /// `applied`, `quarantined` or `stale_transition`.
    #[param(schema_with = views::events::ClaimOutcome::filter_schema)]
    pub status: Option<String>,
    /// 1–500, default 100.
    #[param(schema_with = views::paging::list_schema)]
    pub limit: Option<u64>,
}

#[utoipa::path(get, path = "/tenants/{tenant}/events", tag = "events", params(TenantPath, EventQuery),
    responses((status = 200, body = [EventView])))]
pub async fn list_events(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    Path(TenantPath { tenant }): Path<TenantPath>,
    ApiQuery(q): ApiQuery<EventQuery>,
) -> Result<Json<Vec<EventView>>, ApiError> {
    let limit = domain::paging::limit(views::paging::LIST, q.limit)?;
    Ok(Json(events::list_events(&st.db, &p, &named(&tenant)?, q.status.as_deref(), limit).await?))
}

#[utoipa::path(get, path = "/tenants/{tenant}/reminders/{reminder_id}", tag = "events",
    params(ReminderPath), responses((status = 200, body = ReminderView)))]
pub async fn get_reminder(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
    Path(ReminderPath { tenant, reminder_id }): Path<ReminderPath>,
) -> Result<Json<ReminderView>, ApiError> {
    Ok(Json(events::get_reminder(&st.db, &p, &named(&tenant)?, &reminder_id).await?))
}

#[utoipa::path(get, path = "/tenants/{tenant}/endpoints/{endpoint}/events/{event_id}", tag = "events",
    params(EventPath), responses((status = 200, body = EventStory)))]
pub async fn get_event_story(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
    Path(EventPath { tenant, endpoint, event_id }): Path<EventPath>,
) -> Result<Json<EventStory>, ApiError> {
    // An event id outside its rule is 422 (`invalid_event_id`), checked
    // before the names are looked up.
    let event_id = EventId::parse(event_id).map_err(DomainError::from)?;
    Ok(Json(events::story::story(&st.db, &st.vault, &p, &named(&tenant)?, &named(&endpoint)?, &event_id).await?))
}
