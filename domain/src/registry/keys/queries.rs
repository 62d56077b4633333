//! Keys as the caller may see them.

use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder};

use super::{KeyFilter, load, view};
use crate::{
    auth::{Principal, Scope},
    clock,
    entity::{endpoint, signing_key, tenant},
    error::{DomainError, DomainResult},
};
use views::ids::KeyId;
use views::{keys::KeyView, roles::Permission};

async fn views_for(db: &DatabaseConnection, keys: Vec<signing_key::Model>, now: i64) -> DomainResult<Vec<KeyView>> {
    let mut out = Vec::with_capacity(keys.len());
    let mut tenants: Vec<tenant::Model> = Vec::new();
    let mut endpoints: Vec<endpoint::Model> = Vec::new();
    for k in keys {
        if !tenants.iter().any(|t| t.id == k.tenant_id)
            && let Some(t) = tenant::Entity::find_by_id(k.tenant_id.clone()).one(db).await?
        {
            tenants.push(t);
        }
        if !endpoints.iter().any(|e| e.id == k.endpoint_id)
            && let Some(e) = endpoint::Entity::find_by_id(k.endpoint_id.clone()).one(db).await?
        {
            endpoints.push(e);
        }
        let (Some(t), Some(e)) =
            (tenants.iter().find(|t| t.id == k.tenant_id), endpoints.iter().find(|e| e.id == k.endpoint_id))
        else {
            continue;
        };
        out.push(view(&k, t, e, now)?);
    }
    Ok(out)
}

/// Keys the caller may see, newest first, filtered.
pub async fn list(db: &DatabaseConnection, principal: &Principal, filter: &KeyFilter) -> DomainResult<Vec<KeyView>> {
    let now = clock::now_ms();
    let mut q = signing_key::Entity::find().order_by_desc(signing_key::Column::CreatedAt);
    let tenant_id = match &filter.tenant {
        Some(slug) => Some(crate::registry::tenants::find(db, principal, slug).await?.id),
        None => principal.tenant_filter().map(str::to_owned),
    };
    match &tenant_id {
        Some(t) => {
            principal.authorize(Permission::ReadRegistry, Scope::Tenant(t))?;
            q = q.filter(signing_key::Column::TenantId.eq(t));
        }
        None => {
            principal.authorize(Permission::ReadRegistry, Scope::Global)?;
            q = q.filter(crate::registry::tenants::not_synthetic_tenant(signing_key::Column::TenantId));
        }
    }
    if let Some(slug) = &filter.endpoint {
        let Some(t) = &tenant_id else {
            return Err(DomainError::invalid("tenant_required", "filtering by endpoint needs a tenant"));
        };
        let e = endpoint::Entity::find()
            .filter(endpoint::Column::TenantId.eq(t))
            .filter(endpoint::Column::Slug.eq(slug.as_str()))
            .one(db)
            .await?
            .ok_or(DomainError::NotFound)?;
        q = q.filter(signing_key::Column::EndpointId.eq(e.id));
    }
    // Status is filtered after deriving `expired`.
    let all = views_for(db, q.all(db).await?, now).await?;
    Ok(match filter.status {
        Some(s) => all.into_iter().filter(|k| k.status == s).collect(),
        None => all,
    })
}

pub async fn get(db: &DatabaseConnection, principal: &Principal, key_id: &KeyId) -> DomainResult<KeyView> {
    let l = load(db, principal, key_id.as_str()).await?;
    principal.authorize(Permission::ReadRegistry, Scope::Tenant(&l.tenant.id))?;
    view(&l.key, &l.tenant, &l.endpoint, clock::now_ms())
}
