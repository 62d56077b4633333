//! Endpoints: where one tenant's providers post, with one signature scheme,
//! the event types they may send, a timestamp tolerance and a body limit.

use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, Set,
};
use serde::{Deserialize, Serialize};
use serde_json::json;
use views::{
    hmac::HmacProfileBody,
    keys::KeyStatus,
    registry::EndpointView,
    roles::Permission,
    scheme::{EventTypes, Scheme},
};

use views::ids::{EndpointSlug, TenantSlug};

use super::{DEFAULT_TOLERANCE_SECS, MAX_TOLERANCE_SECS, tenants, validate_event_types};
use crate::{
    audit::{self, Change},
    auth::{Principal, Scope},
    clock, db,
    entity::{endpoint, signing_key, tenant},
    error::{DomainError, DomainResult},
    ids, replay,
};

/// The stored compound event key (`endpoints.event_id_fields`, a JSON array)
/// as field paths; `None` when unset.
pub fn parse_event_key(stored: Option<&str>) -> Option<Vec<String>> {
    stored.and_then(|s| serde_json::from_str::<Vec<String>>(s).ok()).filter(|f| !f.is_empty())
}

pub const DEFAULT_MAX_BODY_BYTES: i64 = 1024 * 1024;
pub const MAX_MAX_BODY_BYTES: i64 = 10 * 1024 * 1024;

/// The endpoint as shown under its tenant's slug; a stored slug outside the
/// slug rule is a corrupt row.
fn view(e: endpoint::Model, tenant_slug: &TenantSlug) -> DomainResult<EndpointView> {
    Ok(EndpointView {
        slug: crate::ids::stored(&e.slug)?,
        scheme: super::parse_scheme(&e.scheme).unwrap_or(Scheme::StandardWebhooks),
        event_types: EventTypes::from_json(&e.event_types).as_slice().to_vec(),
        id: e.id,
        tenant: tenant_slug.clone(),
        tolerance_secs: e.tolerance_secs,
        max_body_bytes: e.max_body_bytes,
        enabled: e.enabled,
        created_at: clock::rfc3339(e.created_at),
        event_key: parse_event_key(e.event_id_fields.as_deref()),
        hmac_profile: e.hmac_profile.as_deref().and_then(|p| serde_json::from_str(p).ok()),
    })
}

/// Whether the endpoint's sender signs no timestamp (GitHub, an `hmac`
/// profile without one): its replay records are then kept for the dedup
/// retention, not twice the tolerance (`replay`).
pub fn signs_no_timestamp(e: &endpoint::Model) -> bool {
    match super::parse_scheme(&e.scheme) {
        Ok(Scheme::Github) => true,
        Ok(Scheme::Hmac) => !e
            .hmac_profile
            .as_deref()
            .and_then(|p| serde_json::from_str::<views::hmac::HmacProfile>(p).ok())
            .is_some_and(|p| p.has_timestamp()),
        _ => false,
    }
}

fn summary(v: &EndpointView) -> serde_json::Value {
    json!({
        "scheme": v.scheme, "event_types": v.event_types, "tolerance_secs": v.tolerance_secs,
        "max_body_bytes": v.max_body_bytes, "enabled": v.enabled, "hmac_profile": v.hmac_profile,
    })
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NewEndpoint {
    #[cfg_attr(feature = "openapi", schema(schema_with = views::ids::slug_schema))]
    pub slug: String,
    pub scheme: Scheme,
    /// Omitted: any event type.
    #[cfg_attr(feature = "openapi", schema(schema_with = super::optional_event_types_schema))]
    pub event_types: Option<Vec<String>>,
    #[cfg_attr(feature = "openapi", schema(schema_with = tolerance_schema))]
    #[serde(default, deserialize_with = "views::integral::optional")]
    pub tolerance_secs: Option<i64>,
    #[cfg_attr(feature = "openapi", schema(schema_with = max_body_schema))]
    #[serde(default, deserialize_with = "views::integral::optional")]
    pub max_body_bytes: Option<i64>,
    /// Scheme `hmac` only, and then required: a preset (`{"preset":
    /// "dvir"}`) or a full profile (`registry::hmac_profile`). Its
    /// `tolerance_secs`, when given, is the endpoint's tolerance.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    #[serde(default)]
    pub hmac_profile: Option<HmacProfileBody>,
}

/// `None` leaves a field unchanged. The scheme (and an `hmac` endpoint's
/// profile) cannot change: keys were approved for one.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EndpointPatch {
    #[cfg_attr(feature = "openapi", schema(schema_with = super::optional_event_types_schema))]
    pub event_types: Option<Vec<String>>,
    #[cfg_attr(feature = "openapi", schema(schema_with = tolerance_schema))]
    #[serde(default, deserialize_with = "views::integral::optional")]
    pub tolerance_secs: Option<i64>,
    #[cfg_attr(feature = "openapi", schema(schema_with = max_body_schema))]
    #[serde(default, deserialize_with = "views::integral::optional")]
    pub max_body_bytes: Option<i64>,
    pub enabled: Option<bool>,
}

