//! Break-glass for the rollout order: the tenant's override requests and a
//! second person's decision (`domain::break_glass`). The request itself is
//! `PUT /tenants/{tenant}/retry-policy` with `override_reason`.

use app::ssr::SharedState;
use axum::{
    Json,
    extract::{Path, State},
};
use domain::break_glass;
use domain::ids::named;
use views::retry_policy::RolloutOverrideView;

use super::auth::{ApiError, ApiJson, ApiPrincipal, ErrorBody, NoQuery, OptionalJson};
use super::keys::{DecisionBody, RejectBody};
use super::params::{OverridePath, TenantPath};

#[utoipa::path(get, path = "/tenants/{tenant}/retry-policy/overrides", tag = "retry-policy",
    params(TenantPath),
    responses((status = 200, body = Vec<RolloutOverrideView>,
        description = "the tenant's break-glass requests, newest first (at most 50)")))]
pub async fn list_overrides(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
    Path(TenantPath { tenant }): Path<TenantPath>,
) -> Result<Json<Vec<RolloutOverrideView>>, ApiError> {
    Ok(Json(break_glass::list(&st.db, &p, &named(&tenant)?).await?))
}

/// A second person approves a pending override: retries are enabled as a
/// new policy version recording it.
#[utoipa::path(
    post, path = "/tenants/{tenant}/retry-policy/overrides/{id}/approve", tag = "retry-policy",
    params(OverridePath), request_body = DecisionBody,
    responses(
        (status = 200, body = RolloutOverrideView),
        (status = 403, body = ErrorBody, description = "`self_approval`: the requester cannot approve it"),
        (status = 409, body = ErrorBody, description = "`override_decided` or `override_expired`"),
    ),
)]
pub async fn approve_override(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
    Path(OverridePath { tenant, id }): Path<OverridePath>,
    OptionalJson(body): OptionalJson<DecisionBody>,
) -> Result<Json<RolloutOverrideView>, ApiError> {
    let comment = body.comment.unwrap_or_default();
    Ok(Json(break_glass::approve(&st.db, &p, &named(&tenant)?, &id, None, &comment).await?))
}

#[utoipa::path(
    post, path = "/tenants/{tenant}/retry-policy/overrides/{id}/reject", tag = "retry-policy",
    params(OverridePath), request_body = RejectBody,
    responses(
        (status = 200, body = RolloutOverrideView),
        (status = 409, body = ErrorBody, description = "`override_decided` or `override_expired`"),
    ),
)]
pub async fn reject_override(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
    Path(OverridePath { tenant, id }): Path<OverridePath>,
    ApiJson(body): ApiJson<RejectBody>,
) -> Result<Json<RolloutOverrideView>, ApiError> {
    Ok(Json(break_glass::reject(&st.db, &p, &named(&tenant)?, &id, None, &body.comment).await?))
}
