//! Break-glass for the rollout order (issue 23 item 3): when the gate
//! ([`crate::rollout`]) refuses to enable a tenant's retries, a caller who
//! may set the policy can ask for an override with a reason
//! (`--override-reason`, API `override_reason`). Nothing changes until a
//! second person approves it (four eyes, as for a key's scope): the
//! approval appends the `enabled` version. Each step is audited as a
//! `retry_policy.` action, so each moves the audit checkpoint anchor.
//!
//! - One tenant per request: a cohort or a rollback is not overridden.
//! - A request is decided once (approved or rejected); a pending one
//!   expires after [`OVERRIDE_TTL_MS`] and can then only be asked again.
//! - One pending request per tenant at a time.
//! - When the gate passes, no override is recorded: the change goes
//!   through as an ordinary one.
//! - An approved override is a critical finding (`rollout_override`) in
//!   every later bundle until a drill run passed on this build and schema
//!   and an approved sign-off (the tenant's or deployment-wide) both
//!   postdate its approval ([`open`]).

use sea_orm::{
    ActiveModelTrait, ColumnTrait, Condition, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter,
    QueryOrder, QuerySelect, Set, sea_query::Expr,
};
use serde_json::json;

use crate::{
    audit::{self, Change},
    auth::{Actor, Principal, Scope},
    clock, db,
    entity::{drill_run, evidence_signoff, retry_policy_version, rollout_override as ovr, tenant},
    error::{DomainError, DomainResult},
    evidence::{identity, runs},
    ids,
    registry::{
        keys::{validate_comment, validate_person},
        tenants,
    },
    retry_policy,
    rollout::{self, Rollout},
    text::require_reason,
};
use views::ids::TenantSlug;
use views::{
    decision::Decision,
    evidence::DrillStatus,
    retry_policy::{OverrideStatus, RetryPolicy, RetryPolicyView, RolloutOverrideView},
    roles::Permission,
};

/// How long a request waits for its second person: 24 hours.
pub const OVERRIDE_TTL_MS: i64 = 24 * 3_600_000;
/// Requests listed per tenant, newest first.
pub const LIST_LIMIT: u64 = 50;

/// What a `set` with an override reason did.
#[derive(Debug)]
pub enum SetOutcome {
    /// The gate passed (or nothing was gated): changed as usual.
    Changed(RetryPolicyView),
    /// The gate refused: a request now waits for a second person.
    Requested(Box<RolloutOverrideView>),
}

fn view(row: ovr::Model, slug: &str, now: i64) -> RolloutOverrideView {
    let status = match row.status {
        OverrideStatus::PendingApproval if now > row.expires_at => OverrideStatus::Expired,
        s => s,
    };
    RolloutOverrideView {
        id: row.id,
        tenant: slug.to_owned(),
        status: status.as_str().to_owned(),
        requested_by: row.requested_by,
        override_reason: row.reason,
        reason: row.policy_reason,
        missing: serde_json::from_str(&row.missing).unwrap_or_default(),
        created_at: clock::rfc3339(row.created_at),
        expires_at: clock::rfc3339(row.expires_at),
        decided_by: row.decided_by,
        decided_at: clock::rfc3339_opt(row.decided_at),
        comment: row.comment,
        policy_version: row.policy_version,
    }
}

fn override_reason(text: &str) -> DomainResult<String> {
    require_reason(text).map_err(|e| match e {
        DomainError::Invalid { message, .. } => {
            DomainError::invalid("invalid_override_reason", format!("override_reason: {message}"))
        }
        other => other,
    })
}

