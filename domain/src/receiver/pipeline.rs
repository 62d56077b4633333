//! The hot path, in contract order. The HTTP handler calls [`resolve`]
//! (gate 1), reads the body within the endpoint's limit (gate 2), then calls
//! [`process`] (gates 3–9).

use std::{sync::Arc, time::Duration};

use sea_orm::{DatabaseConnection, DbErr};

use super::{
    batch::{self, Batcher, Job, Reply},
    cache::{EndpointCache, EndpointCtx},
    claim::{self, Checks},
    envelope::{self, Envelope},
    faults::Faults,
    outcome::{Outcome, Refusal},
    verify::{Verified, verify},
};
use crate::{clock, crypto::signature::HeaderSource, db, error::DomainError, vault::Vault};

/// Everything the pipeline needs, built once at start.
pub struct Receiver {
    pub db: DatabaseConnection,
    pub vault: Arc<Vault>,
    pub cache: EndpointCache,
    pub faults: Faults,
    /// SQLite has one writer at a time. Queueing this process's claim
    /// transactions here (first come, first served) replaces SQLite's
    /// busy-wait polling, which otherwise adds 10–100 ms tails under load.
    /// Other processes (the CLI) still wait through the busy timeout.
    write_queue: Option<Arc<tokio::sync::Mutex<()>>>,
    /// Group commit for deliveries expected to apply (see `batch`).
    batcher: Batcher,
    /// Each endpoint's key that verified last, to count a failed signature
    /// under it when the request names no key (seed 000's "verification
    /// logs" per credential).
    last_verified: std::sync::RwLock<std::collections::HashMap<String, String>>,
    /// Claim attempts repeated after a transient failure or a lost
    /// connection (for `/metrics`).
    claim_retries: std::sync::atomic::AtomicU64,
}

/// Concurrent claim batches on PostgreSQL: while some commit, the next
/// collects. On the 2-core bench machine 1, 2, 3, 4 and 8 workers gave the
/// same throughput within its noise. SQLite has one writer, so one.
const PG_BATCH_WORKERS: usize = 4;

impl Receiver {
    /// A receiver with the fault points `SIGNET_FAULTS` names (debug builds).
    /// Starts the claim workers, so it must be called inside a tokio runtime.
    pub fn new(db: DatabaseConnection, vault: Arc<Vault>) -> Self {
        Receiver::with_faults(db, vault, Faults::from_env())
    }

    pub fn with_faults(db: DatabaseConnection, vault: Arc<Vault>, faults: Faults) -> Self {
        let sqlite = db.get_database_backend() == sea_orm::DbBackend::Sqlite;
        let write_queue = sqlite.then(|| Arc::new(tokio::sync::Mutex::new(())));
        let ctx = batch::Ctx {
            db: db.clone(),
            vault: vault.clone(),
            faults: faults.clone(),
            write_queue: write_queue.clone(),
        };
        let batcher = Batcher::start(ctx, if sqlite { 1 } else { PG_BATCH_WORKERS });
        Receiver {
            db,
            vault,
            cache: EndpointCache::new(Duration::from_secs(5)),
            faults,
            write_queue,
            batcher,
            last_verified: Default::default(),
            claim_retries: Default::default(),
        }
    }

    /// Claim batches committed so far and the events they carried.
    pub fn batch_stats(&self) -> &batch::BatchStats {
        &self.batcher.stats
    }

