//! Signing keys. A secret appears only in the response that creates it; a
//! key made from a provider's `v1a` public key has none.

use app::ssr::SharedState;
use axum::{
    Json,
    extract::{Path, State},
    http::StatusCode,
};
use domain::ids::named;
use domain::{
    DomainError,
    auth::Principal,
    registry::keys::{self, Approval, KeyFilter, NewCredential, ProvisionRequest, ProvisionedKey},
};
use serde::{Deserialize, Serialize};
use views::keys::{KeyStatus, KeyView};

use super::auth::{ApiError, ApiJson, ApiPrincipal, ApiQuery, ErrorBody, NoQuery, OptionalJson};
use super::params::{EndpointPath, KeyPath};

/// A new key with its secret: the only time the secret is shown.
#[derive(Serialize, utoipa::ToSchema)]
pub struct CreatedKey {
    #[serde(flatten)]
    pub key: KeyView,
    /// `whsec_…`: store it now; it is never shown again. Absent for a key
    /// made from a `public_key`: Signet holds nothing secret for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

impl From<ProvisionedKey> for CreatedKey {
    fn from(k: ProvisionedKey) -> Self {
        CreatedKey { secret: k.secret.as_ref().map(|s| s.expose().to_owned()), key: k.key }
    }
}

fn credential(public_key: Option<String>) -> Option<NewCredential> {
    public_key.map(NewCredential::PublicKey)
}

#[derive(Deserialize, Default, utoipa::ToSchema)]
pub struct ProvisionBody {
    // The request's fields, spelled out rather than flattened: a flattened
    // struct would swallow unknown fields before the strict check sees them.
    #[schema(schema_with = domain::registry::keys::person_schema)]
    pub owner: Option<String>,
    #[schema(schema_with = domain::registry::keys::person_schema)]
    pub rotation_owner: Option<String>,
    /// Narrower than the endpoint's types; omitted: the endpoint's types.
    #[schema(schema_with = domain::registry::optional_event_types_schema)]
    pub event_types: Option<Vec<String>>,
    /// A standard-webhooks `v1a` credential: the provider's Ed25519 public
    /// key, `whpk_` + base64 of its 32 bytes. Stored in clear, instead of an
    /// HMAC secret; the key then verifies `v1a` signatures only. Not a
    /// valid Ed25519 public key: 422 `invalid_public_key`.
    #[serde(default)]
    #[schema(schema_with = domain::registry::keys::public_key_schema)]
    pub public_key: Option<String>,
    /// Approve the scope now (reviewers and admins only), recorded as
    /// approved by `reviewer`, who must not be the caller (four eyes).
    #[serde(default)]
    pub approve: bool,
    /// The reviewer who approved the scope; required with `approve`.
    #[serde(default)]
    #[schema(schema_with = domain::registry::keys::person_schema)]
    pub reviewer: Option<String>,
    #[serde(default)]
    #[schema(schema_with = domain::registry::keys::comment_schema)]
    pub comment: Option<String>,
}

#[derive(Deserialize, Default, utoipa::ToSchema)]
pub struct DecisionBody {
    #[serde(default)]
    #[schema(schema_with = domain::registry::keys::comment_schema)]
    pub comment: Option<String>,
}

/// A rejection says why.
#[derive(Deserialize, utoipa::ToSchema)]
pub struct RejectBody {
    #[schema(schema_with = domain::registry::keys::required_comment_schema)]
    pub comment: String,
}

#[derive(Deserialize, Default, utoipa::ToSchema)]
pub struct RotateBody {
    /// How long the old key keeps working once the new one is active
    /// (60–604800 s; default 86400).
    #[schema(schema_with = overlap_schema)]
    #[serde(default, deserialize_with = "views::integral::optional")]
    pub overlap_secs: Option<i64>,
    /// The replacement's `v1a` public key (`whpk_…`). Required to rotate an
    /// Ed25519 key (409 `public_key_required` without it); given for an
    /// HMAC key, the replacement is an Ed25519 key and `v1` and `v1a` both
    /// verify during the overlap.
    #[serde(default)]
    #[schema(schema_with = domain::registry::keys::public_key_schema)]
    pub public_key: Option<String>,
    /// As for provisioning: approve now, recorded under another reviewer.
    #[serde(default)]
    pub approve: bool,
    #[serde(default)]
    #[schema(schema_with = domain::registry::keys::person_schema)]
    pub reviewer: Option<String>,
    #[serde(default)]
    #[schema(schema_with = domain::registry::keys::comment_schema)]
    pub comment: Option<String>,
}

fn overlap_schema() -> utoipa::openapi::Object {
    use domain::registry::keys::{MAX_OVERLAP_SECS, MIN_OVERLAP_SECS};
    views::openapi::nullable(views::openapi::integer(MIN_OVERLAP_SECS, MAX_OVERLAP_SECS))
}

#[derive(Deserialize, utoipa::ToSchema)]
pub struct RevokeBody {
    #[schema(schema_with = domain::registry::keys::required_comment_schema)]
    pub reason: String,
}

#[derive(Deserialize, utoipa::ToSchema)]
pub struct ScopeBody {
    #[schema(schema_with = domain::registry::event_types_schema)]
    pub event_types: Vec<String>,
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct KeyQuery {
    pub tenant: Option<String>,
    #[param(schema_with = KeyStatus::filter_schema)]
    pub status: Option<String>,
}

/// Without a named reviewer the caller is the reviewer, which the domain's
/// four-eyes rule refuses (403 `self_approval`). A reviewer or comment is
/// checked even without `approve`, so a bad one is never silently dropped.
fn approval(
    p: &Principal,
    approve: bool,
    reviewer: Option<String>,
    comment: Option<String>,
    what: &str,
) -> Result<Approval, ApiError> {
    if let Some(r) = &reviewer {
        keys::validate_person("reviewer", r)?;
    }
    if let Some(c) = &comment {
        keys::validate_comment("comment", c, false)?;
    }
    Ok(if approve {
        Approval::ApproveAs {
            reviewer: reviewer.unwrap_or_else(|| p.actor.name().to_owned()),
            comment: comment.unwrap_or_else(|| format!("approved at {what} via API")),
        }
    } else {
        Approval::Pending
    })
}

#[utoipa::path(get, path = "/tenants/{tenant}/endpoints/{endpoint}/keys", tag = "keys",
    params(EndpointPath), responses((status = 200, body = [KeyView])))]
