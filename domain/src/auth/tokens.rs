//! API tokens for `/api/v1` (`Authorization: Bearer sgt_…`). Stored as
//! SHA-256 digests, scoped by role and tenant, revocable.

use sea_orm::{ActiveModelTrait, ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, Set};
use serde_json::json;

use super::{Actor, Principal, Scope, TenantName};
use crate::{
    audit::{self, Change},
    clock,
    crypto::{RandomToken, random_token, sha256_hex},
    db,
    entity::{api_token, tenant},
    error::{DomainError, DomainResult},
    ids,
};
use views::{
    ids::TenantSlug,
    roles::{Permission, Role},
    users::TokenView,
};

const PREFIX: &str = "sgt_";
const TOUCH_EVERY_MS: i64 = 60_000;

/// A created token: its plaintext is shown exactly once.
#[derive(Debug)]
pub struct CreatedToken {
    pub token: RandomToken,
    pub view: TokenView,
}

fn view(t: api_token::Model, tenant: Option<TenantSlug>) -> TokenView {
    TokenView {
        id: t.id,
        name: t.name,
        role: Role::parse(&t.role).unwrap_or(Role::Oncall),
        tenant,
        created_by: t.created_by,
        created_at: clock::rfc3339(t.created_at),
        revoked_at: clock::rfc3339_opt(t.revoked_at),
        last_used_at: clock::rfc3339_opt(t.last_used_at),
    }
}

/// Mints a token (admins and the CLI).
pub async fn create(
    db: &DatabaseConnection,
    principal: &Principal,
    name: &str,
    role: Role,
    tenant: Option<&TenantName>,
) -> DomainResult<CreatedToken> {
    let auth = principal.authorize(Permission::ManageUsers, Scope::Global)?;
    let name = name.trim();
    if name.is_empty() || name.len() > 100 {
        return Err(DomainError::invalid("invalid_name", "token name must be 1–100 characters"));
    }
    let txn = db::begin_write(db).await?;
    let tenant_id = match (role.is_tenant_bound(), tenant) {
        (true, None) => return Err(DomainError::invalid("tenant_required", "a clinic-admin token needs --tenant")),
        (false, Some(_)) => {
            return Err(DomainError::invalid("tenant_not_allowed", format!("role {role} is not bound to a tenant")));
        }
        (false, None) => None,
        (true, Some(name)) => Some(super::binding::bindable_id(&txn, name).await?),
    };
    let token = random_token(PREFIX);
    let model = api_token::ActiveModel {
        id: Set(ids::new_id()),
        name: Set(name.to_owned()),
        digest: Set(token.digest().to_owned()),
        role: Set(role.as_str().to_owned()),
        tenant_id: Set(tenant_id.clone()),
        created_by: Set(auth.actor().name().to_owned()),
        created_at: Set(clock::now_ms()),
        revoked_at: Set(None),
        last_used_at: Set(None),
    }
    .insert(&txn)
    .await?;
    // Bound (`tenant_id` is set) only through a slug that names a tenant.
    let slug = match tenant {
        Some(TenantName::Slug(slug)) => Some(slug.clone()),
        _ => None,
    };
    let v = view(model, slug);
    audit::record(
        &txn,
        auth.actor(),
        Change {
            action: "token.create",
            target_kind: "token",
            target_id: &v.id,
            tenant_id: tenant_id.as_deref(),
            before: None,
            after: Some(json!({"name": v.name, "role": v.role, "tenant": v.tenant})),
        },
    )
    .await?;
    txn.commit().await?;
    Ok(CreatedToken { token, view: v })
}

/// Resolves a bearer token to its principal.
pub async fn authenticate(db: &DatabaseConnection, bearer: &str, now: i64) -> DomainResult<Principal> {
    if !bearer.starts_with(PREFIX) {
        return Err(DomainError::Unauthenticated);
    }
    let digest = sha256_hex(bearer.as_bytes());
    let Some(t) = api_token::Entity::find().filter(api_token::Column::Digest.eq(digest)).one(db).await? else {
        return Err(DomainError::Unauthenticated);
    };
    if t.revoked_at.is_some() {
        return Err(DomainError::Unauthenticated);
    }
    if t.last_used_at.is_none_or(|at| now - at >= TOUCH_EVERY_MS) {
        api_token::Entity::update_many()
            .col_expr(api_token::Column::LastUsedAt, sea_orm::sea_query::Expr::value(now))
            .filter(api_token::Column::Id.eq(&t.id))
            .exec(db)
            .await?;
    }
    principal_of(t)
}

fn principal_of(t: api_token::Model) -> DomainResult<Principal> {
    Principal::checked(Actor::Token { id: t.id.clone(), name: t.name.clone() }, &t.role, t.tenant_id)
}

/// The token's principal as it stands now (revoked: unauthenticated).
pub(super) async fn current(db: &DatabaseConnection, token_id: &str) -> DomainResult<Principal> {
    match api_token::Entity::find_by_id(token_id.to_owned()).one(db).await? {
        Some(t) if t.revoked_at.is_none() => principal_of(t),
        _ => Err(DomainError::Unauthenticated),
    }
}

/// Revokes a token at once.
pub async fn revoke(db: &DatabaseConnection, principal: &Principal, token_id: &str) -> DomainResult<TokenView> {
    let auth = principal.authorize(Permission::ManageUsers, Scope::Global)?;
    let txn = db::begin_write(db).await?;
    let t = api_token::Entity::find_by_id(token_id.to_owned()).one(&txn).await?.ok_or(DomainError::NotFound)?;
    if t.revoked_at.is_some() {
        return Err(DomainError::conflict("already_revoked", "token is already revoked"));
    }
    let mut active: api_token::ActiveModel = t.clone().into();
    active.revoked_at = Set(Some(clock::now_ms()));
    let updated = active.update(&txn).await?;
    audit::record(
        &txn,
        auth.actor(),
        Change {
            action: "token.revoke",
            target_kind: "token",
            target_id: token_id,
            tenant_id: t.tenant_id.as_deref(),
            before: Some(json!({"revoked": false})),
            after: Some(json!({"revoked": true})),
        },
    )
    .await?;
    txn.commit().await?;
    Ok(view(updated, None))
}

/// All tokens (admins only), newest first.
pub async fn list(db: &DatabaseConnection, principal: &Principal) -> DomainResult<Vec<TokenView>> {
    principal.authorize(Permission::ManageUsers, Scope::Global)?;
    let rows = api_token::Entity::find().order_by_desc(api_token::Column::CreatedAt).all(db).await?;
    let tenants = tenant::Entity::find().all(db).await?;
    rows.into_iter()
        .map(|t| {
            let slug = t.tenant_id.as_ref().and_then(|id| tenants.iter().find(|x| &x.id == id));
            Ok(view(t, slug.map(|x| ids::stored(&x.slug)).transpose()?))
        })
        .collect()
}
