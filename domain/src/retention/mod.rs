//! Retention decisions (docs/architecture.md#replays-order-and-retention:
//! retention is part of the guarantee).
//!
//! A claim is what makes a redelivery a duplicate, so deleting it early turns
//! a provider's legitimate retry into a second effect. Each scheme therefore
//! has a redelivery horizon (how long its senders may redeliver), and no
//! endpoint's dedup retention may be set below it. Bodies (health data) are
//! kept for a shorter, separate period. Every decision is an append-only
//! version recording the values, the horizon in force, who and why: the
//! evidence a reviewer exports. The purge job is [`purge`].

pub mod in_arrival_order;
pub mod partitions;
pub mod purge;

use std::collections::HashMap;

use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, Set, sea_query::Expr,
};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::{
    audit::{self, Change},
    auth::{Principal, Scope},
    clock, db,
    entity::{endpoint, redelivery_horizon as horizon, retention_version as version, tenant},
    error::{DomainError, DomainResult},
    registry::{defaults::horizon_of, endpoints},
    replay,
    text::require_reason,
};
use views::ids::{EndpointSlug, TenantSlug};
use views::{
    retention::{HorizonView, RetentionOverview, RetentionVersionView, RetentionView, human},
    roles::Permission,
};

pub use crate::clock::{DAY_SECS, HOUR_SECS};
pub use crate::registry::defaults::{DEFAULT_BODY_SECS, DEFAULT_DEDUP_SECS};
/// Bounds that keep the values meaningful (and the arithmetic far from
/// overflow): a horizon of at least an hour, nothing beyond ten years.
pub const MIN_HORIZON_SECS: i64 = HOUR_SECS;
pub const MAX_HORIZON_SECS: i64 = 365 * DAY_SECS;
pub const MAX_RETENTION_SECS: i64 = 3_650 * DAY_SECS;

/// A change to an endpoint's retention; `None` keeps the current value.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RetentionChange {
    /// At least the scheme's redelivery horizon.
    #[cfg_attr(feature = "openapi", schema(schema_with = dedup_schema))]
    #[serde(default, deserialize_with = "views::integral::optional")]
    pub dedup_secs: Option<i64>,
    /// At most `dedup_secs`.
    #[cfg_attr(feature = "openapi", schema(schema_with = body_schema))]
    #[serde(default, deserialize_with = "views::integral::optional")]
    pub body_secs: Option<i64>,
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::text::reason_schema))]
    pub reason: String,
    /// Accept, on record, a dedup retention below the scheme's manual resend
    /// window (otherwise 422 `below_manual_resend`): audited, and a
    /// `retention_below_manual_resend` finding in every bundle while it lasts.
    #[serde(default)]
    pub accept_risk: bool,
}

/// Claims are kept at least for the horizon, itself at least
/// [`MIN_HORIZON_SECS`]; never beyond [`MAX_RETENTION_SECS`] ([`check_dedup`]).
#[cfg(feature = "openapi")]
fn dedup_schema() -> utoipa::openapi::Object {
    views::openapi::nullable(views::openapi::integer(MIN_HORIZON_SECS, MAX_RETENTION_SECS))
}

/// Bodies: none at all up to as long as their claims ([`check_body`]).
#[cfg(feature = "openapi")]
fn body_schema() -> utoipa::openapi::Object {
    views::openapi::nullable(views::openapi::integer(0, MAX_RETENTION_SECS))
}

/// A redelivery horizon: what [`set_horizon`] accepts.
#[cfg(feature = "openapi")]
pub fn horizon_schema() -> utoipa::openapi::Object {
    views::openapi::integer(MIN_HORIZON_SECS, MAX_HORIZON_SECS)
}

impl From<horizon::Model> for HorizonView {
    fn from(h: horizon::Model) -> Self {
        HorizonView {
            scheme: h.scheme,
            horizon_secs: h.horizon_secs,
            version: h.version,
            actor: h.actor,
            reason: h.reason,
            created_at: clock::rfc3339(h.created_at),
            source: h.source,
            manual_resend_secs: h.manual_resend_secs,
            manual_resend_source: h.manual_resend_source,
        }
    }
}