/// `retry_policy::set` with break-glass: without `override_reason` it is
/// exactly `set`. With one, enabling that the gate refuses records a
/// pending request naming what is missing instead of failing; enabling
/// that the gate allows just happens, and so does disabling (never gated):
/// the reason is validated and not needed. (A 422 for it would refuse a
/// body the API's schema allows.)
pub async fn set(
    db: &DatabaseConnection,
    gate: &Rollout<'_>,
    principal: &Principal,
    tenant_slug: &TenantSlug,
    policy: RetryPolicy,
    reason: &str,
    override_reason: Option<&str>,
) -> DomainResult<SetOutcome> {
    let Some(why) = override_reason else {
        return Ok(SetOutcome::Changed(retry_policy::set(db, gate, principal, tenant_slug, policy, reason).await?));
    };
    let why = self::override_reason(why)?;
    let reason = require_reason(reason)?;
    if policy != RetryPolicy::Enabled {
        return Ok(SetOutcome::Changed(retry_policy::set(db, gate, principal, tenant_slug, policy, &reason).await?));
    }
    let t = tenants::find(db, principal, tenant_slug).await?;
    principal.authorize(Permission::ManageRetryPolicy, Scope::Tenant(&t.id))?;
    let missing = rollout::missing(db, gate, std::slice::from_ref(&t)).await?;
    if missing.is_empty() {
        return Ok(SetOutcome::Changed(retry_policy::set(db, gate, principal, tenant_slug, policy, &reason).await?));
    }
    Ok(SetOutcome::Requested(Box::new(request(db, principal, &t, &why, &reason, &missing).await?)))
}

async fn request(
    db: &DatabaseConnection,
    principal: &Principal,
    t: &tenant::Model,
    why: &str,
    reason: &str,
    missing: &[String],
) -> DomainResult<RolloutOverrideView> {
    let now = clock::now_ms();
    let txn = db::begin_write(db).await?;
    let auth = principal.authorize(Permission::ManageRetryPolicy, Scope::Tenant(&t.id))?;
    // Serialises requests for the tenant, so two cannot both be pending.
    retry_policy::lock(&txn, &t.id).await?;
    let waiting = ovr::Entity::find()
        .filter(ovr::Column::TenantId.eq(&t.id))
        .filter(ovr::Column::Status.eq(OverrideStatus::PendingApproval))
        .filter(ovr::Column::ExpiresAt.gte(now))
        .one(&txn)
        .await?;
    if let Some(w) = waiting {
        return Err(DomainError::conflict(
            "override_pending",
            format!("override {} for {} already waits for a second person's approval", w.id, t.slug),
        ));
    }
    let row = ovr::ActiveModel {
        id: Set(ids::new_id()),
        tenant_id: Set(t.id.clone()),
        requested_by: Set(auth.actor().name().to_owned()),
        requested_by_kind: Set(auth.actor().kind().to_owned()),
        reason: Set(why.to_owned()),
        policy_reason: Set(reason.to_owned()),
        missing: Set(serde_json::to_string(missing).unwrap_or_else(|_| "[]".into())),
        status: Set(OverrideStatus::PendingApproval),
        created_at: Set(now),
        expires_at: Set(now + OVERRIDE_TTL_MS),
        decided_by: Set(None),
        decided_at: Set(None),
        comment: Set(None),
        policy_version: Set(None),
    }
    .insert(&txn)
    .await?;
    audit::record(
        &txn,
        auth.actor(),
        Change {
            action: "retry_policy.override_request",
            target_kind: "tenant",
            target_id: &t.slug,
            tenant_id: Some(&t.id),
            before: None,
            after: Some(json!({"override": row.id, "override_reason": why, "reason": reason, "missing": missing})),
        },
    )
    .await?;
    txn.commit().await?;
    Ok(view(row, &t.slug, now))
}

/// A request of the tenant that can still be decided, inside `conn`'s
/// transaction.
async fn load_pending<C: ConnectionTrait>(conn: &C, t: &tenant::Model, id: &str, now: i64) -> DomainResult<ovr::Model> {
    let row = ovr::Entity::find_by_id(id.to_owned())
        .filter(ovr::Column::TenantId.eq(&t.id))
        .one(conn)
        .await?
        .ok_or(DomainError::NotFound)?;
    if row.status != OverrideStatus::PendingApproval {
        return Err(DomainError::conflict("override_decided", format!("override {id} was already {}", row.status)));
    }
    if now > row.expires_at {
        return Err(DomainError::conflict(
            "override_expired",
            format!("override {id} expired at {} without a decision; ask again", clock::rfc3339(row.expires_at)),
        ));
    }
    Ok(row)
}