pub async fn list_endpoint_keys(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
    Path(EndpointPath { tenant, endpoint }): Path<EndpointPath>,
) -> Result<Json<Vec<KeyView>>, ApiError> {
    let (tenant, endpoint) = (named(&tenant)?, named(&endpoint)?);
    domain::registry::endpoints::get(&st.db, &p, &tenant, &endpoint).await?;
    let filter = KeyFilter { tenant: Some(tenant), endpoint: Some(endpoint), status: None };
    Ok(Json(keys::list(&st.db, &p, &filter).await?))
}

#[utoipa::path(post, path = "/tenants/{tenant}/endpoints/{endpoint}/keys", tag = "keys",
    params(EndpointPath), request_body = ProvisionBody,
    responses((status = 201, body = CreatedKey)))]
pub async fn provision(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
    Path(EndpointPath { tenant, endpoint }): Path<EndpointPath>,
    OptionalJson(body): OptionalJson<ProvisionBody>,
) -> Result<(StatusCode, Json<CreatedKey>), ApiError> {
    let approval = approval(&p, body.approve, body.reviewer, body.comment, "provisioning")?;
    let k = keys::provision(
        &st.db,
        &st.vault,
        &p,
        &named(&tenant)?,
        &named(&endpoint)?,
        ProvisionRequest {
            owner: body.owner,
            rotation_owner: body.rotation_owner,
            event_types: body.event_types,
            credential: credential(body.public_key).unwrap_or_default(),
        },
        approval,
    )
    .await?;
    Ok((StatusCode::CREATED, Json(k.into())))
}

