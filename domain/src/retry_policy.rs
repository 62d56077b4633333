//! The per-tenant retry policy (docs/contract.md §3; the rollback switch of
//! docs/architecture.md#rollout-order-and-sign-off).
//!
//! `enabled`: a transient failure the receiver cannot overcome answers 503
//! and the provider retries. `disabled`: the event is quarantined (202) so no
//! provider retry is needed. Every change appends a version recording who,
//! when and why; rollback appends a version restoring the previous value, so
//! history is never rewritten. `tenants.retry_policy` mirrors the newest
//! version for the receiver's endpoint cache (effective within its 5 s TTL).
//!
//! The rollout order (docs/architecture.md#rollout-order-and-sign-off): deploy
//! the claim with delivery retries off, run the drills, then enable retries for
//! a small cohort. So a new tenant starts `disabled`, the console's cohort form
//! shows the latest drill run beside the tenants it would move, and enabling is
//! refused until the order is met ([`crate::rollout`]).

use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, Set, sea_query::Expr,
};
use serde_json::json;

use crate::{
    audit::{self, Change},
    auth::{Authorized, Principal, Scope},
    clock, db,
    entity::{retry_policy_version as version, tenant},
    error::{DomainError, DomainResult},
    registry::tenants,
    rollout::{self, Rollout},
    text::require_reason,
};
use views::ids::TenantSlug;
use views::{
    retry_policy::{PolicyVersionView, RetryPolicy, RetryPolicyView},
    roles::Permission,
};

/// The policy a request names, or a 422 `invalid_retry_policy` (what the
/// API, the console and the CLI answer for any other word).
pub fn parse(policy: &str) -> DomainResult<RetryPolicy> {
    RetryPolicy::parse(policy).ok_or_else(|| {
        DomainError::invalid(
            "invalid_retry_policy",
            format!("retry policy must be enabled or disabled, got {policy:?}"),
        )
    })
}

/// A requested policy's schema ([`parse`]).
#[cfg(feature = "openapi")]
pub fn policy_schema() -> utoipa::openapi::Object {
    let words: Vec<&str> = RetryPolicy::ALL.iter().map(|p| p.as_str()).collect();
    views::openapi::one_of(&words)
}

impl From<version::Model> for PolicyVersionView {
    fn from(v: version::Model) -> Self {
        PolicyVersionView {
            version: v.version,
            policy: v.policy.as_str().to_owned(),
            actor: v.actor,
            reason: v.reason,
            created_at: clock::rfc3339(v.created_at),
        }
    }
}

async fn history<C: ConnectionTrait>(conn: &C, tenant_id: &str) -> DomainResult<Vec<version::Model>> {
    Ok(version::Entity::find()
        .filter(version::Column::TenantId.eq(tenant_id))
        .order_by_desc(version::Column::Version)
        .all(conn)
        .await?)
}

pub(crate) async fn view<C: ConnectionTrait>(conn: &C, t: &tenant::Model) -> DomainResult<RetryPolicyView> {
    let rows = history(conn, &t.id).await?;
    Ok(RetryPolicyView {
        tenant: crate::ids::stored(&t.slug)?,
        policy: t.retry_policy,
        version: rows.first().map_or(0, |v| v.version),
        history: rows.into_iter().map(PolicyVersionView::from).collect(),
    })
}

pub async fn get(
    db: &DatabaseConnection,
    principal: &Principal,
    tenant_slug: &TenantSlug,
) -> DomainResult<RetryPolicyView> {
    let t = tenants::find(db, principal, tenant_slug).await?;
    principal.authorize(Permission::ReadRegistry, Scope::Tenant(&t.id))?;
    view(db, &t).await
}

/// Takes the tenant row's write lock (a no-op UPDATE locks on both engines)
/// so that concurrent changes read the history one after the other.
pub(crate) async fn lock<C: ConnectionTrait>(conn: &C, tenant_id: &str) -> DomainResult<()> {
    tenant::Entity::update_many()
        .col_expr(tenant::Column::RetryPolicy, Expr::col(tenant::Column::RetryPolicy))
        .filter(tenant::Column::Id.eq(tenant_id))
        .exec(conn)
        .await?;
    Ok(())
}

