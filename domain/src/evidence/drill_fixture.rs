//! The drills' synthetic tenant (`_drill`): one endpoint per fixed
//! signature scheme Signet receives and one per `hmac` profile the drills
//! sign as ([`profiles`]), each with an active key sealed
//! like any other. `drill` (standard-webhooks) carries the exactly-once
//! drills; every endpoint carries `scheme_verification`.

use sea_orm::{ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter};
use serde_json::json;
use views::{
    hmac::{HmacPreset, HmacProfile, HmacProfileBody},
    keys::KeyStatus,
    retry_policy::RetryPolicy,
    scheme::{EventTypes, Scheme},
};

use crate::{
    audit::{self, Change},
    auth::Actor,
    clock,
    crypto::SigningSecret,
    db,
    entity::{
        endpoint, event_body, inbox_claim, outbox_intent, quarantine_entry, reminder, replay_record, signing_key,
        tenant,
    },
    error::DomainResult,
    ids,
    registry::{
        DEFAULT_TOLERANCE_SECS, defaults,
        hmac_profile::{self, example_custom},
        keys,
    },
    vault::Vault,
};

/// The drill tenant's slug: outside the slug syntax, so no real tenant can
/// ever be created under it.
pub const DRILL_TENANT: &str = views::ids::SYNTHETIC_TENANT;
pub const DRILL_ENDPOINT: &str = "drill";
/// Slugs under this prefix are the drills' (the unknown-tenant drill posts
/// to one that does not exist).
pub const DRILL_PREFIX: &str = "_drill";