#[utoipa::path(get, path = "/keys", tag = "keys", params(KeyQuery), responses((status = 200, body = [KeyView])))]
pub async fn list_keys(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    ApiQuery(q): ApiQuery<KeyQuery>,
) -> Result<Json<Vec<KeyView>>, ApiError> {
    let status = match q.status.as_deref().filter(|s| !s.is_empty()) {
        Some(s) => Some(
            KeyStatus::parse(s)
                .ok_or_else(|| DomainError::invalid("invalid_status", format!("unknown key status {s:?}")))?,
        ),
        None => None,
    };
    let tenant = domain::ids::named_filter(q.tenant.as_deref())?;
    Ok(Json(keys::list(&st.db, &p, &KeyFilter { tenant, endpoint: None, status }).await?))
}

#[utoipa::path(get, path = "/keys/{key_id}", tag = "keys", params(KeyPath),
    responses((status = 200, body = KeyView)))]
pub async fn get_key(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
    Path(KeyPath { key_id }): Path<KeyPath>,
) -> Result<Json<KeyView>, ApiError> {
    Ok(Json(keys::get(&st.db, &p, &named(&key_id)?).await?))
}

/// Changes the key's event types; the key then needs approval again.
#[utoipa::path(
    patch, path = "/keys/{key_id}", tag = "keys", params(KeyPath), request_body = ScopeBody,
    responses(
        (status = 200, body = KeyView),
        (status = 409, body = ErrorBody,
            description = "the key's state does not allow a scope change (rejected, revoked, expired)"),
    ),
)]
pub async fn set_scope(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
    Path(KeyPath { key_id }): Path<KeyPath>,
    ApiJson(body): ApiJson<ScopeBody>,
) -> Result<Json<KeyView>, ApiError> {
    Ok(Json(keys::set_scope(&st.db, &p, &named(&key_id)?, &body.event_types).await?))
}

#[utoipa::path(post, path = "/keys/{key_id}/approve", tag = "keys", params(KeyPath), request_body = DecisionBody,
    responses((status = 200, body = KeyView), (status = 409, body = ErrorBody)))]
pub async fn approve(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
    Path(KeyPath { key_id }): Path<KeyPath>,
    OptionalJson(body): OptionalJson<DecisionBody>,
) -> Result<Json<KeyView>, ApiError> {
    let comment = body.comment.unwrap_or_default();
    Ok(Json(keys::approve(&st.db, &p, &named(&key_id)?, None, &comment).await?))
}

#[utoipa::path(
    post, path = "/keys/{key_id}/reject", tag = "keys", params(KeyPath), request_body = RejectBody,
    responses(
        (status = 200, body = KeyView),
        (status = 409, body = ErrorBody, description = "the key is not pending approval"),
    ),
)]
pub async fn reject(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
    Path(KeyPath { key_id }): Path<KeyPath>,
    ApiJson(body): ApiJson<RejectBody>,
) -> Result<Json<KeyView>, ApiError> {
    let comment = body.comment;
    Ok(Json(keys::reject(&st.db, &p, &named(&key_id)?, None, &comment).await?))
}

#[utoipa::path(post, path = "/keys/{key_id}/rotate", tag = "keys", params(KeyPath), request_body = RotateBody,
    responses((status = 201, body = CreatedKey), (status = 409, body = ErrorBody)))]
pub async fn rotate(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
    Path(KeyPath { key_id }): Path<KeyPath>,
    OptionalJson(body): OptionalJson<RotateBody>,
) -> Result<(StatusCode, Json<CreatedKey>), ApiError> {
    let approval = approval(&p, body.approve, body.reviewer, body.comment, "rotation")?;
    let k = keys::rotate_with(
        &st.db,
        &st.vault,
        &p,
        &named(&key_id)?,
        body.overlap_secs,
        approval,
        credential(body.public_key),
    )
    .await?;
    Ok((StatusCode::CREATED, Json(k.into())))
}

#[utoipa::path(
    post, path = "/keys/{key_id}/revoke", tag = "keys", params(KeyPath), request_body = RevokeBody,
    responses(
        (status = 200, body = KeyView),
        (status = 409, body = ErrorBody, description = "the key is already revoked or expired"),
    ),
)]
pub async fn revoke(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
    Path(KeyPath { key_id }): Path<KeyPath>,
    ApiJson(body): ApiJson<RevokeBody>,
) -> Result<Json<KeyView>, ApiError> {
    Ok(Json(keys::revoke(&st.db, &p, &named(&key_id)?, &body.reason).await?))
}