/// Seconds of timestamp tolerance: what [`check_tolerance`] accepts.
#[cfg(feature = "openapi")]
fn tolerance_schema() -> utoipa::openapi::Object {
    views::openapi::nullable(views::openapi::integer(1, MAX_TOLERANCE_SECS))
}

/// A body limit in bytes: what [`check_body_limit`] accepts.
#[cfg(feature = "openapi")]
fn max_body_schema() -> utoipa::openapi::Object {
    views::openapi::nullable(views::openapi::integer(1, MAX_MAX_BODY_BYTES))
}

fn check_tolerance(secs: i64) -> DomainResult<i64> {
    if (1..=MAX_TOLERANCE_SECS).contains(&secs) {
        Ok(secs)
    } else {
        Err(DomainError::invalid("invalid_tolerance", format!("tolerance must be 1–{MAX_TOLERANCE_SECS} seconds")))
    }
}

fn check_body_limit(bytes: i64) -> DomainResult<i64> {
    if (1..=MAX_MAX_BODY_BYTES).contains(&bytes) {
        Ok(bytes)
    } else {
        Err(DomainError::invalid("invalid_max_body", format!("max body size must be 1–{MAX_MAX_BODY_BYTES} bytes")))
    }
}

/// Finds an endpoint of a tenant the caller may see.
pub async fn find<C: ConnectionTrait>(
    conn: &C,
    principal: &Principal,
    tenant_slug: &TenantSlug,
    endpoint_slug: &EndpointSlug,
) -> DomainResult<(tenant::Model, endpoint::Model)> {
    let t = tenants::find(conn, principal, tenant_slug).await?;
    let e = endpoint::Entity::find()
        .filter(endpoint::Column::TenantId.eq(&t.id))
        .filter(endpoint::Column::Slug.eq(endpoint_slug.as_str()))
        .one(conn)
        .await?
        .ok_or(DomainError::NotFound)?;
    Ok((t, e))
}

pub async fn create(
    db: &DatabaseConnection,
    principal: &Principal,
    tenant_slug: &TenantSlug,
    new: NewEndpoint,
) -> DomainResult<EndpointView> {
    let txn = db::begin_write(db).await?;
    let t = tenants::find(&txn, principal, tenant_slug).await?;
    let auth = principal.authorize(Permission::ManageEndpoints, Scope::Tenant(&t.id))?;
    // Input is looked at only for a caller who may make the change.
    let slug = EndpointSlug::parse(new.slug.as_str())?;
    let types = match &new.event_types {
        Some(list) => validate_event_types(list)?,
        None => EventTypes::any(),
    };
    let (profile, profile_tolerance) = match (new.scheme, &new.hmac_profile) {
        (Scheme::Hmac, Some(body)) => {
            let (p, tol) = super::hmac_profile::resolve(body)?;
            (Some(p), tol)
        }
        (Scheme::Hmac, None) => {
            return Err(DomainError::invalid(
                "invalid_hmac_profile",
                "hmac_profile: required for scheme hmac (a preset such as {\"preset\": \"dvir\"}, or a profile)",
            ));
        }
        (_, Some(_)) => {
            return Err(DomainError::invalid(
                "invalid_hmac_profile",
                format!("hmac_profile: only scheme hmac takes a profile, not {}", new.scheme),
            ));
        }
        (_, None) => (None, None),
    };
    let tolerance = check_tolerance(profile_tolerance.or(new.tolerance_secs).unwrap_or(DEFAULT_TOLERANCE_SECS))?;
    let stored_profile = profile.as_ref().map(super::hmac_profile::to_stored).transpose()?;
    let max_body = check_body_limit(new.max_body_bytes.unwrap_or(DEFAULT_MAX_BODY_BYTES))?;
    let model = endpoint::ActiveModel {
        id: Set(ids::new_id()),
        tenant_id: Set(t.id.clone()),
        slug: Set(slug.into_string()),
        scheme: Set(new.scheme.as_str().to_owned()),
        event_types: Set(types.to_json()),
        tolerance_secs: Set(tolerance),
        timestamp_floor: Set(None),
        replay_partitioned_from: Set(None),
        event_id_fields: Set(None),
        hmac_profile: Set(stored_profile),
        max_body_bytes: Set(max_body),
        enabled: Set(true),
        created_at: Set(clock::now_ms()),
    }
    .insert(&txn)
    .await
    .map_err(db::conflict_if_unique(
        "endpoint_exists",
        format!("endpoint {:?} already exists in {tenant_slug}", new.slug),
    ))?;
    super::defaults::retention_v1(&txn, auth.actor(), &model.id, new.scheme, model.created_at).await?;
    let v = view(model, tenant_slug)?;
    audit::record(
        &txn,
        auth.actor(),
        Change {
            action: "endpoint.create",
            target_kind: "endpoint",
            target_id: &format!("{}/{}", t.slug, v.slug),
            tenant_id: Some(&t.id),
            before: None,
            after: Some(summary(&v)),
        },
    )
    .await?;
    txn.commit().await?;
    Ok(v)
}

