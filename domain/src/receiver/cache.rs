//! Endpoint and accepted-key lookups for the hot path, cached with a bounded
//! staleness: an entry is reloaded once it is older than the TTL (5 s by
//! default), so a revocation, rotation or disabled endpoint takes effect
//! within that time on every instance. Decrypted HMAC keys live only in
//! `Zeroizing` buffers and are wiped when an entry is replaced or evicted.

use std::{
    collections::HashMap,
    sync::{Arc, RwLock},
    time::{Duration, Instant},
};

use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter};
use zeroize::Zeroizing;

use crate::{
    clock,
    crypto::signature::hmac_key,
    entity::{endpoint, tenant},
    error::DomainResult,
    registry::{keys, EventTypes, Scheme},
    vault::Vault,
};

/// One accepted key, ready to verify with.
pub struct CachedKey {
    pub key_id: String,
    pub hmac_key: Zeroizing<Vec<u8>>,
    pub scope: EventTypes,
}

impl std::fmt::Debug for CachedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedKey").field("key_id", &self.key_id).field("hmac_key", &"<redacted>").finish()
    }
}

/// Everything the pipeline needs about an enabled endpoint.
#[derive(Debug)]
pub struct EndpointCtx {
    pub tenant_id: String,
    pub tenant_slug: String,
    pub endpoint_id: String,
    pub endpoint_slug: String,
    pub scheme: Scheme,
    pub tolerance_secs: i64,
    pub max_body_bytes: usize,
    /// The tenant's retry policy: `true` = enabled (transient → 503).
    pub retries_enabled: bool,
    /// The drills' reserved tenant: its traffic is kept out of metrics and
    /// rollups, and only it can consume drill faults.
    pub synthetic: bool,
    pub keys: Vec<CachedKey>,
}

type Slot = (Instant, Option<Arc<EndpointCtx>>);

/// The cache. Unknown endpoints are cached too (as `None`), so probing
/// random paths costs one query per TTL, not one per request.
pub struct EndpointCache {
    ttl: Duration,
    max_entries: usize,
    slots: RwLock<HashMap<(String, String), Slot>>,
}

impl EndpointCache {
    pub fn new(ttl: Duration) -> Self {
        EndpointCache { ttl, max_entries: 10_000, slots: RwLock::new(HashMap::new()) }
    }

    /// The enabled endpoint at `/hooks/{tenant}/{endpoint}`, or `None`.
    pub async fn get(&self, db: &DatabaseConnection, vault: &Vault, tenant: &str, endpoint: &str) -> DomainResult<Option<Arc<EndpointCtx>>> {
        let key = (tenant.to_owned(), endpoint.to_owned());
        if let Some((at, ctx)) = self.slots.read().unwrap_or_else(|p| p.into_inner()).get(&key) {
            if at.elapsed() < self.ttl {
                return Ok(ctx.clone());
            }
        }
        let loaded = load(db, vault, tenant, endpoint).await?.map(Arc::new);
        let mut slots = self.slots.write().unwrap_or_else(|p| p.into_inner());
        if slots.len() >= self.max_entries {
            slots.clear();
        }
        slots.insert(key, (Instant::now(), loaded.clone()));
        Ok(loaded)
    }
}

async fn load(db: &DatabaseConnection, vault: &Vault, tenant_slug: &str, endpoint_slug: &str) -> DomainResult<Option<EndpointCtx>> {
    let Some(t) = tenant::Entity::find().filter(tenant::Column::Slug.eq(tenant_slug)).one(db).await? else {
        return Ok(None);
    };
    let Some(e) = endpoint::Entity::find()
        .filter(endpoint::Column::TenantId.eq(&t.id))
        .filter(endpoint::Column::Slug.eq(endpoint_slug))
        .filter(endpoint::Column::Enabled.eq(true))
        .one(db)
        .await?
    else {
        return Ok(None);
    };
    let scheme = Scheme::parse(&e.scheme)?;
    let mut cached = Vec::new();
    for k in keys::accepted_key_rows(db, &e.id, clock::now_ms()).await? {
        let secret = keys::open_secret(db, vault, &k).await?;
        match hmac_key(scheme, &secret) {
            Some(hmac_key) => cached.push(CachedKey { key_id: k.id.clone(), hmac_key, scope: EventTypes::from_json(&k.event_types) }),
            None => tracing::error!(key_id = %k.id, "stored secret cannot be used with the endpoint's scheme"),
        }
    }
    Ok(Some(EndpointCtx {
        tenant_id: t.id,
        tenant_slug: t.slug,
        endpoint_id: e.id,
        endpoint_slug: e.slug,
        scheme,
        tolerance_secs: e.tolerance_secs,
        max_body_bytes: usize::try_from(e.max_body_bytes).unwrap_or(0),
        retries_enabled: t.retry_policy != "disabled",
        synthetic: t.synthetic,
        keys: cached,
    }))
}