/// The profiles the drills sign as, by name: every preset, and a custom
/// profile unlike any of them ([`example_custom`]).
pub(super) fn profiles() -> Vec<(&'static str, HmacProfileBody)> {
    let mut out: Vec<(&'static str, HmacProfileBody)> =
        HmacPreset::ALL.into_iter().map(|p| (p.as_str(), HmacProfileBody::preset(p))).collect();
    out.push(("custom", example_custom()));
    out
}

/// One drill endpoint: its scheme (for `hmac`, the profile it stores), slug
/// and id, and its key's secret.
pub struct SchemeTarget {
    pub scheme: Scheme,
    /// What its checks are named after: the scheme, or `hmac.<profile>`.
    pub label: String,
    /// The profile the endpoint stores (`hmac` only; `None` if unreadable).
    pub hmac: Option<HmacProfile>,
    pub tolerance_secs: i64,
    pub endpoint: String,
    pub endpoint_id: String,
    pub(crate) secret: SigningSecret,
}

/// A drill endpoint the fixture keeps: scheme, slug, check label, and for
/// `hmac` the profile it is created with and the profile's tolerance.
struct Wanted {
    scheme: Scheme,
    slug: String,
    label: String,
    profile: Option<(HmacProfile, Option<i64>)>,
}

/// Every drill endpoint: the fixed schemes in [`Scheme::FIXED`] order, then
/// the `hmac` profiles.
fn wanted() -> DomainResult<Vec<Wanted>> {
    let mut out: Vec<Wanted> = Scheme::FIXED
        .into_iter()
        .map(|scheme| Wanted { scheme, slug: endpoint_slug(scheme), label: scheme.as_str().to_owned(), profile: None })
        .collect();
    for (name, body) in profiles() {
        out.push(Wanted {
            scheme: Scheme::Hmac,
            slug: format!("{}-{name}", endpoint_slug(Scheme::Hmac)),
            label: format!("{}.{name}", Scheme::Hmac),
            profile: Some(hmac_profile::resolve(&body)?),
        });
    }
    Ok(out)
}

/// The drill tenant, the `drill` endpoint and key (with the key's secret, to
/// sign with), and one endpoint per scheme.
pub struct Fixture {
    pub tenant_id: String,
    pub endpoint_id: String,
    pub key_id: String,
    pub(crate) secret: SigningSecret,
    /// Every fixed scheme in [`Scheme::FIXED`] order (standard-webhooks is
    /// `drill`), then each `hmac` profile.
    pub schemes: Vec<SchemeTarget>,
}

/// The drill endpoint's slug for `scheme`: `drill` keeps its name, so the
/// fixtures of earlier versions are reused.
pub fn endpoint_slug(scheme: Scheme) -> String {
    match scheme {
        Scheme::StandardWebhooks => DRILL_ENDPOINT.to_owned(),
        other => format!("{DRILL_ENDPOINT}-{other}"),
    }
}

/// Finds or creates the drill tenant, its endpoints and an active key on
/// each (sealed like any other), and opens the keys' secrets.
pub async fn fixture(db: &DatabaseConnection, vault: &Vault) -> DomainResult<Fixture> {
    let now = clock::now_ms();
    let wanted = wanted()?;
    vault.reserve_seals(db, wanted.len() as u64).await?;
    let txn = db::begin_write(db).await?;
    let mut created: Vec<String> = Vec::new();
    let t = match tenant::Entity::find().filter(tenant::Column::Slug.eq(DRILL_TENANT)).one(&txn).await? {
        Some(t) => t,
        None => {
            let t = tenant::Model {
                id: ids::new_id(),
                slug: DRILL_TENANT.to_owned(),
                name: "Signet drills (synthetic)".to_owned(),
                notify_url: None,
                created_at: now,
                retry_policy: RetryPolicy::Enabled,
                synthetic: true,
            };
            tenant::Entity::insert(tenant::ActiveModel::from(t.clone())).exec_without_returning(&txn).await?;
            defaults::retry_policy_v1(&txn, &Actor::System, &t.id, now).await?;
            created.push("tenant".into());
            t
        }
    };
    let mut rows = Vec::new();
    for w in &wanted {
        rows.push((w, endpoint_with_key(&txn, vault, &t, w, now, &mut created).await?));
    }
    if !created.is_empty() {
        let key_ids: Vec<&str> = rows.iter().map(|(_, (_, k))| k.id.as_str()).collect();
        audit::record(
            &txn,
            &Actor::System,
            Change {
                action: "drill.fixture",
                target_kind: "tenant",
                target_id: DRILL_TENANT,
                tenant_id: Some(&t.id),
                before: None,
                after: Some(json!({"created": created, "endpoint": DRILL_ENDPOINT, "key_ids": key_ids})),
            },
        )
        .await?;
    }
    txn.commit().await?;
    let mut schemes = Vec::new();
    for (w, (e, k)) in &rows {
        let secret = keys::open_secret(db, vault, k).await?;
        schemes.push(SchemeTarget {
            scheme: w.scheme,
            label: w.label.clone(),
            hmac: e.hmac_profile.as_deref().and_then(|p| serde_json::from_str(p).ok()),
            tolerance_secs: e.tolerance_secs,
            endpoint: e.slug.clone(),
            endpoint_id: e.id.clone(),
            secret,
        });
    }
    let (_, (e, k)) = rows.into_iter().next().ok_or(crate::DomainError::NotFound)?;
    let secret = keys::open_secret(db, vault, &k).await?;
    Ok(Fixture { tenant_id: t.id, endpoint_id: e.id, key_id: k.id, secret, schemes })
}

/// The drill endpoint `w` and an accepted key on it, created when missing
/// (noted in `created`). An existing endpoint keeps the profile it stores.
async fn endpoint_with_key<C: ConnectionTrait>(
    txn: &C,
    vault: &Vault,
    t: &tenant::Model,
    w: &Wanted,
    now: i64,
    created: &mut Vec<String>,
) -> DomainResult<(endpoint::Model, signing_key::Model)> {
    let (scheme, slug) = (w.scheme, &w.slug);
    let e = match endpoint::Entity::find()
        .filter(endpoint::Column::TenantId.eq(&t.id))
        .filter(endpoint::Column::Slug.eq(slug.as_str()))
        .one(txn)
        .await?
    {
        Some(e) => e,
        None => {
            let stored_profile = w.profile.as_ref().map(|(p, _)| hmac_profile::to_stored(p)).transpose()?;
            let e = endpoint::Model {
                id: ids::new_id(),
                tenant_id: t.id.clone(),
                slug: slug.clone(),
                scheme: scheme.as_str().to_owned(),
                event_types: EventTypes::any().to_json(),
                tolerance_secs: w.profile.as_ref().and_then(|(_, tol)| *tol).unwrap_or(DEFAULT_TOLERANCE_SECS),
                timestamp_floor: None,
                replay_partitioned_from: None,
                event_id_fields: None,
                hmac_profile: stored_profile,
                max_body_bytes: 64 * 1024,
                enabled: true,
                created_at: now,
            };
            endpoint::Entity::insert(endpoint::ActiveModel::from(e.clone())).exec_without_returning(txn).await?;
            defaults::retention_v1(txn, &Actor::System, &e.id, scheme, now).await?;
            created.push(format!("endpoint {slug}"));
            e
        }
    };
    // The drills sign with the key's secret: only an HMAC key has one.
    if let Some(k) = keys::accepted_key_rows(txn, &e.id, now).await?.into_iter().find(|k| k.credential_kind == "hmac") {
        return Ok((e, k));
    }
    let key_id = ids::new_key_id();
    let secret = SigningSecret::generate();
    let types = EventTypes::any();
    let scope = keys::scope_hash(t, &e, &types);
    let (sealed, kek) =
        vault.seal(&crate::crypto::Aad::signing_key(&t.id, &e.id, key_id.as_str()), secret.expose().as_bytes())?;
    let k = signing_key::Model {
        id: key_id.into_string(),
        tenant_id: t.id.clone(),
        endpoint_id: e.id.clone(),
        status: KeyStatus::Active,
        event_types: types.to_json(),
        scope_hash: scope.clone(),
        approved_scope_hash: Some(scope),
        secret_ciphertext: sealed,
        kek_version: kek as i32,
        owner: "signet drills".into(),
        rotation_owner: "signet drills".into(),
        replaces_key_id: None,
        overlap_secs: None,
        created_by: "system".into(),
        created_at: now,
        activated_at: Some(now),
        expires_at: None,
        revoked_at: None,
        revoked_reason: None,
        last_verified_at: None,
        verified_count: 0,
        failure_count: 0,
        last_failure_at: None,
        last_failure_reason: None,
        scope_changed_by: None,
        credential_kind: "hmac".into(),
        public_key: None,
    };
    signing_key::Entity::insert(signing_key::ActiveModel::from(k.clone())).exec_without_returning(txn).await?;
    created.push(format!("key {slug}"));
    Ok((e, k))
}

/// Removes the drill tenant's event rows from earlier runs (nothing of any
/// other tenant): each run starts from an empty drill tenant.
pub async fn clear(db: &DatabaseConnection, fx: &Fixture) -> DomainResult<()> {
    let txn = db::begin_write(db).await?;
    quarantine_entry::Entity::delete_many()
        .filter(quarantine_entry::Column::TenantId.eq(&fx.tenant_id))
        .exec(&txn)
        .await?;
    inbox_claim::Entity::delete_many().filter(inbox_claim::Column::TenantId.eq(&fx.tenant_id)).exec(&txn).await?;
    event_body::Entity::delete_many().filter(event_body::Column::TenantId.eq(&fx.tenant_id)).exec(&txn).await?;
    outbox_intent::Entity::delete_many().filter(outbox_intent::Column::TenantId.eq(&fx.tenant_id)).exec(&txn).await?;
    reminder::Entity::delete_many().filter(reminder::Column::TenantId.eq(&fx.tenant_id)).exec(&txn).await?;
    let endpoints: Vec<&str> = fx.schemes.iter().map(|s| s.endpoint_id.as_str()).collect();
    replay_record::Entity::delete_many().filter(replay_record::Column::EndpointId.is_in(endpoints)).exec(&txn).await?;
    txn.commit().await?;
    Ok(())
}
