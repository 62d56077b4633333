//! The hot path, in contract order (docs/contract.md §3): [`receive`] runs gates 1
//! to 9 for one delivery and returns its [`Receipt`].

use std::{future::Future, sync::Arc, time::Duration};

use bytes::Bytes;
use sea_orm::{DatabaseConnection, Set};
use tracing::{Instrument, field::Empty};

use super::{
    admission,
    attribution::Attribution,
    cache::{EndpointCache, EndpointCtx},
    claim::{BatchStats, Claims, DeliveryLogStats, Rollbacks, Traffic},
    faults::Faults,
    outcome::{Outcome, Refusal},
    verify::{Verified, verify},
};
use crate::{
    TRACE_TARGET, clock,
    crypto::signature::{HeaderSource, claimed_message_id},
    db,
    entity::delivery_log,
    error::DomainError,
    vault::Vault,
};
use views::ids::{EndpointSlug, TenantSlug};

/// Seals the receiver keeps counted ahead (see `vault`): more than all
/// deliveries in flight seal between two checks.
const SEAL_SLACK: u64 = 4096;

/// A request as the receiver sees it: headers at hand, and a body that is
/// only read when gate 2 asks for it, under the endpoint's limit.
pub trait Delivery {
    type Headers: HeaderSource + Sync + ?Sized;
    fn headers(&self) -> &Self::Headers;
    /// Gate 2: the body, keeping at most `limit` bytes; `Err` is
    /// `body_too_large`, `body_incomplete` or `overloaded` (the server's
    /// bound on body bytes held at once).
    fn body(&mut self, limit: usize) -> impl Future<Output = Result<Bytes, Refusal>> + Send;
    /// The W3C `traceparent` of the span receiving this delivery, kept with
    /// the outbox intents it creates; `None` while traces are not exported.
    fn trace_context(&self) -> Option<String> {
        None
    }
}

/// A delivery whose body is already in memory (drills, tests).
pub struct Buffered<'a, H: HeaderSource + Sync + ?Sized> {
    pub headers: &'a H,
    pub body: Bytes,
}

impl<H: HeaderSource + Sync + ?Sized> Delivery for Buffered<'_, H> {
    type Headers = H;
    fn headers(&self) -> &H {
        self.headers
    }
    async fn body(&mut self, limit: usize) -> Result<Bytes, Refusal> {
        if self.body.len() > limit {
            return Err(Refusal::BodyTooLarge);
        }
        Ok(self.body.clone())
    }
}

/// What the receiver concluded, and for the caller's figures: the endpoint
/// (when gate 1 found one) and the key the delivery is counted under.
#[derive(Debug)]
pub struct Receipt {
    pub outcome: Outcome,
    pub endpoint: Option<Arc<EndpointCtx>>,
    /// The key that verified, or for a failed verification the one named,
    /// matched or last to verify (see [`Attribution`]).
    pub key_id: Option<String>,
}

impl Receipt {
    /// Gate 1's answer for a path that names no endpoint ([`address`]).
    pub fn unknown_endpoint() -> Receipt {
        Receipt { outcome: Outcome::Refused(Refusal::UnknownEndpoint), endpoint: None, key_id: None }
    }
}

/// What `/hooks/{tenant}/{endpoint}` names: two slugs, the tenant possibly
/// the drills' synthetic one ([`TenantSlug::parse_hook`]). Anything else
/// names no endpoint, known without asking the database or taking a cache
/// slot: the edge answers [`Receipt::unknown_endpoint`].
pub fn address(tenant: &str, endpoint: &str) -> Option<(TenantSlug, EndpointSlug)> {
    Some((TenantSlug::parse_hook(tenant).ok()?, EndpointSlug::parse(endpoint).ok()?))
}

/// Gates 1 to 9 for one delivery to `/hooks/{tenant}/{endpoint}`.
pub async fn receive<D: Delivery>(r: &Receiver, tenant: &TenantSlug, endpoint: &EndpointSlug, delivery: D) -> Receipt {
    run(r, tenant, endpoint, delivery, Traffic::Live).await
}

/// Gates 1 to 9 for a test delivery (`onboarding::test_delivery`): the
/// same gates, but gates 6 and 9 roll their transaction back, so nothing is
/// kept (no replay record, claim, effect or outbox intent); no delivery-log
/// row is written and no key is credited with it. Counted apart from real
/// traffic ([`Receiver::test_deliveries`]).
pub async fn rehearse<D: Delivery>(r: &Receiver, tenant: &TenantSlug, endpoint: &EndpointSlug, delivery: D) -> Receipt {
    let receipt = run(r, tenant, endpoint, delivery, Traffic::Test).await;
    r.tests.count(&receipt.outcome);
    receipt
}

