//! Endpoint and accepted-key lookups for the hot path, cached with a bounded
//! staleness: an entry is reloaded once it is older than the TTL (5 s by
//! default), so a revocation, rotation or disabled endpoint takes effect
//! within that time on every instance. Decrypted HMAC keys live only in
//! `Zeroizing` buffers and are wiped when an entry is replaced or evicted;
//! `v1a` public keys are parsed once per load.

use std::{
    collections::HashMap,
    sync::{
        Arc, RwLock,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter};
use zeroize::Zeroizing;

use crate::{
    clock,
    crypto::{asymmetric::PublicKey, signature::hmac_key},
    entity::{endpoint, tenant},
    error::DomainResult,
    registry::{hmac_profile::Compiled, keys},
    retention,
    vault::Vault,
};
use views::ids::{EndpointSlug, TenantSlug};
use views::{
    retry_policy::RetryPolicy,
    scheme::{EventTypes, Scheme},
};

/// What a cached key verifies with.
pub enum Verifier {
    /// The scheme's HMAC key bytes (secret).
    Hmac(Zeroizing<Vec<u8>>),
    /// A standard-webhooks `v1a` public key: verifies `v1a` signatures only.
    Ed25519(PublicKey),
}

/// One accepted key, ready to verify with.
pub struct CachedKey {
    pub key_id: String,
    pub verifier: Verifier,
    pub scope: EventTypes,
}

impl std::fmt::Debug for CachedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let verifier = match &self.verifier {
            Verifier::Hmac(_) => "hmac <redacted>".to_owned(),
            Verifier::Ed25519(pk) => format!("{pk:?}"),
        };
        f.debug_struct("CachedKey").field("key_id", &self.key_id).field("verifier", &verifier).finish()
    }
}

/// Everything the pipeline needs about an enabled endpoint.
#[derive(Debug)]
pub struct EndpointCtx {
    pub tenant_id: String,
    pub tenant_slug: TenantSlug,
    pub endpoint_id: String,
    pub endpoint_slug: EndpointSlug,
    pub scheme: Scheme,
    /// The signing profile of an `hmac` endpoint; `None` for the fixed
    /// schemes (and for a stored profile that no longer parses, which then
    /// verifies nothing).
    pub hmac: Option<Arc<Compiled>>,
    pub tolerance_secs: i64,
    /// Signed timestamps before this (unix s) are stale whatever the
    /// tolerance: set when a tolerance is raised, so a message that had left
    /// the old window (and whose replay record may be purged) stays out.
    pub timestamp_floor: Option<i64>,
    /// Signed timestamps from this (unix s) have their replay records filed
    /// by day; earlier ones with `signed_at = 0`, as the records stored
    /// before the upgrade that partitioned them were (`None`: all).
    pub replay_partitioned_from: Option<i64>,
    /// How long a replay record is kept: twice the tolerance for schemes
    /// that sign a timestamp; for GitHub, whose signature covers the body
    /// alone, and `hmac` profiles without a timestamp, the endpoint's dedup
    /// retention.
    pub replay_keep_ms: i64,
    /// The endpoint's compound event key (envelope field paths), for
    /// senders that give no event id; `None`: such events are quarantined.
    pub event_key: Option<Vec<String>>,
    pub max_body_bytes: usize,
    /// The tenant's retry policy: `true` = enabled (transient → 503).
    pub retries_enabled: bool,
    /// The drills' reserved tenant: its traffic is kept out of metrics and
    /// rollups, and only it can consume drill faults.
    pub synthetic: bool,
    pub keys: Vec<CachedKey>,
}

/// A loaded endpoint: when it was read, and when a signature mismatch last
/// forced a reload (see [`EndpointCache::reload_after_mismatch`]).
struct Slot {
    loaded: Instant,
    forced: Option<Instant>,
    ctx: Arc<EndpointCtx>,
}