    /// Claim attempts repeated so far (transient failures, lost connections).
    pub fn claim_retries(&self) -> u64 {
        self.claim_retries.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn remember_verified(&self, endpoint_id: &str, key_id: &str) {
        let known =
            self.last_verified.read().unwrap_or_else(|p| p.into_inner()).get(endpoint_id).is_some_and(|k| k == key_id);
        if !known {
            self.last_verified
                .write()
                .unwrap_or_else(|p| p.into_inner())
                .insert(endpoint_id.to_owned(), key_id.to_owned());
        }
    }

    /// The key a failed verification is counted under: the one it named or
    /// matched, else the endpoint's key that verified last; only ever one of
    /// the keys `ep` (the set it was verified against) accepts. A request
    /// naming a key outside that set is counted under none.
    fn attribute(&self, ep: &EndpointCtx, rejected: super::verify::Rejected) -> (Outcome, Option<String>) {
        let last = || self.last_verified.read().unwrap_or_else(|p| p.into_inner()).get(&ep.endpoint_id).cloned();
        let key = match rejected.refusal {
            Refusal::UnknownKey => None,
            _ => rejected.key_id.or_else(last),
        };
        (Outcome::Refused(rejected.refusal), key.filter(|k| ep.keys.iter().any(|a| a.key_id == *k)))
    }
}

/// How often a transient database failure is retried before giving up.
const TRANSIENT_ATTEMPTS: u32 = 3;

/// Pooled connections are not pinged while in use (see `db::connect`), so
/// after a database restart every idle one fails its first statement. Each
/// such failure discards that connection; up to a pool's worth of them are
/// retried at once without using up an attempt.
const LOST_CONNECTION_RETRIES: u32 = db::PG_MAX_CONNECTIONS;

/// Gate 1: the tenant and endpoint exist and are enabled.
pub async fn resolve(r: &Receiver, tenant: &str, endpoint: &str) -> Result<Arc<EndpointCtx>, Outcome> {
    let mut lost = 0;
    loop {
        match r.cache.get(&r.db, &r.vault, tenant, endpoint).await {
            Ok(Some(ep)) => return Ok(ep),
            Ok(None) => return Err(Outcome::Refused(Refusal::UnknownEndpoint)),
            Err(DomainError::Db(e)) if db::is_lost_connection(&e) && lost < LOST_CONNECTION_RETRIES => lost += 1,
            Err(e) => {
                tracing::error!(error = %e, "endpoint lookup failed");
                return Err(Outcome::Unavailable);
            }
        }
    }
}

/// Gates 3–9 for a body already read within the limit (gate 2). Returns the
/// outcome and the key it is counted under: the one that verified, or for a
/// failed verification the one named, matched or last to verify.
pub async fn process<H: HeaderSource + ?Sized>(
    r: &Receiver,
    ep: &Arc<EndpointCtx>,
    headers: &H,
    key_hint: Option<&str>,
    body: bytes::Bytes,
) -> (Outcome, Option<String>) {
    // Gates 3, 4, 5.
    let now = clock::now_ms() / 1000;
    let verified = match verify(ep, headers, key_hint, body.clone(), now) {
        Ok(v) => v,
        // Perhaps a key activated a moment ago: the accepted set is read
        // afresh (at most once a second per endpoint) before refusing.
        Err(rejected) if matches!(rejected.refusal, Refusal::SignatureMismatch | Refusal::UnknownKey) => {
            match r.cache.reload_after_mismatch(&r.db, &r.vault, ep).await {
                Ok(Some(fresh)) => match verify(&fresh, headers, key_hint, body, now) {
                    Ok(v) => v,
                    Err(rejected) => return r.attribute(&fresh, rejected),
                },
                Ok(None) => return r.attribute(ep, rejected),
                Err(e) => {
                    tracing::warn!(error = %e, "reloading the endpoint's keys after a mismatch failed");
                    return r.attribute(ep, rejected);
                }
            }
        }
        Err(rejected) => return r.attribute(ep, rejected),
    };
    r.remember_verified(&ep.endpoint_id, verified.key_id());
    let key_id = Some(verified.key_id().to_owned());
    // Gates 7 and 8 are pure; they are decided here and take effect in
    // contract order, after the replay check, inside the transaction.
    let envelope = envelope::parse(verified.body());
    let scope = check_scope(&verified, envelope.as_ref());
    // An event without an id (and no compound key for its endpoint) is kept
    // in quarantine, claimed under its signed message: the very same request
    // again is a replay (gate 6), and a re-signed copy is an entry of its own,
    // because identical bodies can be two events (seed 002); on-call decides.
    // A body that is no envelope at all keeps its body digest as its id.
    let (event_id, quarantine) = match (event_id(&verified, envelope.as_ref()), &envelope) {
        (Some(id), _) => (id, None),
        (None, Some(_)) => (
            format!("message:{}", verified.message_digest().unwrap_or(verified.body_digest())),
            Some("missing_event_id"),
        ),
        (None, None) => (format!("sha256:{}", verified.body_digest()), None),
    };
    // Gates 6 and 9, with the effect, in one transaction: shared with other
    // deliveries when this one is expected to apply, else its own.
    // A drill delivery with a drill fault armed takes the one-event path,
    // where the fault sits, so it never holds up others' shared commit.
    let alone = (ep.synthetic && r.faults.drill.is_armed()) || quarantine.is_some();
    let (verified, event_id, envelope, scope, prior) = match (envelope, scope) {
        (Some(envelope), Ok(())) if !alone => match r.batcher.claim(Job { verified, event_id, envelope }).await {
            Some(Reply::Done(outcome)) => return (outcome, key_id),
            Some(Reply::Alone(job, prior)) => {
                let Job { verified, event_id, envelope } = *job;
                (verified, event_id, Some(envelope), Ok(()), prior)
            }
            None => {
                tracing::error!("the claim workers stopped before answering");
                return (Outcome::Unavailable, key_id);
            }
        },
        (envelope, scope) => (verified, event_id, envelope, scope, None),
    };
    let checks = Checks { event_id: &event_id, envelope: envelope.as_ref(), scope, quarantine };
    (claim_with_retries(r, &verified, &checks, prior).await, key_id)
}

/// Gate 8: the verifying key's scope permits the type, and an envelope
/// tenant (if any) is the path's tenant.
fn check_scope(v: &Verified, env: Option<&Envelope>) -> Result<(), Refusal> {
    let Some(env) = env else { return Ok(()) };
    if env.tenant.as_deref().is_some_and(|t| t != v.endpoint().tenant_slug) {
        return Err(Refusal::TenantMismatch);
    }
    if !v.key_scope().is_some_and(|s| s.permits(&env.event_type)) {
        return Err(Refusal::EventTypeNotPermitted);
    }
    Ok(())
}

/// The event id: the provider's message id header, or (Stripe) the
/// envelope's `id`, or the endpoint's documented compound key over envelope
/// fields (`registry::event_key`). `None`: the event has no stable id.
fn event_id(v: &Verified, env: Option<&Envelope>) -> Option<String> {
    if let Some(id) = v.message_id() {
        return Some(id.to_owned());
    }
    let env = env?;
    if let Some(id) = &env.id {
        return Some(id.clone());
    }
    crate::registry::event_key::compound_id(v.endpoint().event_key.as_deref()?, env)
}

/// The one-event path. `prior` is the error of a failed batch this delivery
/// was in: that batch may have committed.
async fn claim_with_retries(r: &Receiver, v: &Verified, c: &Checks<'_>, prior: Option<DbErr>) -> Outcome {
    let mut last: Option<DbErr> = prior;
    let (mut attempt, mut lost) = (0, 0);
    while attempt < TRANSIENT_ATTEMPTS {
        let queued = claim::write_turn(r.write_queue.as_deref()).await;
        let result = claim::attempt(r, v, c).await;
        drop(queued);
        match result {
            // A failed earlier attempt may have committed before its answer
            // was lost: then the replay record this retry trips over is its
            // own, and the event's claim says what happened.
            Ok(Outcome::Refused(Refusal::Replay)) if last.is_some() => {
                return match claim::existing(&r.db, v, c.event_id).await {
                    Ok(Some(found @ Outcome::Duplicate { .. })) => found,
                    _ => Outcome::Refused(Refusal::Replay),
                };
            }
            Ok(outcome) => return outcome,
            Err(e) if db::is_lost_connection(&e) && lost < LOST_CONNECTION_RETRIES => {
                tracing::info!(error = %e, "the database had closed a pooled connection; retrying on another");
                r.claim_retries.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                lost += 1;
                last = Some(e);
            }
            Err(e) if db::is_transient(&e) => {
                tracing::warn!(attempt, error = %e, "transient failure while claiming; retrying");
                r.claim_retries.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                last = Some(e);
                tokio::time::sleep(Duration::from_millis(20 * 2u64.pow(attempt))).await;
                attempt += 1;
            }
            Err(e) => {
                tracing::error!(error = %e, "claim transaction failed");
                return Outcome::Unavailable;
            }
        }
    }
    let ep = v.endpoint();
    if ep.retries_enabled {
        tracing::error!(error = ?last, tenant = %ep.tenant_slug, "transient failures exhausted; answering 503");
        return Outcome::Unavailable;
    }
    // Gate 8 first: an event its key may not send is refused, never kept
    // for a release to apply later.
    if let Err(refusal) = c.scope {
        return Outcome::Refused(refusal);
    }
    // Retries disabled for this tenant: keep the event rather than ask the
    // provider to come back, if the database can still record it.
    match claim::quarantine(r, v, c.event_id, c.envelope.map(|e| e.event_type.as_str()), "transient").await {
        Ok(outcome) => outcome,
        Err(e) => {
            tracing::error!(error = %e, "could not quarantine after transient failures");
            Outcome::Unavailable
        }
    }
}