impl From<version::Model> for RetentionVersionView {
    fn from(v: version::Model) -> Self {
        RetentionVersionView {
            version: v.version,
            dedup_secs: v.dedup_secs,
            body_secs: v.body_secs,
            horizon_secs: v.horizon_secs,
            actor: v.actor,
            reason: v.reason,
            created_at: clock::rfc3339(v.created_at),
        }
    }
}

/// Parses "30d", "36h", "1d 12h", "90m", "45s" (units d, h, m, s; at least
/// one term) into seconds.
pub fn parse_duration(text: &str) -> DomainResult<i64> {
    let bad = || {
        DomainError::invalid(
            "invalid_duration",
            format!("expected a duration such as 30d, 36h or 1d 12h, got {text:?}"),
        )
    };
    let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    if compact.is_empty() {
        return Err(bad());
    }
    let (mut total, mut digits) = (0i64, String::new());
    for c in compact.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit = match c.to_ascii_lowercase() {
            'd' => DAY_SECS,
            'h' => HOUR_SECS,
            'm' => 60,
            's' => 1,
            _ => return Err(bad()),
        };
        let n: i64 = digits.parse().map_err(|_| bad())?;
        total = n.checked_mul(unit).and_then(|v| total.checked_add(v)).ok_or_else(bad)?;
        digits.clear();
    }
    if !digits.is_empty() {
        return Err(bad());
    }
    Ok(total)
}

/// The newest horizon version of every scheme.
pub async fn current_horizons<C: ConnectionTrait>(conn: &C) -> DomainResult<HashMap<String, horizon::Model>> {
    let mut out: HashMap<String, horizon::Model> = HashMap::new();
    for h in horizon::Entity::find().order_by_asc(horizon::Column::Version).all(conn).await? {
        out.insert(h.scheme.clone(), h);
    }
    Ok(out)
}

/// How long an endpoint's claims are kept now: its newest decision (the
/// default without one), never below its scheme's current horizon.
pub async fn effective_dedup_secs<C: ConnectionTrait>(conn: &C, endpoint_id: &str, scheme: &str) -> DomainResult<i64> {
    let decided = version::Entity::find()
        .filter(version::Column::EndpointId.eq(endpoint_id))
        .order_by_desc(version::Column::Version)
        .one(conn)
        .await?
        .map_or(DEFAULT_DEDUP_SECS, |v| v.dedup_secs);
    let horizon = horizon::Entity::find()
        .filter(horizon::Column::Scheme.eq(scheme))
        .order_by_desc(horizon::Column::Version)
        .one(conn)
        .await?
        .map_or(0, |h| h.horizon_secs);
    Ok(decided.max(horizon))
}

async fn history<C: ConnectionTrait>(conn: &C, endpoint_id: &str) -> DomainResult<Vec<version::Model>> {
    Ok(version::Entity::find()
        .filter(version::Column::EndpointId.eq(endpoint_id))
        .order_by_desc(version::Column::Version)
        .all(conn)
        .await?)
}

/// The newest decision of every endpoint (the purge's input).
pub async fn current_decisions<C: ConnectionTrait>(conn: &C) -> DomainResult<HashMap<String, version::Model>> {
    let mut out: HashMap<String, version::Model> = HashMap::new();
    for v in version::Entity::find().order_by_asc(version::Column::Version).all(conn).await? {
        out.insert(v.endpoint_id.clone(), v);
    }
    Ok(out)
}

fn assemble(
    t: &tenant::Model,
    e: &endpoint::Model,
    horizon: Option<&horizon::Model>,
    rows: Vec<version::Model>,
) -> DomainResult<RetentionView> {
    let horizon_secs = horizon.map_or(0, |h| h.horizon_secs);
    let manual_resend_secs = horizon.map_or(0, |h| h.manual_resend_secs);
    let mut history = rows.into_iter().map(RetentionVersionView::from);
    let current = history.next().ok_or_else(|| {
        DomainError::conflict(
            "retention_missing",
            format!("no retention decision is recorded for {}/{}", t.slug, e.slug),
        )
    })?;
    Ok(RetentionView {
        tenant: crate::ids::stored(&t.slug)?,
        endpoint: crate::ids::stored(&e.slug)?,
        scheme: e.scheme.clone(),
        effective_dedup_secs: current.dedup_secs.max(horizon_secs),
        below_horizon: current.dedup_secs < horizon_secs,
        below_manual_resend: current.dedup_secs < manual_resend_secs,
        manual_resend_secs,
        horizon_secs,
        current,
        history: history.collect(),
    })
}

