//! Provision, rotate, revoke, re-scope, and the sweep that makes expiry
//! durable. Each change first locks the endpoint's row (see the module docs).

use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, DatabaseTransaction, EntityTrait, QueryFilter,
    Set, sea_query::Expr,
};
use serde_json::json;

use super::review::maybe_approve;
use super::{
    Approval, DEFAULT_OVERLAP_SECS, Loaded, MAX_OVERLAP_SECS, MAX_RETIRING_PER_ENDPOINT, MIN_OVERLAP_SECS,
    NewCredential, ProvisionRequest, ProvisionedKey, effective_status, load_for_change, lock_endpoint, retiring_count,
    scope_hash, summary, validate_comment, validate_person, view,
};
use crate::{
    audit::{self, Change},
    auth::{Actor, Principal, Scope},
    clock,
    crypto::{
        Aad, SigningSecret,
        asymmetric::{PrivateKey, PublicKey},
    },
    db,
    entity::{endpoint, signing_key, tenant},
    error::{DomainError, DomainResult},
    ids,
    registry::validate_event_types,
    vault::Vault,
};
use views::ids::{EndpointSlug, KeyId, TenantSlug};
use views::{
    keys::{CredentialKind, KeyStatus, KeyView},
    roles::Permission,
    scheme::EventTypes,
};

/// A credential checked before anything is written: a public key is
/// parsed and validated, and only a standard-webhooks endpoint takes one.
enum Checked {
    Hmac,
    PublicKey(PublicKey),
    Generated(PrivateKey),
}

fn check_credential(e: &endpoint::Model, credential: &NewCredential) -> DomainResult<Checked> {
    let checked = match credential {
        NewCredential::Hmac => return Ok(Checked::Hmac),
        NewCredential::PublicKey(text) => Checked::PublicKey(PublicKey::parse(text).map_err(|err| {
            DomainError::invalid(
                "invalid_public_key",
                format!("public_key: not a Standard Webhooks v1a public key (whpk_ + base64 of 32 bytes): {err}"),
            )
        })?),
        NewCredential::GenerateEd25519 => Checked::Generated(PrivateKey::generate()),
    };
    if e.scheme != views::scheme::Scheme::StandardWebhooks.as_str() {
        return Err(DomainError::invalid(
            "public_key_scheme",
            format!(
                "public_key: Ed25519 (v1a) keys are a standard-webhooks credential; endpoint {} uses {}",
                e.slug, e.scheme
            ),
        ));
    }
    Ok(checked)
}

/// Inserts a new key row: an HMAC key with its secret sealed, or an
/// Ed25519 key with its public key in clear (and, for a pair Signet
/// generated, its private key sealed; for an uploaded one, nothing sealed). Returns what
/// the caller shows once (see [`ProvisionedKey`]).
#[allow(clippy::too_many_arguments)]
async fn insert_key<C: ConnectionTrait>(
    conn: &C,
    vault: &Vault,
    t: &tenant::Model,
    e: &endpoint::Model,
    types: &EventTypes,
    credential: Checked,
    owner: String,
    rotation_owner: String,
    created_by: &str,
    replaces: Option<(&str, i64)>,
    now: i64,
) -> DomainResult<(signing_key::Model, Option<SigningSecret>)> {
    let key_id = ids::new_key_id();
    let (kind, public_key, sealed, kek_version, shown) = match credential {
        Checked::Hmac => {
            let secret = SigningSecret::generate();
            let (sealed, kek_version) =
                vault.seal(&Aad::signing_key(&t.id, &e.id, key_id.as_str()), secret.expose().as_bytes())?;
            (CredentialKind::Hmac, None, sealed, kek_version as i32, Some(secret))
        }
        Checked::PublicKey(pk) => (CredentialKind::Ed25519, Some(pk.encode()), Vec::new(), 0, None),
        // The private key of a pair Signet generated is shown once and kept
        // sealed like an HMAC secret, so Signet can sign test deliveries
        // with it (`onboarding::test_delivery`); the evidence marks it "can sign".
        Checked::Generated(private) => {
            let encoded = private.encode();
            let (sealed, kek_version) =
                vault.seal(&Aad::signing_key(&t.id, &e.id, key_id.as_str()), encoded.as_bytes())?;
            let shown = SigningSecret::parse(&encoded);
            (CredentialKind::Ed25519, Some(private.public_key().encode()), sealed, kek_version as i32, shown)
        }
    };
    let model = signing_key::ActiveModel {
        id: Set(key_id.into_string()),
        tenant_id: Set(t.id.clone()),
        endpoint_id: Set(e.id.clone()),
        status: Set(KeyStatus::PendingApproval),
        event_types: Set(types.to_json()),
        scope_hash: Set(scope_hash(t, e, types)),
        approved_scope_hash: Set(None),
        secret_ciphertext: Set(sealed),
        kek_version: Set(kek_version),
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
        credential_kind: Set(kind.as_str().to_owned()),
        public_key: Set(public_key),
    }
    .insert(conn)
    .await?;
    Ok((model, shown))
}

