//! Users and the audit log.

use app::ssr::SharedState;
use axum::{
    Json,
    extract::{Path, State},
    http::StatusCode,
};
use domain::{
    audit::{self, AuditFilter},
    auth::{
        TenantName,
        users::{self, NewUser, UserPatch},
    },
    crypto::Password,
};
use serde::{Deserialize, Serialize};
use views::{audit::AuditView, roles::Role, users::UserView};

use super::auth::{ApiError, ApiJson, ApiPrincipal, ApiQuery, ErrorBody, NoQuery};
use super::params::UserPath;

#[derive(Deserialize, utoipa::ToSchema)]
pub struct NewUserBody {
    #[schema(schema_with = domain::auth::users::username_schema)]
    pub username: String,
    pub role: Role,
    /// Tenant slug, for clinic admins.
    pub tenant: Option<String>,
    /// Omitted: a password is generated and returned once.
    #[schema(schema_with = domain::auth::users::password_schema)]
    pub password: Option<String>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct CreatedUser {
    pub user: UserView,
    /// Present only when generated; shown once.
    pub password: Option<String>,
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AuditQuery {
    pub actor: Option<String>,
    /// Prefix, e.g. `key.`.
    pub action: Option<String>,
    /// RFC 3339 lower bound.
    #[param(schema_with = since_schema)]
    pub since: Option<String>,
    pub tenant: Option<String>,
    pub before_seq: Option<i64>,
    /// 1–500, default 100.
    #[param(schema_with = views::paging::list_schema)]
    pub limit: Option<u64>,
}

fn since_schema() -> utoipa::openapi::Object {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::Type::String)
        .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(utoipa::openapi::KnownFormat::DateTime)))
        .build()
}

#[utoipa::path(get, path = "/users", tag = "users", responses((status = 200, body = [UserView])))]
pub async fn list_users(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
) -> Result<Json<Vec<UserView>>, ApiError> {
    Ok(Json(users::list(&st.db, &p).await?))
}

#[utoipa::path(post, path = "/users", tag = "users", request_body = NewUserBody,
    responses((status = 201, body = CreatedUser), (status = 409, body = ErrorBody)))]
pub async fn create_user(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
    ApiJson(body): ApiJson<NewUserBody>,
) -> Result<(StatusCode, Json<CreatedUser>), ApiError> {
    let (password, generated) = match body.password {
        Some(pw) => (Password::new(pw), None),
        None => {
            let pw = Password::generate();
            let shown = pw.expose().to_owned();
            (pw, Some(shown))
        }
    };
    let tenant = TenantName::given(body.tenant.as_deref());
    let user =
        users::create(&st.db, &p, NewUser { username: body.username, role: body.role, tenant, password }).await?;
    Ok((StatusCode::CREATED, Json(CreatedUser { user, password: generated })))
}

#[utoipa::path(patch, path = "/users/{username}", tag = "users", params(UserPath), request_body = UserPatch,
    responses((status = 200, body = UserView), (status = 409, body = ErrorBody)))]
pub async fn update_user(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
    Path(UserPath { username }): Path<UserPath>,
    ApiJson(body): ApiJson<UserPatch>,
) -> Result<Json<UserView>, ApiError> {
    if body.role.is_none() && body.tenant.is_none() && body.disabled.is_none() {
        return Err(super::auth::nothing_to_change());
    }
    Ok(Json(users::update(&st.db, &p, &username, body.into()).await?))
}

#[utoipa::path(
    get, path = "/audit", tag = "audit", params(AuditQuery),
    responses((status = 200, body = [AuditView])),
)]
pub async fn list_audit(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    ApiQuery(q): ApiQuery<AuditQuery>,
) -> Result<Json<Vec<AuditView>>, ApiError> {
    let since = match q.since.as_deref() {
        Some(s) => Some(domain::clock::parse_rfc3339(s).ok_or_else(|| {
            domain::DomainError::invalid("invalid_since", "since must be RFC 3339, e.g. 2026-12-01T00:00:00Z")
        })?),
        None => None,
    };
    let tenant_id = match q.tenant.as_deref().filter(|s| !s.is_empty()) {
        Some(slug) => Some(domain::registry::tenants::get(&st.db, &p, &domain::ids::named(slug)?).await?.id),
        None => None,
    };
    let filter =
        AuditFilter { actor: q.actor, action: q.action, tenant_id, since, before_seq: q.before_seq, limit: q.limit };
    Ok(Json(audit::list(&st.db, &p, &filter).await?))
}