/// One endpoint's retention with its full history.
pub async fn get(
    db: &DatabaseConnection,
    principal: &Principal,
    tenant_slug: &TenantSlug,
    endpoint_slug: &EndpointSlug,
) -> DomainResult<RetentionView> {
    let (t, e) = endpoints::find(db, principal, tenant_slug, endpoint_slug).await?;
    principal.authorize(Permission::ReadRegistry, Scope::Tenant(&t.id))?;
    let h = horizon_of(db, &e.scheme).await?;
    let mut view = assemble(&t, &e, Some(&h), history(db, &e.id).await?)?;
    // The history shown includes the current version at its head.
    view.history.insert(0, view.current.clone());
    Ok(view)
}

/// Every visible endpoint's current decision and the horizons.
pub async fn overview(db: &DatabaseConnection, principal: &Principal) -> DomainResult<RetentionOverview> {
    principal.authorize(Permission::ReadRegistry, principal.tenant_filter().map_or(Scope::Global, Scope::Tenant))?;
    let mut tenants_q =
        tenant::Entity::find().filter(tenant::Column::Synthetic.eq(false)).order_by_asc(tenant::Column::Slug);
    if let Some(own) = principal.tenant_filter() {
        tenants_q = tenants_q.filter(tenant::Column::Id.eq(own));
    }
    let tenants = tenants_q.all(db).await?;
    let eps = endpoint::Entity::find()
        .filter(endpoint::Column::TenantId.is_in(tenants.iter().map(|t| t.id.clone())))
        .order_by_asc(endpoint::Column::Slug)
        .all(db)
        .await?;
    let horizons = current_horizons(db).await?;
    let mut decisions = current_decisions(db).await?;
    let mut endpoints_out = Vec::with_capacity(eps.len());
    for t in &tenants {
        for e in eps.iter().filter(|e| e.tenant_id == t.id) {
            let rows = decisions.remove(&e.id).into_iter().collect();
            endpoints_out.push(assemble(t, e, horizons.get(&e.scheme), rows)?);
        }
    }
    let mut current: Vec<HorizonView> = horizons.into_values().map(HorizonView::from).collect();
    current.sort_by(|a, b| a.scheme.cmp(&b.scheme));
    let horizon_history = horizon::Entity::find()
        .order_by_asc(horizon::Column::Scheme)
        .order_by_desc(horizon::Column::Version)
        .all(db)
        .await?
        .into_iter()
        .map(HorizonView::from)
        .collect();
    Ok(RetentionOverview { horizons: current, horizon_history, endpoints: endpoints_out })
}

fn check_dedup(dedup: i64, horizon: &horizon::Model) -> DomainResult<i64> {
    if dedup < horizon.horizon_secs {
        return Err(DomainError::invalid(
            "below_redelivery_horizon",
            format!(
                "dedup retention {} is below the {} redelivery horizon of {}: a redelivery inside it would apply twice",
                human(dedup),
                horizon.scheme,
                human(horizon.horizon_secs)
            ),
        ));
    }
    if dedup > MAX_RETENTION_SECS {
        return Err(DomainError::invalid(
            "retention_too_long",
            format!("dedup retention must be at most {}", human(MAX_RETENTION_SECS)),
        ));
    }
    Ok(dedup)
}

