//! Signing keys and their lifecycle.
//!
//! ```text
//! pending_approval ──approve──▶ active ──rotate──▶ retiring ──(expires_at)──▶ expired
//!        │                        │                   │
//!        └─reject─▶ rejected      └──────revoke───────┴──▶ revoked (immediate)
//! ```
//!
//! A key is scoped to one tenant, one endpoint and a set of event types (the
//! endpoint's or a subset). A reviewer approves the scope; the approval stores
//! the scope's hash, and a key verifies only while its current scope hash
//! equals the approved one, so a scope change needs a new approval.
//!
//! Rotation creates a replacement. The old key keeps working until the
//! replacement is active; only then does it start retiring for the chosen
//! overlap, so a replacement waiting for review never leaves the endpoint
//! without a working key. Every lifecycle change of an endpoint's keys first
//! locks that endpoint's row, so concurrent rotations cannot exceed the
//! two-retiring-keys limit or both replace one key.

use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, PaginatorTrait, QueryFilter,
    QueryOrder, QuerySelect, Set, sea_query::Expr,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{EventTypes, Scheme, validate_event_types};
use crate::{
    audit::{self, Change},
    auth::{Actor, Authorized, Permission, Principal, Scope},
    clock,
    crypto::{Aad, SigningSecret, sha256_hex},
    db,
    entity::{endpoint, key_approval, signing_key, tenant},
    error::{DomainError, DomainResult},
    ids,
    vault::Vault,
};

pub const DEFAULT_OVERLAP_SECS: i64 = 24 * 3600;
pub const MAX_OVERLAP_SECS: i64 = 7 * 24 * 3600;
pub const MIN_OVERLAP_SECS: i64 = 60;
pub const MAX_RETIRING_PER_ENDPOINT: u64 = 2;

pub use views::keys::{ApprovalView, KeyStatus, KeyView, ReviewItem};

/// A new key and its secret, which the caller shows exactly once.
#[derive(Debug)]
pub struct ProvisionedKey {
    pub key: KeyView,
    pub secret: SigningSecret,
}