/// Appends a version inside `conn`'s transaction. The tenant row is updated
/// first: that write lock serialises concurrent changes, so the next version
/// number is read after any other change has committed.
pub(crate) async fn append<C: ConnectionTrait>(
    conn: &C,
    auth: &Authorized,
    t: &tenant::Model,
    policy: RetryPolicy,
    reason: &str,
    action: &str,
) -> DomainResult<()> {
    auth.ensure(Permission::ManageRetryPolicy, Some(&t.id))?;
    tenant::Entity::update_many()
        .col_expr(tenant::Column::RetryPolicy, Expr::value(policy))
        .filter(tenant::Column::Id.eq(&t.id))
        .exec(conn)
        .await?;
    let rows = history(conn, &t.id).await?;
    let before = rows.first().map(|v| v.policy);
    let next = rows.first().map_or(1, |v| v.version + 1);
    version::Entity::insert(version::ActiveModel {
        tenant_id: Set(t.id.clone()),
        version: Set(next),
        policy: Set(policy),
        actor: Set(auth.actor().name().to_owned()),
        reason: Set(reason.to_owned()),
        created_at: Set(clock::now_ms()),
    })
    .exec_without_returning(conn)
    .await?;
    audit::record(
        conn,
        auth.actor(),
        Change {
            action,
            target_kind: "tenant",
            target_id: &t.slug,
            tenant_id: Some(&t.id),
            before: before.map(|p| json!({"retry_policy": p})),
            after: Some(json!({"retry_policy": policy, "version": next, "reason": reason})),
        },
    )
    .await?;
    Ok(())
}

/// Sets one tenant's policy. Enabling passes the rollout gate
/// ([`rollout::check`]); disabling never waits for it.
pub async fn set(
    db: &DatabaseConnection,
    gate: &Rollout<'_>,
    principal: &Principal,
    tenant_slug: &TenantSlug,
    policy: RetryPolicy,
    reason: &str,
) -> DomainResult<RetryPolicyView> {
    set_cohort(db, gate, principal, std::slice::from_ref(tenant_slug), policy, reason).await?;
    get(db, principal, tenant_slug).await
}

/// Moves several tenants to `policy` in one transaction: all or none.
/// Returns how many tenants changed (a tenant already on `policy` still gets
/// a version, so the decision is on record).
pub async fn set_cohort(
    db: &DatabaseConnection,
    gate: &Rollout<'_>,
    principal: &Principal,
    tenant_slugs: &[TenantSlug],
    policy: RetryPolicy,
    reason: &str,
) -> DomainResult<usize> {
    let reason = require_reason(reason)?;
    if tenant_slugs.is_empty() {
        return Err(DomainError::invalid("no_tenants", "choose at least one tenant"));
    }
    if policy == RetryPolicy::Enabled {
        // Authorized first, so a refused caller learns nothing of the gate.
        let mut cohort = Vec::with_capacity(tenant_slugs.len());
        for slug in tenant_slugs {
            let t = tenants::find(db, principal, slug).await?;
            principal.authorize(Permission::ManageRetryPolicy, Scope::Tenant(&t.id))?;
            cohort.push(t);
        }
        rollout::check(db, gate, &cohort).await?;
    }
    let txn = db::begin_write(db).await?;
    for slug in tenant_slugs {
        let t = tenants::find(&txn, principal, slug).await?;
        let auth = principal.authorize(Permission::ManageRetryPolicy, Scope::Tenant(&t.id))?;
        append(&txn, &auth, &t, policy, &reason, "retry_policy.set").await?;
    }
    txn.commit().await?;
    Ok(tenant_slugs.len())
}

/// Restores the value of the version before the newest one. A rollback
/// that would enable retries passes the rollout gate like any enabling.
pub async fn rollback(
    db: &DatabaseConnection,
    gate: &Rollout<'_>,
    principal: &Principal,
    tenant_slug: &TenantSlug,
    reason: &str,
) -> DomainResult<RetryPolicyView> {
    let reason = require_reason(reason)?;
    {
        let t = tenants::find(db, principal, tenant_slug).await?;
        principal.authorize(Permission::ManageRetryPolicy, Scope::Tenant(&t.id))?;
        let rows = history(db, &t.id).await?;
        if rows.get(1).is_some_and(|v| v.policy == RetryPolicy::Enabled) {
            rollout::check(db, gate, std::slice::from_ref(&t)).await?;
        }
    }
    let txn = db::begin_write(db).await?;
    let t = tenants::find(&txn, principal, tenant_slug).await?;
    let auth = principal.authorize(Permission::ManageRetryPolicy, Scope::Tenant(&t.id))?;
    lock(&txn, &t.id).await?;
    let rows = history(&txn, &t.id).await?;
    let Some(previous) = rows.get(1) else {
        return Err(DomainError::conflict("nothing_to_roll_back", "this tenant's retry policy has only one version"));
    };
    let note = format!("rollback to v{}: {reason}", previous.version);
    append(&txn, &auth, &t, previous.policy, &note, "retry_policy.rollback").await?;
    txn.commit().await?;
    get(db, principal, tenant_slug).await
}
