//! Retention decisions and redelivery horizons (the evidence of what Signet
//! keeps, and for how long).

use app::ssr::SharedState;
use axum::{
    Json,
    extract::{Path, State},
};
use domain::ids::named;
use domain::retention::{self, RetentionChange};
use serde::Deserialize;
use views::retention::{HorizonView, RetentionOverview, RetentionView};

use super::auth::{ApiError, ApiJson, ApiPrincipal, ErrorBody, NoQuery};
use super::params::{EndpointPath, SchemePath};

#[utoipa::path(get, path = "/retention", tag = "retention",
    responses((status = 200, body = RetentionOverview)))]
pub async fn overview(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
) -> Result<Json<RetentionOverview>, ApiError> {
    Ok(Json(retention::overview(&st.db, &p).await?))
}

#[utoipa::path(get, path = "/tenants/{tenant}/endpoints/{endpoint}/retention", tag = "retention",
    params(EndpointPath),
    responses((status = 200, body = RetentionView)))]
pub async fn get_retention(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
    Path(EndpointPath { tenant, endpoint }): Path<EndpointPath>,
) -> Result<Json<RetentionView>, ApiError> {
    Ok(Json(retention::get(&st.db, &p, &named(&tenant)?, &named(&endpoint)?).await?))
}

#[utoipa::path(
    put, path = "/tenants/{tenant}/endpoints/{endpoint}/retention", tag = "retention", params(EndpointPath),
    request_body = RetentionChange,
    responses(
        (status = 200, body = RetentionView),
        (status = 422, body = ErrorBody,
            description = "below the redelivery horizon (`below_redelivery_horizon`), below the scheme's manual \
                           resend window without `accept_risk: true` (`below_manual_resend`), or a body kept \
                           longer than its claim"),
    ),
)]
pub async fn set_retention(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
    Path(EndpointPath { tenant, endpoint }): Path<EndpointPath>,
    ApiJson(change): ApiJson<RetentionChange>,
) -> Result<Json<RetentionView>, ApiError> {
    Ok(Json(retention::set(&st.db, &p, &named(&tenant)?, &named(&endpoint)?, &change).await?))
}

#[derive(Deserialize, utoipa::ToSchema)]
pub struct HorizonBody {
    #[schema(schema_with = domain::retention::horizon_schema)]
    #[serde(deserialize_with = "views::integral::integer")]
    pub horizon_secs: i64,
    #[schema(schema_with = domain::text::reason_schema)]
    pub reason: String,
}

#[utoipa::path(
    put, path = "/retention/horizons/{scheme}", tag = "retention", params(SchemePath),
    request_body = HorizonBody,
    responses(
        (status = 200, body = HorizonView),
        (status = 409, body = ErrorBody, description = "an endpoint keeps claims for less than the new horizon"),
    ),
)]
pub async fn set_horizon(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
    Path(SchemePath { scheme }): Path<SchemePath>,
    ApiJson(body): ApiJson<HorizonBody>,
) -> Result<Json<HorizonView>, ApiError> {
    Ok(Json(retention::set_horizon(&st.db, &p, &scheme, body.horizon_secs, &body.reason).await?))
}