/// Marks the request decided, unless another decision got there first.
async fn decide<C: ConnectionTrait>(
    conn: &C,
    id: &str,
    status: OverrideStatus,
    by: &str,
    comment: &str,
    now: i64,
) -> DomainResult<()> {
    let done = ovr::Entity::update_many()
        .col_expr(ovr::Column::Status, Expr::value(status))
        .col_expr(ovr::Column::DecidedBy, Expr::value(by))
        .col_expr(ovr::Column::DecidedAt, Expr::value(now))
        .col_expr(ovr::Column::Comment, Expr::value(comment))
        .filter(ovr::Column::Id.eq(id))
        .filter(ovr::Column::Status.eq(OverrideStatus::PendingApproval))
        .exec(conn)
        .await?;
    if done.rows_affected != 1 {
        return Err(DomainError::conflict("override_decided", format!("override {id} was already decided")));
    }
    Ok(())
}

/// Four eyes: whoever asked for the override cannot approve it, by their
/// own name or by naming another (a signed-in user or token is checked by
/// its own name too; the CLI names its reviewer, as for a key's scope).
fn four_eyes(row: &ovr::Model, actor: &Actor, reviewer: &str) -> DomainResult<()> {
    let signed_in = matches!(actor, Actor::User { .. } | Actor::Token { .. });
    if reviewer == row.requested_by || (signed_in && actor.name() == row.requested_by) {
        return Err(DomainError::Refused {
            code: "self_approval",
            message: format!("{} asked for this override, so a second person must approve it", row.requested_by),
        });
    }
    Ok(())
}

/// Approves a pending request: enables the tenant's retries as a new
/// policy version whose reason records the override.
pub async fn approve(
    db: &DatabaseConnection,
    principal: &Principal,
    tenant_slug: &TenantSlug,
    id: &str,
    reviewer: Option<&str>,
    comment: &str,
) -> DomainResult<RolloutOverrideView> {
    let now = clock::now_ms();
    let txn = db::begin_write(db).await?;
    let t = tenants::find(&txn, principal, tenant_slug).await?;
    let auth = principal.authorize(Permission::ManageRetryPolicy, Scope::Tenant(&t.id))?;
    retry_policy::lock(&txn, &t.id).await?;
    let row = load_pending(&txn, &t, id, now).await?;
    let reviewer = validate_person("reviewer", reviewer.unwrap_or(auth.actor().name()))?;
    four_eyes(&row, auth.actor(), &reviewer)?;
    let comment = validate_comment("comment", comment, false)?;
    decide(&txn, id, OverrideStatus::Approved, &reviewer, &comment, now).await?;
    let note = format!(
        "break-glass override {id} requested by {} ({}) and approved by {reviewer}: {}",
        row.requested_by, row.reason, row.policy_reason
    );
    retry_policy::append(&txn, &auth, &t, RetryPolicy::Enabled, &note, "retry_policy.override_approve").await?;
    let version = retry_policy_version::Entity::find()
        .filter(retry_policy_version::Column::TenantId.eq(&t.id))
        .order_by_desc(retry_policy_version::Column::Version)
        .one(&txn)
        .await?
        .map(|v| v.version);
    ovr::Entity::update_many()
        .col_expr(ovr::Column::PolicyVersion, Expr::value(version))
        .filter(ovr::Column::Id.eq(id))
        .exec(&txn)
        .await?;
    let row = ovr::Entity::find_by_id(id.to_owned()).one(&txn).await?.ok_or(DomainError::NotFound)?;
    txn.commit().await?;
    Ok(view(row, &t.slug, now))
}

/// Declines a pending request (a comment is required). The requester may
/// withdraw their own request this way.
pub async fn reject(
    db: &DatabaseConnection,
    principal: &Principal,
    tenant_slug: &TenantSlug,
    id: &str,
    reviewer: Option<&str>,
    comment: &str,
) -> DomainResult<RolloutOverrideView> {
    let now = clock::now_ms();
    let txn = db::begin_write(db).await?;
    let t = tenants::find(&txn, principal, tenant_slug).await?;
    let auth = principal.authorize(Permission::ManageRetryPolicy, Scope::Tenant(&t.id))?;
    retry_policy::lock(&txn, &t.id).await?;
    load_pending(&txn, &t, id, now).await?;
    let reviewer = validate_person("reviewer", reviewer.unwrap_or(auth.actor().name()))?;
    let comment = validate_comment("comment explaining the rejection", comment, true)?;
    decide(&txn, id, OverrideStatus::Rejected, &reviewer, &comment, now).await?;
    audit::record(
        &txn,
        auth.actor(),
        Change {
            action: "retry_policy.override_reject",
            target_kind: "tenant",
            target_id: &t.slug,
            tenant_id: Some(&t.id),
            before: Some(json!({"override": id, "status": OverrideStatus::PendingApproval})),
            after: Some(
                json!({"override": id, "status": OverrideStatus::Rejected, "reviewer": reviewer, "comment": comment}),
            ),
        },
    )
    .await?;
    let row = ovr::Entity::find_by_id(id.to_owned()).one(&txn).await?.ok_or(DomainError::NotFound)?;
    txn.commit().await?;
    Ok(view(row, &t.slug, now))
}

