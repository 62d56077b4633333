//! Tenants and endpoints.

use app::ssr::SharedState;
use axum::{
    Json,
    extract::{Path, State},
    http::StatusCode,
};
use domain::ids::named;
use domain::{
    onboarding::{self, TestRequest},
    registry::{
        endpoints::{self, EndpointPatch, NewEndpoint},
        event_key,
        tenants::{self, NewTenant, TenantPatch},
    },
};
use views::{
    onboarding::TestDeliveryView,
    registry::{EndpointView, EventKeyView, TenantView},
};

use super::auth::{ApiError, ApiJson, ApiPrincipal, ErrorBody, NoQuery, OptionalJson};
use super::params::{EndpointPath, TenantPath};

#[utoipa::path(get, path = "/tenants", tag = "tenants", responses((status = 200, body = [TenantView])))]
pub async fn list_tenants(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
) -> Result<Json<Vec<TenantView>>, ApiError> {
    Ok(Json(tenants::list(&st.db, &p).await?))
}

#[utoipa::path(post, path = "/tenants", tag = "tenants", request_body = NewTenant,
    responses((status = 201, body = TenantView), (status = 409, body = ErrorBody)))]
pub async fn create_tenant(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
    ApiJson(body): ApiJson<NewTenant>,
) -> Result<(StatusCode, Json<TenantView>), ApiError> {
    Ok((StatusCode::CREATED, Json(tenants::create(&st.db, &p, body).await?)))
}

#[utoipa::path(get, path = "/tenants/{tenant}", tag = "tenants", params(TenantPath),
    responses((status = 200, body = TenantView)))]
pub async fn get_tenant(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
    Path(TenantPath { tenant }): Path<TenantPath>,
) -> Result<Json<TenantView>, ApiError> {
    Ok(Json(tenants::get(&st.db, &p, &named(&tenant)?).await?))
}

#[utoipa::path(
    patch, path = "/tenants/{tenant}", tag = "tenants", params(TenantPath), request_body = TenantPatch,
    responses((status = 200, body = TenantView)),
)]
pub async fn update_tenant(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
    Path(TenantPath { tenant }): Path<TenantPath>,
    ApiJson(body): ApiJson<TenantPatch>,
) -> Result<Json<TenantView>, ApiError> {
    if body.name.is_none() && body.notify_url.is_none() {
        return Err(super::auth::nothing_to_change());
    }
    Ok(Json(tenants::update(&st.db, &p, &named(&tenant)?, body).await?))
}

#[utoipa::path(get, path = "/tenants/{tenant}/endpoints", tag = "endpoints", params(TenantPath),
    responses((status = 200, body = [EndpointView])))]
pub async fn list_endpoints(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
    Path(TenantPath { tenant }): Path<TenantPath>,
) -> Result<Json<Vec<EndpointView>>, ApiError> {
    Ok(Json(endpoints::list(&st.db, &p, &named(&tenant)?).await?))
}

#[utoipa::path(
    post, path = "/tenants/{tenant}/endpoints", tag = "endpoints", params(TenantPath),
    request_body = NewEndpoint,
    responses((status = 201, body = EndpointView), (status = 409, body = ErrorBody)),
)]
pub async fn create_endpoint(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
    Path(TenantPath { tenant }): Path<TenantPath>,
    ApiJson(body): ApiJson<NewEndpoint>,
) -> Result<(StatusCode, Json<EndpointView>), ApiError> {
    Ok((StatusCode::CREATED, Json(endpoints::create(&st.db, &p, &named(&tenant)?, body).await?)))
}

#[utoipa::path(get, path = "/tenants/{tenant}/endpoints/{endpoint}", tag = "endpoints",
    params(EndpointPath), responses((status = 200, body = EndpointView)))]
pub async fn get_endpoint(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
    Path(EndpointPath { tenant, endpoint }): Path<EndpointPath>,
) -> Result<Json<EndpointView>, ApiError> {
    Ok(Json(endpoints::get(&st.db, &p, &named(&tenant)?, &named(&endpoint)?).await?))
}

#[utoipa::path(patch, path = "/tenants/{tenant}/endpoints/{endpoint}", tag = "endpoints",
    params(EndpointPath), request_body = EndpointPatch,
    responses((status = 200, body = EndpointView), (status = 409, body = ErrorBody)))]
pub async fn update_endpoint(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
    Path(EndpointPath { tenant, endpoint }): Path<EndpointPath>,
    ApiJson(body): ApiJson<EndpointPatch>,
) -> Result<Json<EndpointView>, ApiError> {
    if body.event_types.is_none()
        && body.tolerance_secs.is_none()
        && body.max_body_bytes.is_none()
        && body.enabled.is_none()
    {
        return Err(super::auth::nothing_to_change());
    }
    Ok(Json(endpoints::update(&st.db, &p, &named(&tenant)?, &named(&endpoint)?, body).await?))
}

/// A change to an endpoint's compound event key.
#[derive(Debug, serde::Deserialize, utoipa::ToSchema)]
pub struct EventKeyChange {
    /// Envelope field paths (`type`, `occurred_at`, `tenant`, `data.<name>`),
    /// or `null` to quarantine events without an id again.
    #[schema(schema_with = domain::registry::event_key::fields_schema)]
    pub fields: Option<Vec<String>>,
    #[schema(schema_with = domain::text::reason_schema)]
    pub reason: String,
}

#[utoipa::path(get, path = "/tenants/{tenant}/endpoints/{endpoint}/event-key", tag = "endpoints",
    params(EndpointPath), responses((status = 200, body = EventKeyView)))]
pub async fn get_event_key(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
    Path(EndpointPath { tenant, endpoint }): Path<EndpointPath>,
) -> Result<Json<EventKeyView>, ApiError> {
    Ok(Json(event_key::get(&st.db, &p, &named(&tenant)?, &named(&endpoint)?).await?))
}

#[utoipa::path(put, path = "/tenants/{tenant}/endpoints/{endpoint}/event-key", tag = "endpoints",
    params(EndpointPath), request_body = EventKeyChange,
    responses((status = 200, body = EventKeyView)))]
pub async fn set_event_key(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
    Path(EndpointPath { tenant, endpoint }): Path<EndpointPath>,
    ApiJson(body): ApiJson<EventKeyChange>,
) -> Result<Json<EventKeyView>, ApiError> {
    Ok(Json(event_key::set(&st.db, &p, &named(&tenant)?, &named(&endpoint)?, body.fields, &body.reason).await?))
}

#[utoipa::path(
    post, path = "/tenants/{tenant}/endpoints/{endpoint}/test-delivery", tag = "endpoints",
    params(EndpointPath), request_body = TestRequest,
    responses(
        (status = 200, body = TestDeliveryView,
            description = "the gates' outcomes and the receiver's answer; nothing of the delivery is kept"),
        (status = 409, body = ErrorBody,
            description = "no active approved key (`no_active_key`), or only v1a public keys a provider uploaded, \
                           which Signet cannot sign with (`key_cannot_sign`)"),
    ),
)]
pub async fn test_delivery(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
    Path(EndpointPath { tenant, endpoint }): Path<EndpointPath>,
    OptionalJson(body): OptionalJson<TestRequest>,
) -> Result<Json<TestDeliveryView>, ApiError> {
    Ok(Json(
        onboarding::send_test(&st.db, &st.vault, &st.receiver, &p, &named(&tenant)?, &named(&endpoint)?, body).await?,
    ))
}