/// Whether a new key is approved as it is created.
#[derive(Debug, Clone)]
pub enum Approval {
    /// Leave it pending for a reviewer.
    Pending,
    /// Approve at once, recorded under this reviewer's name. The caller
    /// must hold the review permission.
    ApproveAs { reviewer: String, comment: String },
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ProvisionRequest {
    pub owner: Option<String>,
    pub rotation_owner: Option<String>,
    /// Narrower than the endpoint's types; omitted: the endpoint's types.
    pub event_types: Option<Vec<String>>,
}

/// Filters for [`list`].
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct KeyFilter {
    pub tenant: Option<String>,
    pub endpoint: Option<String>,
    pub status: Option<KeyStatus>,
}

/// Everything a key's scope consists of; its hash is what gets approved.
fn scope_value(t: &tenant::Model, e: &endpoint::Model, types: &EventTypes) -> Value {
    json!({
        "tenant_id": t.id, "tenant": t.slug,
        "endpoint_id": e.id, "endpoint": e.slug,
        "scheme": e.scheme,
        "event_types": types.as_slice(),
    })
}

pub(crate) fn scope_hash(t: &tenant::Model, e: &endpoint::Model, types: &EventTypes) -> String {
    // Ids, not slugs: a slug could in principle be reused by another row.
    let canonical = json!([t.id, e.id, e.scheme, types.as_slice()]);
    sha256_hex(canonical.to_string().as_bytes())
}

fn effective_status(k: &signing_key::Model, now: i64) -> KeyStatus {
    let stored = KeyStatus::parse(&k.status).unwrap_or(KeyStatus::Revoked);
    match (stored, k.expires_at) {
        (KeyStatus::Retiring, Some(at)) if at <= now => KeyStatus::Expired,
        (s, _) => s,
    }
}

fn view(k: &signing_key::Model, t: &tenant::Model, e: &endpoint::Model, now: i64) -> KeyView {
    KeyView {
        key_id: k.id.clone(),
        tenant: t.slug.clone(),
        endpoint: e.slug.clone(),
        scheme: super::parse_scheme(&e.scheme).unwrap_or(Scheme::StandardWebhooks),
        status: effective_status(k, now),
        event_types: EventTypes::from_json(&k.event_types).as_slice().to_vec(),
        scope_approved: k.approved_scope_hash.as_deref() == Some(k.scope_hash.as_str()),
        scope_hash: k.scope_hash.clone(),
        owner: k.owner.clone(),
        rotation_owner: k.rotation_owner.clone(),
        created_by: k.created_by.clone(),
        created_at: clock::rfc3339(k.created_at),
        activated_at: clock::rfc3339_opt(k.activated_at),
        expires_at: clock::rfc3339_opt(k.expires_at),
        expires_at_ms: k.expires_at,
        revoked_at: clock::rfc3339_opt(k.revoked_at),
        revoked_reason: k.revoked_reason.clone(),
        replaces_key_id: k.replaces_key_id.clone(),
        overlap_secs: k.overlap_secs,
        last_verified_at: clock::rfc3339_opt(k.last_verified_at),
        verified_count: k.verified_count,
        failure_count: k.failure_count,
        last_failure_at: clock::rfc3339_opt(k.last_failure_at),
        last_failure_reason: k.last_failure_reason.clone(),
    }
}

fn summary(v: &KeyView) -> Value {
    json!({
        "status": v.status, "endpoint": v.endpoint, "event_types": v.event_types,
        "owner": v.owner, "expires_at": v.expires_at, "scope_hash": v.scope_hash,
    })
}

/// The longest owner or reviewer name, in characters as sent.
pub const MAX_PERSON_CHARS: usize = 200;
/// The longest approval comment or revocation reason, in characters as sent.
pub const MAX_COMMENT_CHARS: usize = 1000;

/// An owner's or reviewer's name: not blank, at most [`MAX_PERSON_CHARS`].
pub fn validate_person(field: &'static str, text: &str) -> DomainResult<String> {
    if crate::text::is_blank(text) || !crate::text::fits(text, MAX_PERSON_CHARS) {
        return Err(DomainError::invalid("invalid_field", format!("{field} must be 1–{MAX_PERSON_CHARS} characters")));
    }
    Ok(text.trim().to_owned())
}

/// A comment (or reason): at most [`MAX_COMMENT_CHARS`]; not blank when
/// `required`.
pub fn validate_comment(field: &'static str, text: &str, required: bool) -> DomainResult<String> {
    if required && crate::text::is_blank(text) {
        return Err(DomainError::invalid("reason_required", format!("a {field} is required")));
    }
    if !crate::text::fits(text, MAX_COMMENT_CHARS) {
        return Err(DomainError::invalid(
            "invalid_field",
            format!("{field} must be at most {MAX_COMMENT_CHARS} characters"),
        ));
    }
    Ok(text.trim().to_owned())
}

/// An optional owner's or reviewer's name ([`validate_person`]).
#[cfg(feature = "openapi")]
pub fn person_schema() -> utoipa::openapi::Object {
    crate::schema::nullable(crate::text::schema(MAX_PERSON_CHARS))
}

/// An optional comment ([`validate_comment`]).
#[cfg(feature = "openapi")]
pub fn comment_schema() -> utoipa::openapi::Object {
    crate::text::optional_schema(MAX_COMMENT_CHARS)
}

/// A required comment or reason ([`validate_comment`]).
#[cfg(feature = "openapi")]
pub fn required_comment_schema() -> utoipa::openapi::Object {
    crate::text::schema(MAX_COMMENT_CHARS)
}

/// Locks the endpoint row for the rest of the transaction (an UPDATE takes
/// a row lock on PostgreSQL; SQLite write transactions are already serial).
async fn lock_endpoint<C: ConnectionTrait>(conn: &C, endpoint_id: &str) -> DomainResult<()> {
    endpoint::Entity::update_many()
        .col_expr(endpoint::Column::Enabled, Expr::col(endpoint::Column::Enabled))
        .filter(endpoint::Column::Id.eq(endpoint_id))
        .exec(conn)
        .await?;
    Ok(())
}

/// A key with its tenant and endpoint, as the caller may see it.
#[derive(Clone)]
struct Loaded {
    key: signing_key::Model,
    tenant: tenant::Model,
    endpoint: endpoint::Model,
}

async fn load<C: ConnectionTrait>(conn: &C, principal: &Principal, key_id: &str) -> DomainResult<Loaded> {
    let key = signing_key::Entity::find_by_id(key_id.to_owned()).one(conn).await?.ok_or(DomainError::NotFound)?;
    if !principal.can_see_tenant(&key.tenant_id) {
        return Err(DomainError::NotFound);
    }
    let tenant = tenant::Entity::find_by_id(key.tenant_id.clone())
        .one(conn)
        .await?
        .filter(|t| !t.synthetic)
        .ok_or(DomainError::NotFound)?;
    let endpoint =
        endpoint::Entity::find_by_id(key.endpoint_id.clone()).one(conn).await?.ok_or(DomainError::NotFound)?;
    Ok(Loaded { key, tenant, endpoint })
}

/// Loads a key for a change: authorizes, locks its endpoint, then re-reads
/// the key under the lock.
async fn load_for_change<C: ConnectionTrait>(
    conn: &C,
    principal: &Principal,
    key_id: &str,
    permission: Permission,
) -> DomainResult<(Loaded, Authorized)> {
    let first = load(conn, principal, key_id).await?;
    let auth = principal.authorize(permission, Scope::Tenant(&first.tenant.id))?;
    lock_endpoint(conn, &first.endpoint.id).await?;
    let loaded = load(conn, principal, key_id).await?;
    auth.ensure(permission, Some(&loaded.key.tenant_id))?;
    Ok((loaded, auth))
}

async fn retiring_count<C: ConnectionTrait>(conn: &C, endpoint_id: &str, now: i64) -> DomainResult<u64> {
    Ok(signing_key::Entity::find()
        .filter(signing_key::Column::EndpointId.eq(endpoint_id))
        .filter(signing_key::Column::Status.eq("retiring"))
        .filter(signing_key::Column::ExpiresAt.gt(now))
        .count(conn)
        .await?)
}

async fn record_approval<C: ConnectionTrait>(
    conn: &C,
    l: &Loaded,
    decision: &str,
    reviewer: &str,
    comment: &str,
    now: i64,
) -> DomainResult<()> {
    let types = EventTypes::from_json(&l.key.event_types);
    key_approval::ActiveModel {
        id: Set(ids::new_id()),
        key_id: Set(l.key.id.clone()),
        decision: Set(decision.to_owned()),
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
        && old.status == "active"
    {
        if retiring_count(conn, &l.endpoint.id, now).await? >= MAX_RETIRING_PER_ENDPOINT {
            return Err(DomainError::conflict(
                "too_many_retiring",
                format!(
                    "endpoint {} already has {MAX_RETIRING_PER_ENDPOINT} keys in their overlap; wait for one to expire or revoke one",
                    l.endpoint.slug
                ),
            ));
        }
        let overlap = l.key.overlap_secs.unwrap_or(DEFAULT_OVERLAP_SECS);
        let before = view(&old, &l.tenant, &l.endpoint, now);
        let mut a: signing_key::ActiveModel = old.into();
        a.status = Set("retiring".into());
        a.expires_at = Set(Some(now + overlap * 1000));
        let old = a.update(conn).await?;
        let after = view(&old, &l.tenant, &l.endpoint, now);
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
    a.status = Set("active".into());
    a.activated_at = Set(Some(now));
    a.approved_scope_hash = Set(Some(l.key.scope_hash.clone()));
    Ok(a.update(conn).await?)
}

/// Inserts a new key row with a sealed secret.
#[allow(clippy::too_many_arguments)]
async fn insert_key<C: ConnectionTrait>(
    conn: &C,
    vault: &Vault,
    t: &tenant::Model,
    e: &endpoint::Model,
    types: &EventTypes,
    owner: String,
    rotation_owner: String,
    created_by: &str,
    replaces: Option<(&str, i64)>,
    now: i64,
) -> DomainResult<(signing_key::Model, SigningSecret)> {
    let key_id = ids::new_key_id();
    let secret = SigningSecret::generate();
    let (sealed, kek_version) = vault.seal(&Aad::signing_key(&t.id, &e.id, &key_id), secret.expose().as_bytes())?;
    let model = signing_key::ActiveModel {
        id: Set(key_id),
        tenant_id: Set(t.id.clone()),
        endpoint_id: Set(e.id.clone()),
        status: Set("pending_approval".into()),
        event_types: Set(types.to_json()),
        scope_hash: Set(scope_hash(t, e, types)),
        approved_scope_hash: Set(None),
        secret_ciphertext: Set(sealed),
        kek_version: Set(kek_version as i32),
        owner: Set(owner),
        rotation_owner: Set(rotation_owner),
        replaces_key_id: Set(replaces.map(|(id, _)| id.to_owned())),
        overlap_secs: Set(replaces.map(|(_, o)| o)),
        created_by: Set(created_by.to_owned()),
        created_at: Set(now),
        activated_at: Set(None),
        expires_at: Set(None),
        revoked_at: Set(None),
        revoked_reason: Set(None),
        last_verified_at: Set(None),
        verified_count: Set(0),
        failure_count: Set(0),
        last_failure_at: Set(None),
        last_failure_reason: Set(None),
        scope_changed_by: Set(None),
    }
    .insert(conn)
    .await?;
    Ok((model, secret))
}

/// Records an immediate approval if requested (and permitted), then returns
/// the final row.
async fn maybe_approve<C: ConnectionTrait>(
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
            record_approval(conn, &l, "approved", &reviewer, &comment, now).await?;
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
                    after: Some(json!({"status": "active", "reviewer": reviewer, "comment": comment, "scope_hash": key.scope_hash})),
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

/// Creates a key for an endpoint. The secret is returned once and stored
/// only sealed.
pub async fn provision(
    db: &DatabaseConnection,
    vault: &Vault,
    principal: &Principal,
    tenant_slug: &str,
    endpoint_slug: &str,
    req: ProvisionRequest,
    approval: Approval,
) -> DomainResult<ProvisionedKey> {
    let now = clock::now_ms();
    let txn = db::begin_write(db).await?;
    let (t, e) = super::endpoints::find(&txn, principal, tenant_slug, endpoint_slug).await?;
    let auth = principal.authorize(Permission::ManageKeys, Scope::Tenant(&t.id))?;
    lock_endpoint(&txn, &e.id).await?;
    let endpoint_types = EventTypes::from_json(&e.event_types);
    let types = match &req.event_types {
        Some(list) => validate_event_types(list)?,
        None => endpoint_types.clone(),
    };
    if !endpoint_types.covers(&types) {
        return Err(DomainError::invalid(
            "scope_exceeds_endpoint",
            format!("a key may only be scoped to the endpoint's event types ({})", endpoint_types.describe()),
        ));
    }
    let owner = validate_person("owner", req.owner.as_deref().unwrap_or(auth.actor().name()))?;
    let rotation_owner = validate_person("rotation owner", req.rotation_owner.as_deref().unwrap_or(&owner))?;
    let (key, secret) =
        insert_key(&txn, vault, &t, &e, &types, owner, rotation_owner, auth.actor().name(), None, now).await?;
    audit::record(
        &txn,
        auth.actor(),
        Change {
            action: "key.provision",
            target_kind: "key",
            target_id: &key.id,
            tenant_id: Some(&t.id),
            before: None,
            after: Some(summary(&view(&key, &t, &e, now))),
        },
    )
    .await?;
    let l = Loaded { key, tenant: t, endpoint: e };
    let key = maybe_approve(&txn, principal, auth.actor(), l.clone(), &approval, now).await?;
    txn.commit().await?;
    Ok(ProvisionedKey { key: view(&key, &l.tenant, &l.endpoint, now), secret })
}

/// A key awaiting review, loaded and locked for a reviewer's decision.
async fn load_pending<C: ConnectionTrait>(
    conn: &C,
    principal: &Principal,
    key_id: &str,
) -> DomainResult<(Loaded, Authorized)> {
    let (l, auth) = load_for_change(conn, principal, key_id, Permission::ReviewKeys).await?;
    if l.key.status != "pending_approval" {
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
    key_id: &str,
    reviewer: Option<&str>,
    comment: &str,
) -> DomainResult<KeyView> {
    let now = clock::now_ms();
    let txn = db::begin_write(db).await?;
    let (l, auth) = load_pending(&txn, principal, key_id).await?;
    // A signed-in creator cannot approve under someone else's name either.
    if matches!(auth.actor(), Actor::User { .. } | Actor::Token { .. }) {
        four_eyes(&l.key, auth.actor().name())?;
    }
    let reviewer = reviewer.unwrap_or(auth.actor().name()).to_owned();
    let approval = Approval::ApproveAs { reviewer, comment: comment.to_owned() };
    let key = maybe_approve(&txn, principal, auth.actor(), l.clone(), &approval, now).await?;
    txn.commit().await?;
    Ok(view(&key, &l.tenant, &l.endpoint, now))
}

/// Declines a pending key's scope. A comment is required.
pub async fn reject(
    db: &DatabaseConnection,
    principal: &Principal,
    key_id: &str,
    reviewer: Option<&str>,
    comment: &str,
) -> DomainResult<KeyView> {
    let now = clock::now_ms();
    let txn = db::begin_write(db).await?;
    let (l, auth) = load_pending(&txn, principal, key_id).await?;
    let reviewer = validate_person("reviewer", reviewer.unwrap_or(auth.actor().name()))?;
    let comment = validate_comment("comment explaining the rejection", comment, true)?;
    record_approval(&txn, &l, "rejected", &reviewer, &comment, now).await?;
    let mut a: signing_key::ActiveModel = l.key.clone().into();
    a.status = Set("rejected".into());
    let key = a.update(&txn).await?;
    audit::record(
        &txn,
        auth.actor(),
        Change {
            action: "key.reject",
            target_kind: "key",
            target_id: key_id,
            tenant_id: Some(&l.tenant.id),
            before: Some(json!({"status": "pending_approval"})),
            after: Some(json!({"status": "rejected", "reviewer": reviewer, "comment": comment})),
        },
    )
    .await?;
    txn.commit().await?;
    Ok(view(&key, &l.tenant, &l.endpoint, now))
}

/// Creates a replacement for an active key. See the module docs for when
/// the old key starts retiring.
pub async fn rotate(
    db: &DatabaseConnection,
    vault: &Vault,
    principal: &Principal,
    key_id: &str,
    overlap_secs: Option<i64>,
    approval: Approval,
) -> DomainResult<ProvisionedKey> {
    let now = clock::now_ms();
    let overlap = overlap_secs.unwrap_or(DEFAULT_OVERLAP_SECS);
    if !(MIN_OVERLAP_SECS..=MAX_OVERLAP_SECS).contains(&overlap) {
        return Err(DomainError::invalid(
            "invalid_overlap",
            format!("overlap must be {MIN_OVERLAP_SECS}–{MAX_OVERLAP_SECS} seconds (1 minute to 7 days)"),
        ));
    }
    let txn = db::begin_write(db).await?;
    let (old, auth) = load_for_change(&txn, principal, key_id, Permission::ManageKeys).await?;
    if old.key.status != "active" {
        return Err(DomainError::conflict(
            "not_active",
            format!("only an active key can be rotated; {key_id} is {}", old.key.status),
        ));
    }
    if old.key.approved_scope_hash.as_deref().is_none_or(|h| h != old.key.scope_hash) {
        return Err(DomainError::conflict(
            "scope_not_approved",
            "the key's current scope is not approved; get it approved first",
        ));
    }
    let pending = signing_key::Entity::find()
        .filter(signing_key::Column::ReplacesKeyId.eq(key_id))
        .filter(signing_key::Column::Status.eq("pending_approval"))
        .one(&txn)
        .await?;
    if let Some(p) = pending {
        return Err(DomainError::conflict(
            "rotation_pending",
            format!("key {} already replaces {key_id} and awaits approval; approve, reject or revoke it first", p.id),
        ));
    }
    if retiring_count(&txn, &old.endpoint.id, now).await? >= MAX_RETIRING_PER_ENDPOINT {
        return Err(DomainError::conflict(
            "too_many_retiring",
            format!("endpoint {} already has {MAX_RETIRING_PER_ENDPOINT} keys in their overlap", old.endpoint.slug),
        ));
    }
    let types = EventTypes::from_json(&old.key.event_types);
    let (key, secret) = insert_key(
        &txn,
        vault,
        &old.tenant,
        &old.endpoint,
        &types,
        old.key.rotation_owner.clone(),
        old.key.rotation_owner.clone(),
        auth.actor().name(),
        Some((key_id, overlap)),
        now,
    )
    .await?;
    audit::record(
        &txn,
        auth.actor(),
        Change {
            action: "key.rotate",
            target_kind: "key",
            target_id: &key.id,
            tenant_id: Some(&old.tenant.id),
            before: Some(json!({"key_id": key_id, "status": "active"})),
            after: Some(json!({"key_id": key.id, "replaces": key_id, "overlap_secs": overlap})),
        },
    )
    .await?;
    let l = Loaded { key, tenant: old.tenant, endpoint: old.endpoint };
    let key = maybe_approve(&txn, principal, auth.actor(), l.clone(), &approval, now).await?;
    txn.commit().await?;
    Ok(ProvisionedKey { key: view(&key, &l.tenant, &l.endpoint, now), secret })
}

/// Revokes a key immediately. A reason is required.
pub async fn revoke(
    db: &DatabaseConnection,
    principal: &Principal,
    key_id: &str,
    reason: &str,
) -> DomainResult<KeyView> {
    let now = clock::now_ms();
    let reason = validate_comment("reason", reason, true)?;
    let txn = db::begin_write(db).await?;
    let (l, auth) = load_for_change(&txn, principal, key_id, Permission::ManageKeys).await?;
    let status = effective_status(&l.key, now);
    if !status.is_live() {
        return Err(DomainError::conflict("not_revocable", format!("key {key_id} is already {status}")));
    }
    let before = view(&l.key, &l.tenant, &l.endpoint, now);
    let mut a: signing_key::ActiveModel = l.key.clone().into();
    a.status = Set("revoked".into());
    a.revoked_at = Set(Some(now));
    a.revoked_reason = Set(Some(reason.clone()));
    let key = a.update(&txn).await?;
    let after = view(&key, &l.tenant, &l.endpoint, now);
    audit::record(
        &txn,
        auth.actor(),
        Change {
            action: "key.revoke",
            target_kind: "key",
            target_id: key_id,
            tenant_id: Some(&l.tenant.id),
            before: Some(summary(&before)),
            after: Some(json!({"status": after.status, "reason": reason})),
        },
    )
    .await?;
    txn.commit().await?;
    Ok(after)
}

/// Changes a key's event types (within the endpoint's). The key returns to
/// `pending_approval` and stops verifying until a reviewer approves the new
/// scope.
pub async fn set_scope(
    db: &DatabaseConnection,
    principal: &Principal,
    key_id: &str,
    event_types: &[String],
) -> DomainResult<KeyView> {
    let now = clock::now_ms();
    let types = validate_event_types(event_types)?;
    let txn = db::begin_write(db).await?;
    let (l, auth) = load_for_change(&txn, principal, key_id, Permission::ManageKeys).await?;
    let status = effective_status(&l.key, now);
    if !matches!(status, KeyStatus::PendingApproval | KeyStatus::Active) {
        return Err(DomainError::conflict("not_changeable", format!("the scope of a {status} key cannot change")));
    }
    let endpoint_types = EventTypes::from_json(&l.endpoint.event_types);
    if !endpoint_types.covers(&types) {
        return Err(DomainError::invalid(
            "scope_exceeds_endpoint",
            format!("a key may only be scoped to the endpoint's event types ({})", endpoint_types.describe()),
        ));
    }
    let new_hash = scope_hash(&l.tenant, &l.endpoint, &types);
    if new_hash == l.key.scope_hash {
        return Err(DomainError::nothing_to_change());
    }
    let before = view(&l.key, &l.tenant, &l.endpoint, now);
    let mut a: signing_key::ActiveModel = l.key.clone().into();
    a.event_types = Set(types.to_json());
    a.scope_hash = Set(new_hash);
    a.status = Set("pending_approval".into());
    a.scope_changed_by = Set(Some(auth.actor().name().to_owned()));
    let key = a.update(&txn).await?;
    let after = view(&key, &l.tenant, &l.endpoint, now);
    audit::record(
        &txn,
        auth.actor(),
        Change {
            action: "key.scope_change",
            target_kind: "key",
            target_id: key_id,
            tenant_id: Some(&l.tenant.id),
            before: Some(summary(&before)),
            after: Some(summary(&after)),
        },
    )
    .await?;
    txn.commit().await?;
    Ok(after)
}

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
        out.push(view(&k, t, e, now));
    }
    Ok(out)
}

/// Keys the caller may see, newest first, filtered.
pub async fn list(db: &DatabaseConnection, principal: &Principal, filter: &KeyFilter) -> DomainResult<Vec<KeyView>> {
    let now = clock::now_ms();
    let mut q = signing_key::Entity::find().order_by_desc(signing_key::Column::CreatedAt);
    let tenant_id = match filter.tenant.as_deref().filter(|s| !s.is_empty()) {
        Some(slug) => Some(super::tenants::find(db, principal, slug).await?.id),
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
    if let Some(slug) = filter.endpoint.as_deref().filter(|s| !s.is_empty()) {
        let Some(t) = &tenant_id else {
            return Err(DomainError::invalid("tenant_required", "filtering by endpoint needs a tenant"));
        };
        let e = endpoint::Entity::find()
            .filter(endpoint::Column::TenantId.eq(t))
            .filter(endpoint::Column::Slug.eq(slug))
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

pub async fn get(db: &DatabaseConnection, principal: &Principal, key_id: &str) -> DomainResult<KeyView> {
    let l = load(db, principal, key_id).await?;
    principal.authorize(Permission::ReadRegistry, Scope::Tenant(&l.tenant.id))?;
    Ok(view(&l.key, &l.tenant, &l.endpoint, clock::now_ms()))
}

fn approval_view(a: key_approval::Model) -> ApprovalView {
    ApprovalView {
        key_id: a.key_id,
        decision: a.decision,
        reviewer: a.reviewer,
        comment: a.comment,
        scope_hash: a.scope_hash,
        scope: serde_json::from_str(&a.scope_summary).unwrap_or(Value::Null),
        decided_at: clock::rfc3339(a.decided_at),
    }
}

/// Reviewer decisions, newest first; for one key or across what the caller
/// may see.
pub async fn approval_history(
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
    Ok(q.all(db).await?.into_iter().map(approval_view).collect())
}

/// The reviewer's queue: pending keys, oldest first, with their scope, the
/// key they replace and their decision history.
pub async fn review_queue(db: &DatabaseConnection, principal: &Principal) -> DomainResult<Vec<ReviewItem>> {
    let now = clock::now_ms();
    let pending =
        list(db, principal, &KeyFilter { status: Some(KeyStatus::PendingApproval), ..Default::default() }).await?;
    let mut out = Vec::with_capacity(pending.len());
    for key in pending.into_iter().rev() {
        let l = load(db, principal, &key.key_id).await?;
        let scope = scope_value(&l.tenant, &l.endpoint, &EventTypes::from_json(&l.key.event_types));
        let replaces = match &l.key.replaces_key_id {
            Some(id) => signing_key::Entity::find_by_id(id.clone())
                .one(db)
                .await?
                .map(|k| view(&k, &l.tenant, &l.endpoint, now)),
            None => None,
        };
        let history = approval_history(db, principal, Some(&key.key_id), 50).await?;
        out.push(ReviewItem { key, scope, replaces, history });
    }
    Ok(out)
}

/// Marks retiring keys past their expiry as `expired` (the state is already
/// derived on read; this makes it durable and audited).
pub async fn sweep_expired(db: &DatabaseConnection, now: i64) -> DomainResult<u64> {
    let due = signing_key::Entity::find()
        .filter(signing_key::Column::Status.eq("retiring"))
        .filter(signing_key::Column::ExpiresAt.lte(now))
        .all(db)
        .await?;
    let mut n = 0;
    for k in due {
        let txn = db::begin_write(db).await?;
        let res = signing_key::Entity::update_many()
            .col_expr(signing_key::Column::Status, Expr::value("expired"))
            .filter(signing_key::Column::Id.eq(&k.id))
            .filter(signing_key::Column::Status.eq("retiring"))
            .exec(&txn)
            .await?;
        if res.rows_affected == 1 {
            audit::record(
                &txn,
                &Actor::System,
                Change {
                    action: "key.expire",
                    target_kind: "key",
                    target_id: &k.id,
                    tenant_id: Some(&k.tenant_id),
                    before: Some(json!({"status": "retiring"})),
                    after: Some(json!({"status": "expired"})),
                },
            )
            .await?;
            n += 1;
        }
        txn.commit().await?;
    }
    Ok(n)
}

/// The accepted key set of an endpoint at `now`: active keys plus retiring
/// keys inside their overlap, each only while its scope is the approved one.
pub async fn accepted_key_rows<C: ConnectionTrait>(
    conn: &C,
    endpoint_id: &str,
    now: i64,
) -> DomainResult<Vec<signing_key::Model>> {
    let rows = signing_key::Entity::find()
        .filter(signing_key::Column::EndpointId.eq(endpoint_id))
        .filter(signing_key::Column::Status.is_in(["active", "retiring"]))
        .all(conn)
        .await?;
    Ok(rows
        .into_iter()
        .filter(|k| match effective_status(k, now) {
            KeyStatus::Active | KeyStatus::Retiring => k.approved_scope_hash.as_deref() == Some(k.scope_hash.as_str()),
            _ => false,
        })
        .collect())
}

/// Opens a key's sealed secret (for the receiver's verifier only).
pub async fn open_secret(
    db: &DatabaseConnection,
    vault: &Vault,
    key: &signing_key::Model,
) -> DomainResult<SigningSecret> {
    let plain =
        vault.open(db, &Aad::signing_key(&key.tenant_id, &key.endpoint_id, &key.id), &key.secret_ciphertext).await?;
    SigningSecret::from_opened(plain).ok_or(DomainError::Crypto(crate::crypto::CryptoError::Malformed))
}