/// The tenant's requests, newest first (at most [`LIST_LIMIT`]).
pub async fn list(
    db: &DatabaseConnection,
    principal: &Principal,
    tenant_slug: &TenantSlug,
) -> DomainResult<Vec<RolloutOverrideView>> {
    let t = tenants::find(db, principal, tenant_slug).await?;
    principal.authorize(Permission::ReadRegistry, Scope::Tenant(&t.id))?;
    let now = clock::now_ms();
    Ok(ovr::Entity::find()
        .filter(ovr::Column::TenantId.eq(&t.id))
        .order_by_desc(ovr::Column::CreatedAt)
        .order_by_desc(ovr::Column::Id)
        .limit(LIST_LIMIT)
        .all(db)
        .await?
        .into_iter()
        .map(|r| view(r, &t.slug, now))
        .collect())
}

/// Approved overrides of `t` that the drills and the review have not caught
/// up with: no passing drill run on this build and schema, or no approved
/// sign-off (the tenant's or deployment-wide), finished after the approval.
pub async fn open(db: &DatabaseConnection, tenant_id: &str, slug: &str) -> DomainResult<Vec<RolloutOverrideView>> {
    let approved = ovr::Entity::find()
        .filter(ovr::Column::TenantId.eq(tenant_id))
        .filter(ovr::Column::Status.eq(OverrideStatus::Approved))
        .order_by_desc(ovr::Column::DecidedAt)
        .all(db)
        .await?;
    if approved.is_empty() {
        return Ok(Vec::new());
    }
    let drilled = last_drill_on_this_build(db).await?;
    let signed = evidence_signoff::Entity::find()
        .filter(evidence_signoff::Column::Decision.eq(Decision::Approved))
        .filter(
            Condition::any()
                .add(evidence_signoff::Column::TenantId.eq(tenant_id))
                .add(evidence_signoff::Column::TenantId.is_null()),
        )
        .order_by_desc(evidence_signoff::Column::At)
        .one(db)
        .await?
        .map(|s| s.at);
    let now = clock::now_ms();
    Ok(approved
        .into_iter()
        .filter(|o| {
            let at = o.decided_at.unwrap_or(i64::MAX);
            drilled.is_none_or(|d| d <= at) || signed.is_none_or(|s| s <= at)
        })
        .map(|o| view(o, slug, now))
        .collect())
}

/// When the newest passing drill run on this build and schema finished.
async fn last_drill_on_this_build(db: &DatabaseConnection) -> DomainResult<Option<i64>> {
    let build = identity::current().await;
    let schema = runs::schema_version(db).await?;
    let passed = drill_run::Entity::find()
        .filter(drill_run::Column::Status.eq(DrillStatus::Finished))
        .filter(drill_run::Column::Passed.eq(true))
        .order_by_desc(drill_run::Column::FinishedAt)
        .limit(200)
        .all(db)
        .await?;
    Ok(passed
        .into_iter()
        .find(|r| {
            r.schema_version == schema && identity::same_build(&r.version, &r.build_commit, &r.binary_sha256, &build)
        })
        .and_then(|r| r.finished_at))
}

/// The `rollout_override` finding's message for an open override.
pub fn finding_message(o: &RolloutOverrideView) -> String {
    format!(
        "retries were enabled by break-glass override {} (asked by {}: {}; approved by {} at {}) while missing: \
         {}. Clears once a drill run passes on this build and a bundle is approved after the approval",
        o.id,
        o.requested_by,
        o.override_reason,
        o.decided_by.as_deref().unwrap_or("?"),
        o.decided_at.as_deref().unwrap_or("?"),
        o.missing.join("; ")
    )
}
