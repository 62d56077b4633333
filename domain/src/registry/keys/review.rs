//! The reviewer's side: approve or reject a pending key's scope (four eyes),
//! the review queue and the decision history.

use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect, Set,
};
use serde_json::{Value, json};

use super::{
    Approval, DEFAULT_OVERLAP_SECS, KeyFilter, Loaded, MAX_RETIRING_PER_ENDPOINT, list, load, load_for_change,
    retiring_count, scope_value, summary, validate_comment, validate_person, view,
};
use crate::{
    audit::{self, Change},
    auth::{Actor, Authorized, Principal, Scope},
    clock, db,
    entity::{key_approval, signing_key},
    error::{DomainError, DomainResult},
    ids,
};
use views::ids::KeyId;
use views::{
    decision::Decision,
    keys::{ApprovalView, KeyStatus, KeyView, ReviewItem},
    roles::Permission,
    scheme::EventTypes,
};

async fn record_approval<C: ConnectionTrait>(
    conn: &C,
    l: &Loaded,
    decision: Decision,
    reviewer: &str,
    comment: &str,
    now: i64,
) -> DomainResult<()> {
    let types = EventTypes::from_json(&l.key.event_types);
    key_approval::ActiveModel {
        id: Set(ids::new_id()),
        key_id: Set(l.key.id.clone()),
        decision: Set(decision),
        reviewer: Set(reviewer.to_owned()),
        comment: Set(comment.to_owned()),
        scope_hash: Set(l.key.scope_hash.clone()),
        scope_summary: Set(scope_value(&l.tenant, &l.endpoint, &types).to_string()),
        decided_at: Set(now),
    }
    .insert(conn)
    .await?;
    Ok(())
}

/// Makes a pending key active under its current (just approved) scope. If it
/// replaces a still-active key, that key starts retiring now.
async fn activate<C: ConnectionTrait>(
    conn: &C,
    actor: &Actor,
    l: &Loaded,
    now: i64,
) -> DomainResult<signing_key::Model> {
    if let Some(old_id) = &l.key.replaces_key_id
        && let Some(old) = signing_key::Entity::find_by_id(old_id.clone()).one(conn).await?
        && old.status == KeyStatus::Active
    {
        if retiring_count(conn, &l.endpoint.id, now).await? >= MAX_RETIRING_PER_ENDPOINT {
            return Err(DomainError::conflict(
                "too_many_retiring",
                format!(
                    "endpoint {} already has {MAX_RETIRING_PER_ENDPOINT} keys in their overlap; \
                     wait for one to expire or revoke one",
                    l.endpoint.slug
                ),
            ));
        }
        let overlap = l.key.overlap_secs.unwrap_or(DEFAULT_OVERLAP_SECS);
        let before = view(&old, &l.tenant, &l.endpoint, now)?;
        let mut a: signing_key::ActiveModel = old.into();
        a.status = Set(KeyStatus::Retiring);
        a.expires_at = Set(Some(now + overlap * 1000));
        let old = a.update(conn).await?;
        let after = view(&old, &l.tenant, &l.endpoint, now)?;
        audit::record(
            conn,
            actor,
            Change {
                action: "key.retire",
                target_kind: "key",
                target_id: &old.id,
                tenant_id: Some(&l.tenant.id),
                before: Some(summary(&before)),
                after: Some(json!({"status": after.status, "expires_at": after.expires_at, "replaced_by": l.key.id})),
            },
        )
        .await?;
    }
    let mut a: signing_key::ActiveModel = l.key.clone().into();
    a.status = Set(KeyStatus::Active);
    a.activated_at = Set(Some(now));
    a.approved_scope_hash = Set(Some(l.key.scope_hash.clone()));
    Ok(a.update(conn).await?)
}

