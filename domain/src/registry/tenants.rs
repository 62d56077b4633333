//! Tenants are clinics. Slugs are the public names in URLs and the CLI.

use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter,
    QueryOrder, Set,
};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::{
    audit::{self, Change},
    auth::{Permission, Principal, Scope},
    clock, db,
    entity::tenant,
    error::{DomainError, DomainResult},
    ids,
};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TenantView {
    pub id: String,
    pub slug: String,
    pub name: String,
    pub notify_url: Option<String>,
    pub created_at: String,
}

impl From<tenant::Model> for TenantView {
    fn from(t: tenant::Model) -> Self {
        TenantView {
            id: t.id,
            slug: t.slug,
            name: t.name,
            notify_url: t.notify_url,
            created_at: clock::rfc3339(t.created_at),
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NewTenant {
    pub slug: String,
    pub name: Option<String>,
    pub notify_url: Option<String>,
}

/// `None` leaves a field unchanged; `notify_url: Some("")` clears it.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TenantPatch {
    pub name: Option<String>,
    pub notify_url: Option<String>,
}

fn validate_name(name: &str) -> DomainResult<String> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > 200 {
        return Err(DomainError::invalid("invalid_name", "name must be 1–200 characters"));
    }
    Ok(name.to_owned())
}

/// Outbox relay target: an absolute http(s) URL.
fn validate_notify_url(url: &str) -> DomainResult<Option<String>> {
    let url = url.trim();
    if url.is_empty() {
        return Ok(None);
    }
    let ok = (url.starts_with("http://") || url.starts_with("https://"))
        && url.len() <= 2048
        && !url.chars().any(char::is_whitespace)
        && url.split("://").nth(1).is_some_and(|rest| !rest.is_empty() && !rest.starts_with('/'));
    if ok {
        Ok(Some(url.to_owned()))
    } else {
        Err(DomainError::invalid("invalid_notify_url", "notify URL must be an absolute http:// or https:// URL"))
    }
}

/// Finds a tenant by slug, as the caller may see it.
pub async fn find<C: ConnectionTrait>(conn: &C, principal: &Principal, slug: &str) -> DomainResult<tenant::Model> {
    // The drill tenant is not a tenant anyone manages (`evidence::drills`).
    let t = tenant::Entity::find()
        .filter(tenant::Column::Slug.eq(slug))
        .filter(tenant::Column::Synthetic.eq(false))
        .one(conn)
        .await?
        .ok_or(DomainError::NotFound)?;
    if !principal.can_see_tenant(&t.id) {
        return Err(DomainError::NotFound);
    }
    Ok(t)
}

pub async fn create(db: &DatabaseConnection, principal: &Principal, new: NewTenant) -> DomainResult<TenantView> {
    let auth = principal.authorize(Permission::ManageTenants, Scope::Global)?;
    ids::validate_slug("tenant", &new.slug)?;
    let name = validate_name(new.name.as_deref().unwrap_or(&new.slug))?;
    let notify_url = validate_notify_url(new.notify_url.as_deref().unwrap_or(""))?;
    let txn = db::begin_write(db).await?;
    let model = tenant::ActiveModel {
        id: Set(ids::new_id()),
        slug: Set(new.slug.clone()),
        name: Set(name),
        notify_url: Set(notify_url),
        created_at: Set(clock::now_ms()),
        retry_policy: Set("enabled".into()),
        synthetic: Set(false),
    }
    .insert(&txn)
    .await
    .map_err(db::conflict_if_unique("tenant_exists", format!("tenant {:?} already exists", new.slug)))?;
    let v = TenantView::from(model);
    crate::ops::retry_policy::record_initial(&txn, auth.actor(), &v.id, clock::now_ms()).await?;
    audit::record(
        &txn,
        auth.actor(),
        Change {
            action: "tenant.create",
            target_kind: "tenant",
            target_id: &v.slug,
            tenant_id: Some(&v.id),
            before: None,
            after: Some(json!({"slug": v.slug, "name": v.name, "notify_url": v.notify_url})),
        },
    )
    .await?;
    txn.commit().await?;
    Ok(v)
}

/// Tenants the caller may see, by slug.
pub async fn list(db: &DatabaseConnection, principal: &Principal) -> DomainResult<Vec<TenantView>> {
    let mut q = tenant::Entity::find().filter(tenant::Column::Synthetic.eq(false)).order_by_asc(tenant::Column::Slug);
    if let Some(own) = principal.tenant_filter() {
        principal.authorize(Permission::ReadRegistry, Scope::Tenant(own))?;
        q = q.filter(tenant::Column::Id.eq(own));
    } else {
        principal.authorize(Permission::ReadRegistry, Scope::Global)?;
    }
    Ok(q.all(db).await?.into_iter().map(TenantView::from).collect())
}

pub async fn get(db: &DatabaseConnection, principal: &Principal, slug: &str) -> DomainResult<TenantView> {
    let t = find(db, principal, slug).await?;
    principal.authorize(Permission::ReadRegistry, Scope::Tenant(&t.id))?;
    Ok(t.into())
}

pub async fn update(db: &DatabaseConnection, principal: &Principal, slug: &str, patch: TenantPatch) -> DomainResult<TenantView> {
    let txn = db::begin_write(db).await?;
    let t = find(&txn, principal, slug).await?;
    let auth = principal.authorize(Permission::ManageTenants, Scope::Tenant(&t.id))?;
    let before = TenantView::from(t.clone());
    let mut active: tenant::ActiveModel = t.into();
    if let Some(name) = &patch.name {
        active.name = Set(validate_name(name)?);
    }
    if let Some(url) = &patch.notify_url {
        active.notify_url = Set(validate_notify_url(url)?);
    }
    let after = TenantView::from(active.update(&txn).await?);
    audit::record(
        &txn,
        auth.actor(),
        Change {
            action: "tenant.update",
            target_kind: "tenant",
            target_id: slug,
            tenant_id: Some(&after.id),
            before: Some(json!({"name": before.name, "notify_url": before.notify_url})),
            after: Some(json!({"name": after.name, "notify_url": after.notify_url})),
        },
    )
    .await?;
    txn.commit().await?;
    Ok(after)
}

/// The condition "this tenant id column is not the synthetic drill
/// tenant", for listings, gauges and the outbox worker, so that drill rows
/// never reach real tenants' figures or notifications.
pub fn not_synthetic_tenant(col: impl sea_orm::ColumnTrait) -> sea_orm::sea_query::SimpleExpr {
    use sea_orm::sea_query::{Expr, ExprTrait, Query};
    Expr::col(col).not_in_subquery(
        Query::select().column(tenant::Column::Id).from(tenant::Entity).and_where(tenant::Column::Synthetic.eq(true)).to_owned(),
    )
}
