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
//! A key holds either a sealed HMAC secret or a Standard Webhooks `v1a`
//! Ed25519 public key ([`CredentialKind`]), stored in clear: an uploaded one
//! cannot sign, so a leaked database or backup forges nothing with it. A
//! pair Signet generated also keeps its private key, sealed like an HMAC
//! secret, for test deliveries. Both kinds share
//! the lifecycle, the approval and the evidence.
//!
//! Rotation creates a replacement. The old key keeps working until the
//! replacement is active; only then does it start retiring for the chosen
//! overlap, so a replacement waiting for review never leaves the endpoint
//! without a working key. Every lifecycle change of an endpoint's keys first
//! locks that endpoint's row, so concurrent rotations cannot exceed the
//! two-retiring-keys limit or both replace one key.

mod accepted;
mod fields;
mod lifecycle;
mod queries;
mod review;

use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, PaginatorTrait, QueryFilter, sea_query::Expr};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::{
    auth::{Authorized, Principal, Scope},
    clock,
    crypto::{SigningSecret, sha256_hex},
    entity::{endpoint, signing_key, tenant},
    error::{DomainError, DomainResult},
};
use views::{
    ids::{EndpointSlug, TenantSlug},
    keys::{CredentialKind, KeyStatus, KeyView},
    roles::Permission,
    scheme::{EventTypes, Scheme},
};

pub use accepted::{accepted_key_rows, open_secret};
pub use fields::{MAX_COMMENT_CHARS, MAX_PERSON_CHARS, validate_comment, validate_person};
#[cfg(feature = "openapi")]
pub use fields::{comment_schema, person_schema, public_key_schema, required_comment_schema};
pub use lifecycle::{provision, revoke, rotate, rotate_with, set_scope, sweep_expired};
pub use queries::{get, list};
pub use review::{approval_history, approve, reject, review_queue};

pub const DEFAULT_OVERLAP_SECS: i64 = 24 * 3600;
pub const MAX_OVERLAP_SECS: i64 = 7 * 24 * 3600;
pub const MIN_OVERLAP_SECS: i64 = 60;
pub const MAX_RETIRING_PER_ENDPOINT: u64 = 2;

/// A new key and what the caller shows exactly once: the HMAC secret
/// (`whsec_…`), or the private key of a pair Signet generated (`whsk_…`,
/// stored only sealed). `None` for an uploaded public key: there is nothing secret.
#[derive(Debug)]
pub struct ProvisionedKey {
    pub key: KeyView,
    pub secret: Option<SigningSecret>,
}

/// The credential a new key gets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum NewCredential {
    /// A fresh HMAC secret, sealed.
    #[default]
    Hmac,
    /// The provider's `v1a` public key (`whpk_…`), stored in clear.
    PublicKey(String),
    /// A pair Signet generates: the public key is stored, the private key
    /// is returned once and stored only sealed.
    GenerateEd25519,
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
    #[serde(skip)]
    pub credential: NewCredential,
}

/// Filters for [`list`], parsed by the edges (a name outside the slug
/// rule names nothing: `ids::named_filter`).
#[derive(Debug, Clone, Default)]
pub struct KeyFilter {
    pub tenant: Option<TenantSlug>,
    pub endpoint: Option<EndpointSlug>,
    pub status: Option<KeyStatus>,
}

/// Everything a key's scope consists of; its hash is what gets approved.
fn scope_value(t: &tenant::Model, e: &endpoint::Model, types: &EventTypes) -> Value {
    let mut v = json!({
        "tenant_id": t.id, "tenant": t.slug,
        "endpoint_id": e.id, "endpoint": e.slug,
        "scheme": e.scheme,
        "event_types": types.as_slice(),
    });
    if let (Some(digest), Some(o)) = (profile_digest(e), v.as_object_mut()) {
        o.insert("hmac_profile_sha256".to_owned(), Value::String(digest));
    }
    v
}

/// The SHA-256 of an `hmac` endpoint's stored profile (its canonical JSON,
/// written once at creation), part of what a key's approval covers.
fn profile_digest(e: &endpoint::Model) -> Option<String> {
    e.hmac_profile.as_deref().map(|p| sha256_hex(p.as_bytes()))
}