/// Records an immediate approval if requested (and permitted), then returns
/// the final row.
pub(super) async fn maybe_approve<C: ConnectionTrait>(
    conn: &C,
    principal: &Principal,
    actor: &Actor,
    l: Loaded,
    approval: &Approval,
    now: i64,
) -> DomainResult<signing_key::Model> {
    match approval {
        Approval::Pending => Ok(l.key),
        Approval::ApproveAs { reviewer, comment } => {
            principal.authorize(Permission::ReviewKeys, Scope::Tenant(&l.tenant.id))?;
            let reviewer = validate_person("reviewer", reviewer)?;
            four_eyes(&l.key, &reviewer)?;
            let comment = validate_comment("comment", comment, false)?;
            record_approval(conn, &l, Decision::Approved, &reviewer, &comment, now).await?;
            let key = activate(conn, actor, &l, now).await?;
            audit::record(
                conn,
                actor,
                Change {
                    action: "key.approve",
                    target_kind: "key",
                    target_id: &key.id,
                    tenant_id: Some(&l.tenant.id),
                    before: Some(json!({"status": "pending_approval"})),
                    after: Some(json!({
                        "status": "active",
                        "reviewer": reviewer,
                        "comment": comment,
                        "scope_hash": key.scope_hash,
                    })),
                },
            )
            .await?;
            Ok(key)
        }
    }
}

/// Four eyes: whoever provisioned, rotated or last re-scoped a key (user,
/// token or the CLI's operator, by the name recorded as its creator or
/// `scope_changed_by`) cannot be recorded as its approver. Provision-and-approve must name another reviewer, and an
/// approval that names nobody is recorded under the approving caller's own
/// name, so a creator approving their own key is refused. Admins included.
fn four_eyes(key: &signing_key::Model, reviewer: &str) -> DomainResult<()> {
    let authored = if reviewer == key.created_by {
        "created this key"
    } else if key.scope_changed_by.as_deref() == Some(reviewer) {
        "changed this key's scope"
    } else {
        return Ok(());
    };
    Err(DomainError::Refused {
        code: "self_approval",
        message: format!("{reviewer} {authored}, so another reviewer must approve its scope"),
    })
}

/// A key awaiting review, loaded and locked for a reviewer's decision.
async fn load_pending<C: ConnectionTrait>(
    conn: &C,
    principal: &Principal,
    key_id: &str,
) -> DomainResult<(Loaded, Authorized)> {
    let (l, auth) = load_for_change(conn, principal, key_id, Permission::ReviewKeys).await?;
    if l.key.status != KeyStatus::PendingApproval {
        return Err(DomainError::conflict(
            "not_pending",
            format!("key {key_id} is {}, not pending approval", l.key.status),
        ));
    }
    Ok((l, auth))
}

/// Approves a pending key's scope.
pub async fn approve(
    db: &DatabaseConnection,
    principal: &Principal,
    key_id: &KeyId,
    reviewer: Option<&str>,
    comment: &str,
) -> DomainResult<KeyView> {
    let now = clock::now_ms();
    let txn = db::begin_write(db).await?;
    let (l, auth) = load_pending(&txn, principal, key_id.as_str()).await?;
    // A signed-in creator cannot approve under someone else's name either.
    if matches!(auth.actor(), Actor::User { .. } | Actor::Token { .. }) {
        four_eyes(&l.key, auth.actor().name())?;
    }
    let reviewer = reviewer.unwrap_or(auth.actor().name()).to_owned();
    let approval = Approval::ApproveAs { reviewer, comment: comment.to_owned() };
    let key = maybe_approve(&txn, principal, auth.actor(), l.clone(), &approval, now).await?;
    txn.commit().await?;
    view(&key, &l.tenant, &l.endpoint, now)
}