async fn run<D: Delivery>(
    r: &Receiver,
    tenant: &TenantSlug,
    endpoint: &EndpointSlug,
    mut delivery: D,
    traffic: Traffic,
) -> Receipt {
    // Gate 1: the tenant and endpoint exist and are enabled.
    let ep = match r.resolve(tenant, endpoint).await {
        Ok(ep) => ep,
        Err(outcome) => return Receipt { outcome, endpoint: None, key_id: None },
    };
    // Gate 2: the body, read within the endpoint's limit.
    let body = match delivery.body(ep.max_body_bytes).await {
        Ok(body) => body,
        Err(refusal) => return r.refused(&ep, delivery.headers(), refusal, None, traffic),
    };
    // Gates 3, 4 and 5: an accepted key's signature over these exact bytes, in time.
    let span = tracing::info_span!(
        target: TRACE_TARGET, "verify", scheme = ep.scheme.as_str(), key_id = Empty, outcome = Empty
    );
    let verified = match authenticate(r, &ep, delivery.headers(), body, traffic).instrument(span.clone()).await {
        Ok(verified) => verified,
        Err((refusal, key_id)) => {
            span.record("outcome", refusal.reason());
            if let Some(key_id) = &key_id {
                span.record("key_id", key_id.as_str());
            }
            return r.refused(&ep, delivery.headers(), refusal, key_id, traffic);
        }
    };
    span.record("outcome", "verified");
    span.record("key_id", verified.key_id());
    drop(span);
    let key_id = Some(verified.key_id().to_owned());
    // Gates 7 and 8 are decided now; they take effect after gate 6, in order.
    let admission = admission::admit(verified, delivery.trace_context());
    // The claim seals the body (and an outbox payload): counted first, outside
    // its transaction. A failure here is only logged: seals already counted
    // may last, and sealing without one fails as any transient error does.
    if let Err(e) = r.vault.reserve_seals(&r.db, SEAL_SLACK).await {
        tracing::warn!(error = %e, "counting seals ahead failed");
    }
    // Gates 6 and 9: the replay record, the claim, the effect and its outbox
    // intents, committed together before anyone is answered.
    let (event_id, digest) =
        (admission.event_id().to_owned(), admission.verified().message_digest().map(str::to_owned));
    let span = tracing::info_span!(
        target: TRACE_TARGET, "claim", path = Empty, batch = Empty, batch_size = Empty, outcome = Empty
    );
    let outcome = match traffic {
        Traffic::Live => r.claims.settle(admission, &span).instrument(span.clone()).await,
        Traffic::Test => r.claims.rehearse(admission).instrument(span.clone()).await,
    };
    if !span.is_disabled() {
        span.record("outcome", outcome.labels().0);
    }
    // The claim just made records this answer (its `first_answer`); any
    // other live answer goes in the delivery log, off the hot path (`claim::log`).
    if traffic == Traffic::Live && !outcome.recorded_by_claim() {
        r.log(&ep, event_id, &outcome, key_id.as_deref(), digest);
    }
    Receipt { outcome, endpoint: Some(ep), key_id }
}

/// Gates 3–5. A mismatch is checked once more against the endpoint's keys
/// read afresh (at most once a second per endpoint): perhaps a key
/// activated a moment ago. A refusal comes with the key it counts under.
async fn authenticate<H: HeaderSource + Sync + ?Sized>(
    r: &Receiver,
    ep: &Arc<EndpointCtx>,
    headers: &H,
    body: Bytes,
    traffic: Traffic,
) -> Result<Verified, (Refusal, Option<String>)> {
    let hint = key_hint(headers);
    let now = clock::now_ms() / 1000;
    let verified = match verify(ep, headers, hint, body.clone(), now) {
        Ok(v) => v,
        Err(rejected) if matches!(rejected.refusal, Refusal::SignatureMismatch | Refusal::UnknownKey) => {
            match r.cache.reload_after_mismatch(&r.db, &r.vault, ep).await {
                Ok(Some(fresh)) => match verify(&fresh, headers, hint, body, now) {
                    Ok(v) => v,
                    Err(rejected) => return Err(r.attribution.refused(&fresh, rejected)),
                },
                Ok(None) => return Err(r.attribution.refused(ep, rejected)),
                Err(e) => {
                    tracing::warn!(error = %e, "reloading the endpoint's keys after a mismatch failed");
                    return Err(r.attribution.refused(ep, rejected));
                }
            }
        }
        Err(rejected) => return Err(r.attribution.refused(ep, rejected)),
    };
    if traffic == Traffic::Live {
        r.attribution.verified(&ep.endpoint_id, verified.key_id());
    }
    Ok(verified)
}

/// The optional `signet-key-id` header: only the key it names may verify.
/// A value that is not visible ASCII names no key.
fn key_hint<H: HeaderSource + ?Sized>(headers: &H) -> Option<&str> {
    let raw = headers.header("signet-key-id")?;
    if !raw.iter().all(|b| *b == b'\t' || (0x20..0x7f).contains(b)) {
        return None;
    }
    std::str::from_utf8(raw).ok()
}

/// Everything the pipeline needs, built once at start.
pub struct Receiver {
    pub db: DatabaseConnection,
    pub vault: Arc<Vault>,
    pub cache: EndpointCache,
    claims: Claims,
    attribution: Attribution,
    tests: TestDeliveries,
}