/// Creates a key for an endpoint. The secret is returned once and stored
/// only sealed.
pub async fn provision(
    db: &DatabaseConnection,
    vault: &Vault,
    principal: &Principal,
    tenant_slug: &TenantSlug,
    endpoint_slug: &EndpointSlug,
    req: ProvisionRequest,
    approval: Approval,
) -> DomainResult<ProvisionedKey> {
    let now = clock::now_ms();
    // An HMAC secret and a generated pair's private key are sealed.
    if matches!(req.credential, NewCredential::Hmac | NewCredential::GenerateEd25519) {
        vault.reserve_seals(db, 1).await?;
    }
    let txn = db::begin_write(db).await?;
    let (t, e) = crate::registry::endpoints::find(&txn, principal, tenant_slug, endpoint_slug).await?;
    let auth = principal.authorize(Permission::ManageKeys, Scope::Tenant(&t.id))?;
    let credential = check_credential(&e, &req.credential)?;
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
        insert_key(&txn, vault, &t, &e, &types, credential, owner, rotation_owner, auth.actor().name(), None, now)
            .await?;
    let new = Loaded { key, tenant: t, endpoint: e };
    let change = Change {
        action: "key.provision",
        target_kind: "key",
        target_id: &new.key.id,
        tenant_id: Some(&new.tenant.id),
        before: None,
        after: Some(summary(&view(&new.key, &new.tenant, &new.endpoint, now)?)),
    };
    finish_new_key(txn, principal, auth.actor(), &new, change, &approval, secret, now).await
}

/// The end of provision and rotate: record the change, approve the new key
/// at once if the request carried an approval, commit, and show the secret
/// (the only time it is shown).
#[allow(clippy::too_many_arguments)]
async fn finish_new_key(
    txn: DatabaseTransaction,
    principal: &Principal,
    actor: &Actor,
    new: &Loaded,
    change: Change<'_>,
    approval: &Approval,
    secret: Option<SigningSecret>,
    now: i64,
) -> DomainResult<ProvisionedKey> {
    audit::record(&txn, actor, change).await?;
    let key = maybe_approve(&txn, principal, actor, new.clone(), approval, now).await?;
    txn.commit().await?;
    Ok(ProvisionedKey { key: view(&key, &new.tenant, &new.endpoint, now)?, secret })
}

/// Creates a replacement for an active key, of the same kind. See the
/// module docs for when the old key starts retiring.
pub async fn rotate(
    db: &DatabaseConnection,
    vault: &Vault,
    principal: &Principal,
    key_id: &KeyId,
    overlap_secs: Option<i64>,
    approval: Approval,
) -> DomainResult<ProvisionedKey> {
    rotate_with(db, vault, principal, key_id, overlap_secs, approval, None).await
}

/// [`rotate`] with the replacement's credential chosen: `None` keeps the
/// kind (an HMAC key gets a new secret; an Ed25519 key needs the provider's
/// new public key, or a generated pair, so `None` is refused). Replacing an
/// HMAC key with a public key is the spec's migration from `v1` to `v1a`:
/// during the overlap both verify.
#[allow(clippy::too_many_arguments)]
pub async fn rotate_with(
    db: &DatabaseConnection,
    vault: &Vault,
    principal: &Principal,
    key_id: &KeyId,
    overlap_secs: Option<i64>,
    approval: Approval,
    credential: Option<NewCredential>,
) -> DomainResult<ProvisionedKey> {
    let now = clock::now_ms();
    let overlap = overlap_secs.unwrap_or(DEFAULT_OVERLAP_SECS);
    if !(MIN_OVERLAP_SECS..=MAX_OVERLAP_SECS).contains(&overlap) {
        return Err(DomainError::invalid(
            "invalid_overlap",
            format!("overlap must be {MIN_OVERLAP_SECS}–{MAX_OVERLAP_SECS} seconds (1 minute to 7 days)"),
        ));
    }
    if credential.as_ref().is_none_or(|c| matches!(c, NewCredential::Hmac | NewCredential::GenerateEd25519)) {
        vault.reserve_seals(db, 1).await?;
    }
    let txn = db::begin_write(db).await?;
    let (old, auth) = load_for_change(&txn, principal, key_id.as_str(), Permission::ManageKeys).await?;
    let credential = match credential {
        Some(c) => c,
        None if old.key.credential_kind == CredentialKind::Hmac.as_str() => NewCredential::Hmac,
        None => {
            return Err(DomainError::conflict(
                "public_key_required",
                format!(
                    "{key_id} is an Ed25519 (v1a) key: its replacement needs the provider's new public key \
                     (public_key) or a generated pair"
                ),
            ));
        }
    };
    let credential = check_credential(&old.endpoint, &credential)?;
    if old.key.status != KeyStatus::Active {
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
        .filter(signing_key::Column::ReplacesKeyId.eq(key_id.as_str()))
        .filter(signing_key::Column::Status.eq(KeyStatus::PendingApproval))
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
        credential,
        old.key.rotation_owner.clone(),
        old.key.rotation_owner.clone(),
        auth.actor().name(),
        Some((key_id.as_str(), overlap)),
        now,
    )
    .await?;
    let new = Loaded { key, tenant: old.tenant, endpoint: old.endpoint };
    let change = Change {
        action: "key.rotate",
        target_kind: "key",
        target_id: &new.key.id,
        tenant_id: Some(&new.tenant.id),
        before: Some(json!({"key_id": key_id, "status": "active"})),
        after: Some(json!({"key_id": new.key.id, "replaces": key_id, "overlap_secs": overlap})),
    };
    finish_new_key(txn, principal, auth.actor(), &new, change, &approval, secret, now).await
}

