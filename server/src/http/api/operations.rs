//! Quarantine triage, the outbox, and the per-tenant retry policy.

use app::ssr::SharedState;
use axum::{
    Json,
    extract::{Path, State},
};
use domain::ids::named;
use domain::{
    break_glass::{self, SetOutcome},
    outbox,
    quarantine::{self, bulk_release},
    retry_policy,
};
use serde::{Deserialize, Serialize};
use views::{
    outbox::{OutboxStatus, OutboxView},
    quarantine::{BulkReleaseView, QuarantineFilter, QuarantineList, QuarantineView, RevealedBody},
    retry_policy::{RetryPolicyView, RolloutOverrideView},
};

use super::auth::{ApiError, ApiJson, ApiPrincipal, ApiQuery, ErrorBody, NoBody, NoQuery};
use super::params::{IdPath, TenantPath};

#[derive(Deserialize, utoipa::ToSchema)]
pub struct ReasonBody {
    /// Why (required; recorded on the event and in the audit log).
    #[schema(schema_with = domain::text::reason_schema)]
    pub reason: String,
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DetailQuery {
    /// `true` to decrypt the body (on-call and admin only; audited).
    pub include_body: Option<bool>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct QuarantineDetail {
    #[serde(flatten)]
    pub entry: QuarantineView,
    /// Present only when asked for with `include_body=true`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<RevealedBody>,
}

#[utoipa::path(get, path = "/quarantine", tag = "quarantine", params(QuarantineFilter),
    responses((status = 200, body = QuarantineList)))]
pub async fn list_quarantine(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    ApiQuery(f): ApiQuery<QuarantineFilter>,
) -> Result<Json<QuarantineList>, ApiError> {
    // A bad limit is answered before the tenant, as it always was.
    domain::paging::limit(views::paging::LIST, f.limit)?;
    Ok(Json(quarantine::list(&st.db, &p, &quarantine::Filter::named(f)?).await?))
}

#[utoipa::path(get, path = "/quarantine/{id}", tag = "quarantine", params(IdPath, DetailQuery),
    responses((status = 200, body = QuarantineDetail)))]
pub async fn get_quarantine(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    Path(IdPath { id }): Path<IdPath>,
    ApiQuery(q): ApiQuery<DetailQuery>,
) -> Result<Json<QuarantineDetail>, ApiError> {
    let entry = quarantine::get(&st.db, &p, &id).await?;
    let body = match q.include_body {
        Some(true) => Some(quarantine::reveal_body(&st.db, &st.vault, &p, &id, &st.redaction).await?),
        _ => None,
    };
    Ok(Json(QuarantineDetail { entry, body }))
}

#[utoipa::path(
    post, path = "/quarantine/{id}/release", tag = "quarantine", params(IdPath), request_body = ReasonBody,
    responses(
        (status = 200, body = QuarantineView),
        (status = 409, body = ErrorBody, description = "already resolved, or the event still cannot apply"),
    ),
)]
pub async fn release(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
    Path(IdPath { id }): Path<IdPath>,
    ApiJson(body): ApiJson<ReasonBody>,
) -> Result<Json<QuarantineView>, ApiError> {
    Ok(Json(quarantine::release(&st.db, &st.vault, &p, &id, &body.reason).await?))
}

#[utoipa::path(
    post, path = "/quarantine/{id}/discard", tag = "quarantine", params(IdPath), request_body = ReasonBody,
    responses((status = 200, body = QuarantineView), (status = 409, body = ErrorBody)),
)]
pub async fn discard(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
    Path(IdPath { id }): Path<IdPath>,
    ApiJson(body): ApiJson<ReasonBody>,
) -> Result<Json<QuarantineView>, ApiError> {
    Ok(Json(quarantine::discard(&st.db, &p, &id, &body.reason).await?))
}

#[derive(Deserialize, utoipa::ToSchema)]
pub struct BulkReleaseBody {
    /// Which open entries (`status` and `limit` are ignored; the oldest
    /// 10,000 matching are taken).
    #[serde(default)]
    pub filter: QuarantineFilter,
    /// Why (required; recorded on every released event and in the audit log).
    #[schema(schema_with = domain::text::reason_schema)]
    pub reason: String,
}