impl Receiver {
    /// A receiver with the given fault points (`Faults::default()` outside
    /// tests). Starts the claim workers, so it must be called inside a tokio
    /// runtime.
    pub fn new(db: DatabaseConnection, vault: Arc<Vault>, faults: Faults) -> Self {
        Receiver {
            claims: Claims::start(db.clone(), vault.clone(), faults),
            db,
            vault,
            cache: EndpointCache::new(Duration::from_secs(5)),
            attribution: Attribution::default(),
            tests: TestDeliveries::default(),
        }
    }

    /// Gate 1: the tenant and endpoint exist and are enabled.
    pub async fn resolve(&self, tenant: &TenantSlug, endpoint: &EndpointSlug) -> Result<Arc<EndpointCtx>, Outcome> {
        let mut lost = 0;
        loop {
            match self.cache.get(&self.db, &self.vault, tenant, endpoint).await {
                Ok(Some(ep)) => return Ok(ep),
                Ok(None) => return Err(Outcome::Refused(Refusal::UnknownEndpoint)),
                Err(DomainError::Db(e))
                    if db::is_lost_connection(&e) && lost < db::lost_connection_retries(&self.db) =>
                {
                    lost += 1
                }
                Err(e) => {
                    tracing::error!(error = %e, "endpoint lookup failed");
                    return Err(Outcome::Unavailable);
                }
            }
        }
    }

    /// A refusal before the signature verified, logged under the event id
    /// its headers claim, when they claim a readable one.
    fn refused<H: HeaderSource + ?Sized>(
        &self,
        ep: &Arc<EndpointCtx>,
        headers: &H,
        refusal: Refusal,
        key_id: Option<String>,
        traffic: Traffic,
    ) -> Receipt {
        let outcome = Outcome::Refused(refusal);
        if traffic == Traffic::Test {
            return Receipt { outcome, endpoint: Some(ep.clone()), key_id };
        }
        let claimed = match &ep.hmac {
            Some(c) => crate::crypto::profile::claimed_message_id(c, headers),
            None => claimed_message_id(ep.scheme, headers),
        };
        if let Some(event_id) = claimed {
            self.log(ep, event_id, &outcome, key_id.as_deref(), None);
        }
        Receipt { outcome, endpoint: Some(ep.clone()), key_id }
    }

    /// Queues the delivery-log row for this answer (never for drill traffic,
    /// which no one can read a story of).
    fn log(&self, ep: &EndpointCtx, event_id: String, outcome: &Outcome, key_id: Option<&str>, digest: Option<String>) {
        if ep.synthetic {
            return;
        }
        self.claims.log(delivery_log::ActiveModel {
            id: Set(crate::ids::new_id()),
            tenant_id: Set(ep.tenant_id.clone()),
            endpoint_id: Set(ep.endpoint_id.clone()),
            event_id: Set(event_id),
            answered_at: Set(clock::now_ms()),
            status: Set(i32::from(outcome.status())),
            answer: Set(outcome.answer().to_owned()),
            key_id: Set(key_id.map(str::to_owned)),
            scheme: Set(ep.scheme.as_str().to_owned()),
            message_digest: Set(digest),
        });
    }

    /// Waits until every answer so far is in the delivery log (tests).
    pub async fn flush_delivery_log(&self) {
        self.claims.flush_log().await;
    }

    /// Delivery-log rows written and dropped so far.
    pub fn delivery_log_stats(&self) -> &DeliveryLogStats {
        self.claims.log_stats()
    }

    /// The fault points this receiver was built with.
    pub fn faults(&self) -> &Faults {
        self.claims.faults()
    }

    /// Claim batches committed so far and the events they carried.
    pub fn batch_stats(&self) -> &BatchStats {
        self.claims.batch_stats()
    }

    /// Test deliveries so far, by outcome (never in the real traffic's
    /// figures).
    pub fn test_deliveries(&self) -> &TestDeliveries {
        &self.tests
    }

    /// Claim attempts repeated so far (transient failures, lost connections).
    pub fn claim_retries(&self) -> u64 {
        self.claims.retries()
    }

    /// Claim transactions rolled back so far, by reason.
    pub fn claim_rollbacks(&self) -> &Rollbacks {
        self.claims.rollbacks()
    }
}

/// Test deliveries by outcome label (`Outcome::labels`), for
/// `signet_test_deliveries_total`: apart from real traffic, which they never
/// move (no delivery log, rollups, key counts or webhook metrics).
#[derive(Debug, Default)]
pub struct TestDeliveries {
    by_outcome: std::sync::Mutex<std::collections::BTreeMap<&'static str, u64>>,
}

impl TestDeliveries {
    fn count(&self, outcome: &Outcome) {
        let mut map = self.by_outcome.lock().unwrap_or_else(|p| p.into_inner());
        *map.entry(outcome.labels().0).or_default() += 1;
    }

    /// Every outcome seen so far with its total.
    pub fn totals(&self) -> Vec<(&'static str, u64)> {
        self.by_outcome.lock().unwrap_or_else(|p| p.into_inner()).iter().map(|(k, v)| (*k, *v)).collect()
    }
}