/// More than any deployment has endpoints; only reached if it had, and then
/// stale entries go first.
const MAX_KNOWN: usize = 100_000;
/// Unknown paths remembered at once. Probing random paths fills only this
/// map, never evicting a real endpoint's entry.
const MAX_UNKNOWN: usize = 10_000;
/// A signature mismatch reloads an endpoint's keys at most this often.
pub const MISMATCH_RELOAD_EVERY: Duration = Duration::from_secs(1);

/// The cache. Real endpoints and unknown paths live in separate maps: a
/// flood of random paths costs at most one query per path and TTL and can
/// never flush the endpoints that take traffic. Paths that are not slugs are
/// unknown without a query or a slot.
pub struct EndpointCache {
    ttl: Duration,
    known: RwLock<HashMap<(TenantSlug, EndpointSlug), Slot>>,
    unknown: RwLock<HashMap<(TenantSlug, EndpointSlug), Instant>>,
    loads: AtomicU64,
}

impl EndpointCache {
    pub fn new(ttl: Duration) -> Self {
        EndpointCache { ttl, known: RwLock::default(), unknown: RwLock::default(), loads: AtomicU64::new(0) }
    }

    /// Database lookups so far (for tests and diagnostics).
    pub fn loads(&self) -> u64 {
        self.loads.load(Ordering::Relaxed)
    }

    /// The enabled endpoint at `/hooks/{tenant}/{endpoint}`, or `None`.
    /// Names outside the slug syntax never get here (`receiver::address`).
    pub async fn get(
        &self,
        db: &DatabaseConnection,
        vault: &Vault,
        tenant: &TenantSlug,
        endpoint: &EndpointSlug,
    ) -> DomainResult<Option<Arc<EndpointCtx>>> {
        let key = (tenant.clone(), endpoint.clone());
        if let Some(slot) = read(&self.known).get(&key)
            && slot.loaded.elapsed() < self.ttl
        {
            return Ok(Some(slot.ctx.clone()));
        }
        if read(&self.unknown).get(&key).is_some_and(|at| at.elapsed() < self.ttl) {
            return Ok(None);
        }
        self.load_into(db, vault, key, None).await
    }

    /// After a signature mismatch: the endpoint's accepted keys read afresh,
    /// so a key activated a moment ago (by the CLI, the console or another
    /// instance) verifies at once. At most once per
    /// [`MISMATCH_RELOAD_EVERY`] per endpoint, so bad signatures cannot turn
    /// into a query each; `None` when it is not due (or the endpoint is gone).
    pub async fn reload_after_mismatch(
        &self,
        db: &DatabaseConnection,
        vault: &Vault,
        ep: &EndpointCtx,
    ) -> DomainResult<Option<Arc<EndpointCtx>>> {
        let key = (ep.tenant_slug.clone(), ep.endpoint_slug.clone());
        let now = Instant::now();
        {
            let mut known = write(&self.known);
            let Some(slot) = known.get_mut(&key) else { return Ok(None) };
            if slot.forced.is_some_and(|at| now.duration_since(at) < MISMATCH_RELOAD_EVERY) {
                return Ok(None);
            }
            // Claimed before the query, so concurrent mismatches reload once.
            slot.forced = Some(now);
        }
        self.load_into(db, vault, key, Some(now)).await
    }

    async fn load_into(
        &self,
        db: &DatabaseConnection,
        vault: &Vault,
        key: (TenantSlug, EndpointSlug),
        forced: Option<Instant>,
    ) -> DomainResult<Option<Arc<EndpointCtx>>> {
        self.loads.fetch_add(1, Ordering::Relaxed);
        let loaded = load(db, vault, &key.0, &key.1).await?.map(Arc::new);
        let now = Instant::now();
        match &loaded {
            Some(ctx) => {
                write(&self.unknown).remove(&key);
                let mut known = write(&self.known);
                if known.len() >= MAX_KNOWN && !known.contains_key(&key) {
                    known.retain(|_, s| s.loaded.elapsed() < self.ttl);
                    if known.len() >= MAX_KNOWN {
                        known.clear();
                    }
                }
                known.insert(key, Slot { loaded: now, forced, ctx: ctx.clone() });
            }
            None => {
                write(&self.known).remove(&key);
                let mut unknown = write(&self.unknown);
                if unknown.len() >= MAX_UNKNOWN && !unknown.contains_key(&key) {
                    unknown.retain(|_, at| at.elapsed() < self.ttl);
                    if unknown.len() >= MAX_UNKNOWN {
                        unknown.clear();
                    }
                }
                unknown.insert(key, now);
            }
        }
        Ok(loaded)
    }
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|p| p.into_inner())
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|p| p.into_inner())
}