/// Starts releasing every open entry matching the filter in the background;
/// poll the returned job for progress.
#[utoipa::path(
    post, path = "/quarantine/bulk-releases", tag = "quarantine", request_body = BulkReleaseBody,
    responses(
        (status = 202, body = BulkReleaseView),
        (status = 404, body = ErrorBody,
            description = "the filter names a tenant or endpoint that does not exist or is out of scope"),
        (status = 409, body = ErrorBody, description = "nothing matches"),
    ),
)]
pub async fn start_bulk_release(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
    ApiJson(body): ApiJson<BulkReleaseBody>,
) -> Result<(axum::http::StatusCode, Json<BulkReleaseView>), ApiError> {
    // A missing reason is answered before the filter's tenant, as it always was.
    domain::text::require_reason(&body.reason)?;
    let job = bulk_release::start(&st.db, &p, &quarantine::Filter::named(body.filter)?, &body.reason).await?;
    bulk_release::spawn(st.db.clone(), st.vault.clone(), p, job.id.clone(), &st.faults);
    Ok((axum::http::StatusCode::ACCEPTED, Json(job)))
}

#[utoipa::path(get, path = "/quarantine/bulk-releases", tag = "quarantine",
    responses((status = 200, body = Vec<BulkReleaseView>, description = "the latest 20, newest first")))]
pub async fn list_bulk_releases(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
) -> Result<Json<Vec<BulkReleaseView>>, ApiError> {
    Ok(Json(bulk_release::recent(&st.db, &p, 20, st.bulk_stale_ms).await?))
}

#[utoipa::path(get, path = "/quarantine/bulk-releases/{id}", tag = "quarantine", params(IdPath),
    responses((status = 200, body = BulkReleaseView)))]
pub async fn get_bulk_release(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
    Path(IdPath { id }): Path<IdPath>,
) -> Result<Json<BulkReleaseView>, ApiError> {
    Ok(Json(bulk_release::get(&st.db, &p, &id, st.bulk_stale_ms).await?))
}

/// Takes over an interrupted or failed bulk release and runs the rest.
#[utoipa::path(
    post, path = "/quarantine/bulk-releases/{id}/resume", tag = "quarantine", params(IdPath),
    responses(
        (status = 202, body = BulkReleaseView),
        (status = 409, body = ErrorBody, description = "still running, or finished"),
    ),
)]
pub async fn resume_bulk_release(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
    Path(IdPath { id }): Path<IdPath>,
    _: NoBody,
) -> Result<(axum::http::StatusCode, Json<BulkReleaseView>), ApiError> {
    Ok((
        axum::http::StatusCode::ACCEPTED,
        Json(bulk_release::resume(&st.db, &st.vault, &p, &id, st.bulk_stale_ms, &st.faults).await?),
    ))
}

/// Cancels a running, interrupted or failed bulk release for good: what it
/// released stays released, the rest stays in quarantine.
#[utoipa::path(
    post, path = "/quarantine/bulk-releases/{id}/cancel", tag = "quarantine", params(IdPath),
    responses(
        (status = 200, body = BulkReleaseView),
        (status = 409, body = ErrorBody, description = "finished, or already canceled"),
    ),
)]
pub async fn cancel_bulk_release(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
    Path(IdPath { id }): Path<IdPath>,
    _: NoBody,
) -> Result<Json<BulkReleaseView>, ApiError> {
    Ok(Json(bulk_release::cancel(&st.db, &p, &id, st.bulk_stale_ms).await?))
}

#[derive(Deserialize, utoipa::ToSchema)]
pub struct PolicyBody {
    #[schema(schema_with = domain::retry_policy::policy_schema)]
    pub policy: String,
    #[schema(schema_with = domain::text::reason_schema)]
    pub reason: String,
    /// Break-glass: when the rollout order refuses enabling, record a request
    /// (202) that a second person approves. Ignored when the order is met.
    #[serde(default)]
    #[schema(schema_with = domain::text::optional_reason_schema)]
    pub override_reason: Option<String>,
}