pub(crate) fn scope_hash(t: &tenant::Model, e: &endpoint::Model, types: &EventTypes) -> String {
    // Ids, not slugs: a slug could in principle be reused by another row.
    // An `hmac` endpoint's profile is in it too, so an approval is for that
    // profile (the fixed schemes' hashes are as they always were).
    let canonical = match profile_digest(e) {
        Some(profile) => json!([t.id, e.id, e.scheme, types.as_slice(), profile]),
        None => json!([t.id, e.id, e.scheme, types.as_slice()]),
    };
    sha256_hex(canonical.to_string().as_bytes())
}

fn effective_status(k: &signing_key::Model, now: i64) -> KeyStatus {
    let stored = k.status;
    match (stored, k.expires_at) {
        (KeyStatus::Retiring, Some(at)) if at <= now => KeyStatus::Expired,
        (s, _) => s,
    }
}

/// The key as shown; a stored id outside its rule is a corrupt row.
fn view(k: &signing_key::Model, t: &tenant::Model, e: &endpoint::Model, now: i64) -> DomainResult<KeyView> {
    Ok(KeyView {
        key_id: crate::ids::stored(&k.id)?,
        tenant: crate::ids::stored(&t.slug)?,
        endpoint: crate::ids::stored(&e.slug)?,
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
        replaces_key_id: k.replaces_key_id.as_deref().map(crate::ids::stored).transpose()?,
        overlap_secs: k.overlap_secs,
        last_verified_at: clock::rfc3339_opt(k.last_verified_at),
        verified_count: k.verified_count,
        failure_count: k.failure_count,
        last_failure_at: clock::rfc3339_opt(k.last_failure_at),
        last_failure_reason: k.last_failure_reason.clone(),
        credential: CredentialKind::parse(&k.credential_kind).unwrap_or_default(),
        public_key: k.public_key.clone(),
    })
}

fn summary(v: &KeyView) -> Value {
    json!({
        "status": v.status, "endpoint": v.endpoint, "event_types": v.event_types,
        "owner": v.owner, "expires_at": v.expires_at, "scope_hash": v.scope_hash,
        "credential": v.credential, "public_key": v.public_key,
    })
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
        .filter(signing_key::Column::Status.eq(KeyStatus::Retiring))
        .filter(signing_key::Column::ExpiresAt.gt(now))
        .count(conn)
        .await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An `hmac` endpoint's approved scope covers its profile; the fixed
    /// schemes' hashes are the ones stored before profiles existed.
    #[test]
    fn the_scope_hash_covers_an_hmac_profile() {
        let t = tenant::Model {
            id: "t1".into(),
            slug: "clinic-a".into(),
            name: "A".into(),
            notify_url: None,
            created_at: 0,
            retry_policy: views::retry_policy::RetryPolicy::Disabled,
            synthetic: false,
        };
        let e = |scheme: &str, profile: Option<&str>| endpoint::Model {
            id: "e1".into(),
            tenant_id: "t1".into(),
            slug: "hooks".into(),
            scheme: scheme.into(),
            event_types: "[\"*\"]".into(),
            tolerance_secs: 300,
            timestamp_floor: None,
            replay_partitioned_from: None,
            event_id_fields: None,
            hmac_profile: profile.map(str::to_owned),
            max_body_bytes: 1024,
            enabled: true,
            created_at: 0,
        };
        let any = EventTypes::any();
        let before = sha256_hex(json!(["t1", "e1", "stripe", ["*"]]).to_string().as_bytes());
        assert_eq!(scope_hash(&t, &e("stripe", None), &any), before);
        let dvir = scope_hash(&t, &e("hmac", Some(r#"{"preset":"dvir"}"#)), &any);
        let slack = scope_hash(&t, &e("hmac", Some(r#"{"preset":"slack"}"#)), &any);
        assert_ne!(dvir, slack, "another profile is another scope: an approval does not carry over");
        let summary = scope_value(&t, &e("hmac", Some("{}")), &any);
        assert_eq!(summary["hmac_profile_sha256"], sha256_hex(b"{}"));
        assert!(scope_value(&t, &e("stripe", None), &any).get("hmac_profile_sha256").is_none());
    }
}