/// A dedup retention below the sender's manual resend window lets a person's
/// resend of an older event apply twice: refused unless the risk is accepted.
fn check_manual_resend(dedup: i64, horizon: &horizon::Model, accept_risk: bool) -> DomainResult<bool> {
    let below = dedup < horizon.manual_resend_secs;
    if below && !accept_risk {
        return Err(DomainError::invalid(
            "below_manual_resend",
            format!(
                "dedup retention {} is below the {} manual resend window of {} ({}): an event resent by hand \
                 after its claim is purged would apply twice; pass accept_risk (CLI --accept-risk) to record \
                 this decision anyway",
                human(dedup),
                horizon.scheme,
                human(horizon.manual_resend_secs),
                horizon.manual_resend_source.as_deref().unwrap_or("the sender's documentation")
            ),
        ));
    }
    Ok(below)
}

fn check_body(body: i64, dedup: i64) -> DomainResult<i64> {
    if body < 0 {
        return Err(DomainError::invalid("invalid_body_retention", "body retention cannot be negative"));
    }
    if body > dedup {
        return Err(DomainError::invalid(
            "body_outlives_claim",
            format!(
                "body retention {} exceeds dedup retention {}: a body is deleted with its claim",
                human(body),
                human(dedup)
            ),
        ));
    }
    Ok(body)
}

/// Changes an endpoint's retention (a new version; audited).
pub async fn set(
    db: &DatabaseConnection,
    principal: &Principal,
    tenant_slug: &TenantSlug,
    endpoint_slug: &EndpointSlug,
    change: &RetentionChange,
) -> DomainResult<RetentionView> {
    let reason = require_reason(&change.reason)?;
    let txn = db::begin_write(db).await?;
    let (t, e) = endpoints::find(&txn, principal, tenant_slug, endpoint_slug).await?;
    let auth = principal.authorize(Permission::ManageRetention, Scope::Tenant(&t.id))?;
    // A no-op write on the endpoint row serialises concurrent changes, so
    // the next version number is read after any other change committed.
    endpoint::Entity::update_many()
        .col_expr(endpoint::Column::Enabled, Expr::col(endpoint::Column::Enabled))
        .filter(endpoint::Column::Id.eq(&e.id))
        .exec(&txn)
        .await?;
    let h = horizon_of(&txn, &e.scheme).await?;
    let rows = history(&txn, &e.id).await?;
    let before = rows.first().cloned();
    let dedup =
        check_dedup(change.dedup_secs.or(before.as_ref().map(|b| b.dedup_secs)).unwrap_or(DEFAULT_DEDUP_SECS), &h)?;
    let body =
        check_body(change.body_secs.or(before.as_ref().map(|b| b.body_secs)).unwrap_or(DEFAULT_BODY_SECS), dedup)?;
    // Only a dedup retention being set is checked: a body-only change leaves
    // an older decision as it was (flagged in the evidence if below).
    let accepted_risk = match change.dedup_secs {
        Some(_) => check_manual_resend(dedup, &h, change.accept_risk)?,
        None => false,
    };
    let next = before.as_ref().map_or(1, |b| b.version + 1);
    let kept_before = effective_dedup_secs(&txn, &e.id, &e.scheme).await?;
    version::Entity::insert(version::ActiveModel {
        endpoint_id: Set(e.id.clone()),
        version: Set(next),
        dedup_secs: Set(dedup),
        body_secs: Set(body),
        horizon_secs: Set(h.horizon_secs),
        actor: Set(auth.actor().name().to_owned()),
        reason: Set(reason.clone()),
        created_at: Set(clock::now_ms()),
    })
    .exec_without_returning(&txn)
    .await?;
    // GitHub's replay records (and those of an `hmac` profile without a
    // timestamp) last as long as the claims (see `replay`): a
    // longer retention keeps the ones held longer too.
    if endpoints::signs_no_timestamp(&e) {
        replay::extend(&txn, &e.tenant_id, &e.id, (dedup.max(h.horizon_secs) - kept_before) * 1000).await?;
    }
    audit::record(
        &txn,
        auth.actor(),
        Change {
            action: "retention.set",
            target_kind: "endpoint",
            target_id: &format!("{}/{}", t.slug, e.slug),
            tenant_id: Some(&t.id),
            before: before.map(|b| json!({"dedup_secs": b.dedup_secs, "body_secs": b.body_secs, "version": b.version})),
            after: Some(json!({
                "dedup_secs": dedup,
                "body_secs": body,
                "horizon_secs": h.horizon_secs,
                "manual_resend_secs": h.manual_resend_secs,
                "accepted_risk": accepted_risk,
                "version": next,
                "reason": reason,
            })),
        },
    )
    .await?;
    txn.commit().await?;
    get(db, principal, tenant_slug, endpoint_slug).await
}