#[utoipa::path(get, path = "/tenants/{tenant}/retry-policy", tag = "retry-policy", params(TenantPath),
    responses((status = 200, body = RetryPolicyView)))]
pub async fn get_retry_policy(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
    Path(TenantPath { tenant }): Path<TenantPath>,
) -> Result<Json<RetryPolicyView>, ApiError> {
    Ok(Json(retry_policy::get(&st.db, &p, &named(&tenant)?).await?))
}

#[utoipa::path(
    put, path = "/tenants/{tenant}/retry-policy", tag = "retry-policy", params(TenantPath),
    request_body = PolicyBody,
    description = "Enabling is refused with 409 `rollout_order` (naming what is missing) unless a drill run passed \
        on this build within `SIGNET_ROLLOUT_DRILL_MAX_AGE_DAYS` and an approved bundle covers the tenant's live keys \
        at their current scope. Disabling is never refused for the rollout order. Break-glass: with \
        `override_reason`, a refused enabling answers 202 with a pending override that a second person approves \
        (`…/retry-policy/overrides/{id}/approve`); when the order is met the change is made as usual (200).",
    responses(
        (status = 200, body = RetryPolicyView),
        (status = 202, body = RolloutOverrideView, description = "an override request waits for a second person"),
        (status = 409, body = ErrorBody, description = "`rollout_order`, or `override_pending`"),
    ),
)]
pub async fn set_retry_policy(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
    Path(TenantPath { tenant }): Path<TenantPath>,
    ApiJson(body): ApiJson<PolicyBody>,
) -> Result<axum::response::Response, ApiError> {
    use axum::response::IntoResponse;
    let out = break_glass::set(
        &st.db,
        &st.rollout(),
        &p,
        &named(&tenant)?,
        retry_policy::parse(&body.policy)?,
        &body.reason,
        body.override_reason.as_deref(),
    )
    .await?;
    Ok(match out {
        SetOutcome::Changed(v) => Json(v).into_response(),
        SetOutcome::Requested(o) => (axum::http::StatusCode::ACCEPTED, Json(o)).into_response(),
    })
}

#[utoipa::path(post, path = "/tenants/{tenant}/retry-policy/rollback", tag = "retry-policy", params(TenantPath),
    request_body = ReasonBody, responses((status = 200, body = RetryPolicyView), (status = 409, body = ErrorBody)))]
pub async fn rollback_retry_policy(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
    Path(TenantPath { tenant }): Path<TenantPath>,
    ApiJson(body): ApiJson<ReasonBody>,
) -> Result<Json<RetryPolicyView>, ApiError> {
    Ok(Json(retry_policy::rollback(&st.db, &st.rollout(), &p, &named(&tenant)?, &body.reason).await?))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct OutboxQuery {
    pub tenant: Option<String>,
    /// `pending`, `sending`, `sent` or `dead`.
    #[param(schema_with = OutboxStatus::filter_schema)]
    pub status: Option<String>,
    /// 1–500, default 100.
    #[param(schema_with = views::paging::list_schema)]
    pub limit: Option<u64>,
}

#[utoipa::path(get, path = "/outbox", tag = "outbox", params(OutboxQuery),
    responses((status = 200, body = [OutboxView])))]
pub async fn list_outbox(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    ApiQuery(q): ApiQuery<OutboxQuery>,
) -> Result<Json<Vec<OutboxView>>, ApiError> {
    let limit = domain::paging::limit(views::paging::LIST, q.limit)?;
    let tenant = domain::ids::named_filter(q.tenant.as_deref())?;
    Ok(Json(outbox::list(&st.db, &p, tenant.as_ref(), q.status.as_deref(), limit).await?))
}

#[utoipa::path(
    post, path = "/outbox/{id}/retry", tag = "outbox", params(IdPath),
    responses(
        (status = 200, body = OutboxView),
        (status = 409, body = ErrorBody, description = "the intent is not dead"),
    ),
)]
pub async fn retry_outbox(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
    Path(IdPath { id }): Path<IdPath>,
    _: NoBody,
) -> Result<Json<OutboxView>, ApiError> {
    Ok(Json(outbox::retry(&st.db, &p, &id).await?))
}