pub async fn list(
    db: &DatabaseConnection,
    principal: &Principal,
    tenant_slug: &TenantSlug,
) -> DomainResult<Vec<EndpointView>> {
    let t = tenants::find(db, principal, tenant_slug).await?;
    principal.authorize(Permission::ReadRegistry, Scope::Tenant(&t.id))?;
    let rows = endpoint::Entity::find()
        .filter(endpoint::Column::TenantId.eq(&t.id))
        .order_by_asc(endpoint::Column::Slug)
        .all(db)
        .await?;
    rows.into_iter().map(|e| view(e, tenant_slug)).collect()
}

pub async fn get(
    db: &DatabaseConnection,
    principal: &Principal,
    tenant_slug: &TenantSlug,
    endpoint_slug: &EndpointSlug,
) -> DomainResult<EndpointView> {
    let (t, e) = find(db, principal, tenant_slug, endpoint_slug).await?;
    principal.authorize(Permission::ReadRegistry, Scope::Tenant(&t.id))?;
    view(e, tenant_slug)
}

/// Updates settings. Narrowing the event types is refused while a live key's
/// scope includes a removed type: that key would silently change scope.
pub async fn update(
    db: &DatabaseConnection,
    principal: &Principal,
    tenant_slug: &TenantSlug,
    endpoint_slug: &EndpointSlug,
    patch: EndpointPatch,
) -> DomainResult<EndpointView> {
    let txn = db::begin_write(db).await?;
    let (t, e) = find(&txn, principal, tenant_slug, endpoint_slug).await?;
    let auth = principal.authorize(Permission::ManageEndpoints, Scope::Tenant(&t.id))?;
    let before = view(e.clone(), tenant_slug)?;
    let types = patch.event_types.as_deref().map(validate_event_types).transpose()?;
    let tolerance = patch.tolerance_secs.map(check_tolerance).transpose()?;
    let max_body = patch.max_body_bytes.map(check_body_limit).transpose()?;
    let unchanged = types.as_ref().is_none_or(|t| t.to_json() == e.event_types)
        && tolerance.is_none_or(|s| s == e.tolerance_secs)
        && max_body.is_none_or(|b| b == e.max_body_bytes)
        && patch.enabled.is_none_or(|en| en == e.enabled);
    if unchanged {
        return Err(DomainError::nothing_to_change());
    }
    let mut active: endpoint::ActiveModel = e.clone().into();
    if let Some(types) = types {
        let live = signing_key::Entity::find()
            .filter(signing_key::Column::EndpointId.eq(&e.id))
            .filter(signing_key::Column::Status.is_in([
                KeyStatus::PendingApproval,
                KeyStatus::Active,
                KeyStatus::Retiring,
            ]))
            .all(&txn)
            .await?;
        if let Some(k) = live.iter().find(|k| !types.covers(&EventTypes::from_json(&k.event_types))) {
            return Err(DomainError::conflict(
                "key_scope_outside_endpoint",
                format!(
                    "key {} is scoped to types this change removes; rotate it with a narrower scope or revoke it first",
                    k.id
                ),
            ));
        }
        active.event_types = Set(types.to_json());
    }
    if let Some(new) = tolerance {
        if new > e.tolerance_secs {
            // A wider window: the replay records held grow with it, and a
            // message already outside the old window stays outside (its
            // record may be purged); see `replay`.
            replay::extend(&txn, &e.tenant_id, &e.id, 2 * (new - e.tolerance_secs) * 1000).await?;
            let floor = clock::now_ms() / 1000 - e.tolerance_secs;
            active.timestamp_floor = Set(Some(e.timestamp_floor.map_or(floor, |f| f.max(floor))));
        }
        active.tolerance_secs = Set(new);
    }
    if let Some(b) = max_body {
        active.max_body_bytes = Set(b);
    }
    if let Some(en) = patch.enabled {
        active.enabled = Set(en);
    }
    let after = view(active.update(&txn).await?, tenant_slug)?;
    audit::record(
        &txn,
        auth.actor(),
        Change {
            action: "endpoint.update",
            target_kind: "endpoint",
            target_id: &format!("{}/{}", t.slug, after.slug),
            tenant_id: Some(&t.id),
            before: Some(summary(&before)),
            after: Some(summary(&after)),
        },
    )
    .await?;
    txn.commit().await?;
    Ok(after)
}