async fn load(
    db: &DatabaseConnection,
    vault: &Vault,
    tenant_slug: &TenantSlug,
    endpoint_slug: &EndpointSlug,
) -> DomainResult<Option<EndpointCtx>> {
    let Some(t) = tenant::Entity::find().filter(tenant::Column::Slug.eq(tenant_slug.as_str())).one(db).await? else {
        return Ok(None);
    };
    let Some(e) = endpoint::Entity::find()
        .filter(endpoint::Column::TenantId.eq(&t.id))
        .filter(endpoint::Column::Slug.eq(endpoint_slug.as_str()))
        .filter(endpoint::Column::Enabled.eq(true))
        .one(db)
        .await?
    else {
        return Ok(None);
    };
    let scheme = crate::registry::parse_scheme(&e.scheme)?;
    let hmac = match scheme {
        Scheme::Hmac => {
            let compiled = e.hmac_profile.as_deref().and_then(Compiled::from_stored).map(Arc::new);
            if compiled.is_none() {
                tracing::error!(endpoint_id = %e.id, "the endpoint's hmac profile is missing or unreadable");
            }
            compiled
        }
        _ => None,
    };
    let signs_timestamp = match scheme {
        Scheme::Github => false,
        Scheme::Hmac => hmac.as_ref().is_some_and(|c| c.profile.has_timestamp()),
        _ => true,
    };
    let replay_keep_ms = if signs_timestamp {
        2 * e.tolerance_secs * 1000
    } else {
        retention::effective_dedup_secs(db, &e.id, &e.scheme).await? * 1000
    };
    let mut cached = Vec::new();
    for k in keys::accepted_key_rows(db, &e.id, clock::now_ms()).await? {
        let verifier = if k.credential_kind == views::keys::CredentialKind::Ed25519.as_str() {
            match k.public_key.as_deref().map(PublicKey::parse) {
                Some(Ok(pk)) if scheme == Scheme::StandardWebhooks => Some(Verifier::Ed25519(pk)),
                _ => None,
            }
        } else {
            hmac_key(scheme, &keys::open_secret(db, vault, &k).await?).map(Verifier::Hmac)
        };
        match verifier {
            Some(verifier) => {
                cached.push(CachedKey { key_id: k.id.clone(), verifier, scope: EventTypes::from_json(&k.event_types) })
            }
            None => tracing::error!(key_id = %k.id, "stored credential cannot be used with the endpoint's scheme"),
        }
    }
    Ok(Some(EndpointCtx {
        tenant_id: t.id,
        // The rows matched these names exactly.
        tenant_slug: tenant_slug.clone(),
        endpoint_id: e.id,
        endpoint_slug: endpoint_slug.clone(),
        scheme,
        hmac,
        tolerance_secs: e.tolerance_secs,
        timestamp_floor: e.timestamp_floor,
        replay_partitioned_from: e.replay_partitioned_from,
        replay_keep_ms,
        event_key: crate::registry::endpoints::parse_event_key(e.event_id_fields.as_deref()),
        max_body_bytes: usize::try_from(e.max_body_bytes).unwrap_or(0),
        retries_enabled: t.retry_policy == RetryPolicy::Enabled,
        synthetic: t.synthetic,
        keys: cached,
    }))
}