/// Revokes a key immediately. A reason is required.
pub async fn revoke(
    db: &DatabaseConnection,
    principal: &Principal,
    key_id: &KeyId,
    reason: &str,
) -> DomainResult<KeyView> {
    let now = clock::now_ms();
    let reason = validate_comment("reason", reason, true)?;
    let txn = db::begin_write(db).await?;
    let (l, auth) = load_for_change(&txn, principal, key_id.as_str(), Permission::ManageKeys).await?;
    let status = effective_status(&l.key, now);
    if !status.is_live() {
        return Err(DomainError::conflict("not_revocable", format!("key {key_id} is already {status}")));
    }
    let mut a: signing_key::ActiveModel = l.key.clone().into();
    a.status = Set(KeyStatus::Revoked);
    a.revoked_at = Set(Some(now));
    a.revoked_reason = Set(Some(reason.clone()));
    let audit_after = |after: &KeyView| json!({"status": after.status, "reason": reason});
    update_recorded(txn, auth.actor(), &l, a, "key.revoke", audit_after, now).await
}

/// Changes a key's event types (within the endpoint's). The key returns to
/// `pending_approval` and stops verifying until a reviewer approves the new
/// scope.
pub async fn set_scope(
    db: &DatabaseConnection,
    principal: &Principal,
    key_id: &KeyId,
    event_types: &[String],
) -> DomainResult<KeyView> {
    let now = clock::now_ms();
    let txn = db::begin_write(db).await?;
    let (l, auth) = load_for_change(&txn, principal, key_id.as_str(), Permission::ManageKeys).await?;
    let types = validate_event_types(event_types)?;
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
    let mut a: signing_key::ActiveModel = l.key.clone().into();
    a.event_types = Set(types.to_json());
    a.scope_hash = Set(new_hash);
    a.status = Set(KeyStatus::PendingApproval);
    a.scope_changed_by = Set(Some(auth.actor().name().to_owned()));
    update_recorded(txn, auth.actor(), &l, a, "key.scope_change", summary, now).await
}

/// The end of revoke and set_scope: write the changed row, record the key
/// before and after in the audit log (`audit_after` chooses what of the
/// new view to record), commit, and return the key as it now is.
async fn update_recorded(
    txn: DatabaseTransaction,
    actor: &Actor,
    l: &Loaded,
    row: signing_key::ActiveModel,
    action: &str,
    audit_after: impl FnOnce(&KeyView) -> serde_json::Value,
    now: i64,
) -> DomainResult<KeyView> {
    let before = view(&l.key, &l.tenant, &l.endpoint, now)?;
    let key = row.update(&txn).await?;
    let after = view(&key, &l.tenant, &l.endpoint, now)?;
    let change = Change {
        action,
        target_kind: "key",
        target_id: &l.key.id,
        tenant_id: Some(&l.tenant.id),
        before: Some(summary(&before)),
        after: Some(audit_after(&after)),
    };
    audit::record(&txn, actor, change).await?;
    txn.commit().await?;
    Ok(after)
}

/// Marks retiring keys past their expiry as `expired` (the state is already
/// derived on read; this makes it durable and audited).
pub async fn sweep_expired(db: &DatabaseConnection, now: i64) -> DomainResult<u64> {
    let due = signing_key::Entity::find()
        .filter(signing_key::Column::Status.eq(KeyStatus::Retiring))
        .filter(signing_key::Column::ExpiresAt.lte(now))
        .all(db)
        .await?;
    let mut n = 0;
    for k in due {
        let txn = db::begin_write(db).await?;
        let res = signing_key::Entity::update_many()
            .col_expr(signing_key::Column::Status, Expr::value(KeyStatus::Expired))
            .filter(signing_key::Column::Id.eq(&k.id))
            .filter(signing_key::Column::Status.eq(KeyStatus::Retiring))
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