/// Changes a scheme's redelivery horizon (admin only; a new version,
/// audited). Refused while any endpoint of the scheme keeps claims for less
/// than the new horizon: those decisions must be raised first, on record.
pub async fn set_horizon(
    db: &DatabaseConnection,
    principal: &Principal,
    scheme: &str,
    horizon_secs: i64,
    reason: &str,
) -> DomainResult<HorizonView> {
    let scheme = crate::registry::parse_scheme(scheme)?;
    let reason = require_reason(reason)?;
    if !(MIN_HORIZON_SECS..=MAX_HORIZON_SECS).contains(&horizon_secs) {
        return Err(DomainError::invalid(
            "invalid_horizon",
            format!("a redelivery horizon must be between {} and {}", human(MIN_HORIZON_SECS), human(MAX_HORIZON_SECS)),
        ));
    }
    let auth = principal.authorize(Permission::ManageRetention, Scope::Global)?;
    let txn = db::begin_write(db).await?;
    let before = horizon_of(&txn, scheme.as_str()).await?;
    let eps = endpoint::Entity::find().filter(endpoint::Column::Scheme.eq(scheme.as_str())).all(&txn).await?;
    let decisions = current_decisions(&txn).await?;
    let mut short: Vec<String> = Vec::new();
    for e in &eps {
        if decisions.get(&e.id).is_some_and(|d| d.dedup_secs < horizon_secs) {
            let slug = tenant::Entity::find_by_id(&e.tenant_id)
                .one(&txn)
                .await?
                .map_or_else(|| e.tenant_id.clone(), |t| t.slug);
            short.push(format!("{slug}/{}", e.slug));
        }
    }
    if !short.is_empty() {
        short.sort();
        return Err(DomainError::conflict(
            "retention_below_new_horizon",
            format!(
                "raise the dedup retention of these endpoints to at least {} first: {}",
                human(horizon_secs),
                short.join(", ")
            ),
        ));
    }
    let row = horizon::Model {
        scheme: scheme.as_str().to_owned(),
        version: before.version + 1,
        horizon_secs,
        actor: auth.actor().name().to_owned(),
        reason: reason.clone(),
        created_at: clock::now_ms(),
        source: None,
        // A person changes the automatic window; the sender's manual one
        // stays as recorded.
        manual_resend_secs: before.manual_resend_secs,
        manual_resend_source: before.manual_resend_source.clone(),
    };
    horizon::Entity::insert(horizon::ActiveModel::from(row.clone())).exec_without_returning(&txn).await.map_err(
        db::conflict_if_unique("concurrent_change", "the horizon was changed at the same moment; reload and try again"),
    )?;
    audit::record(
        &txn,
        auth.actor(),
        Change {
            action: "retention.horizon",
            target_kind: "scheme",
            target_id: scheme.as_str(),
            tenant_id: None,
            before: Some(json!({"horizon_secs": before.horizon_secs, "version": before.version})),
            after: Some(json!({"horizon_secs": horizon_secs, "version": row.version, "reason": reason})),
        },
    )
    .await?;
    txn.commit().await?;
    Ok(row.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_and_print() {
        assert_eq!(parse_duration("30d").unwrap(), 30 * DAY_SECS);
        assert_eq!(parse_duration("1d 12h").unwrap(), DAY_SECS + 12 * HOUR_SECS);
        assert_eq!(parse_duration("90m").unwrap(), 5_400);
        assert_eq!(parse_duration("45s").unwrap(), 45);
        for bad in ["", "30", "d", "3x", "-1d", "1.5d", "99999999999999999999d"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} must be refused");
        }
        assert_eq!(human(30 * DAY_SECS), "30 d");
        assert_eq!(human(DAY_SECS + 3 * HOUR_SECS), "1 d 3 h");
        assert_eq!(human(5_400), "1 h 30 min");
    }
}