/// Declines a pending key's scope. A comment is required.
pub async fn reject(
    db: &DatabaseConnection,
    principal: &Principal,
    key_id: &KeyId,
    reviewer: Option<&str>,
    comment: &str,
) -> DomainResult<KeyView> {
    let now = clock::now_ms();
    let txn = db::begin_write(db).await?;
    let (l, auth) = load_pending(&txn, principal, key_id.as_str()).await?;
    let reviewer = validate_person("reviewer", reviewer.unwrap_or(auth.actor().name()))?;
    let comment = validate_comment("comment explaining the rejection", comment, true)?;
    record_approval(&txn, &l, Decision::Rejected, &reviewer, &comment, now).await?;
    let mut a: signing_key::ActiveModel = l.key.clone().into();
    a.status = Set(KeyStatus::Rejected);
    let key = a.update(&txn).await?;
    audit::record(
        &txn,
        auth.actor(),
        Change {
            action: "key.reject",
            target_kind: "key",
            target_id: key_id.as_str(),
            tenant_id: Some(&l.tenant.id),
            before: Some(json!({"status": "pending_approval"})),
            after: Some(json!({"status": "rejected", "reviewer": reviewer, "comment": comment})),
        },
    )
    .await?;
    txn.commit().await?;
    view(&key, &l.tenant, &l.endpoint, now)
}

fn approval_view(a: key_approval::Model) -> DomainResult<ApprovalView> {
    Ok(ApprovalView {
        key_id: crate::ids::stored(&a.key_id)?,
        decision: a.decision,
        reviewer: a.reviewer,
        comment: a.comment,
        scope_hash: a.scope_hash,
        scope: serde_json::from_str(&a.scope_summary).unwrap_or(Value::Null),
        decided_at: clock::rfc3339(a.decided_at),
    })
}

/// Reviewer decisions, newest first; for one key or across what the caller
/// may see.
pub async fn approval_history(
    db: &DatabaseConnection,
    principal: &Principal,
    key_id: Option<&KeyId>,
    limit: u64,
) -> DomainResult<Vec<ApprovalView>> {
    history(db, principal, key_id.map(KeyId::as_str), limit).await
}

/// [`approval_history`] for a key id as stored.
async fn history(
    db: &DatabaseConnection,
    principal: &Principal,
    key_id: Option<&str>,
    limit: u64,
) -> DomainResult<Vec<ApprovalView>> {
    let mut q = key_approval::Entity::find().order_by_desc(key_approval::Column::DecidedAt).limit(limit.clamp(1, 500));
    if let Some(id) = key_id {
        let l = load(db, principal, id).await?;
        principal.authorize(Permission::ReadRegistry, Scope::Tenant(&l.tenant.id))?;
        q = q.filter(key_approval::Column::KeyId.eq(id));
    } else if let Some(t) = principal.tenant_filter() {
        principal.authorize(Permission::ReadRegistry, Scope::Tenant(t))?;
        let ids: Vec<String> = signing_key::Entity::find()
            .filter(signing_key::Column::TenantId.eq(t))
            .select_only()
            .column(signing_key::Column::Id)
            .into_tuple()
            .all(db)
            .await?;
        q = q.filter(key_approval::Column::KeyId.is_in(ids));
    } else {
        principal.authorize(Permission::ReadRegistry, Scope::Global)?;
    }
    q.all(db).await?.into_iter().map(approval_view).collect()
}

/// The reviewer's queue: pending keys, oldest first, with their scope, the
/// key they replace and their decision history.
pub async fn review_queue(db: &DatabaseConnection, principal: &Principal) -> DomainResult<Vec<ReviewItem>> {
    let now = clock::now_ms();
    let pending =
        list(db, principal, &KeyFilter { status: Some(KeyStatus::PendingApproval), ..Default::default() }).await?;
    let mut out = Vec::with_capacity(pending.len());
    for key in pending.into_iter().rev() {
        let l = load(db, principal, key.key_id.as_str()).await?;
        let scope = scope_value(&l.tenant, &l.endpoint, &EventTypes::from_json(&l.key.event_types));
        let replaces = match &l.key.replaces_key_id {
            Some(id) => signing_key::Entity::find_by_id(id.clone())
                .one(db)
                .await?
                .map(|k| view(&k, &l.tenant, &l.endpoint, now))
                .transpose()?,
            None => None,
        };
        let history = history(db, principal, Some(key.key_id.as_str()), 50).await?;
        out.push(ReviewItem { key, scope, replaces, history });
    }
    Ok(out)
}
