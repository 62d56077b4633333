//! Drills: the design's test matrix
//! (docs/architecture.md#rollout-order-and-sign-off), run against the live
//! database through the receiver code that serves `/hooks`
//! (docs/contract.md §5).
//!
//! Each drill sends real signed deliveries for a reserved synthetic tenant
//! (`_drill`, which no slug can name) and then reads the database (the claim
//! row, the reminder row, the outbox rows): counting answers alone would miss
//! a partial commit. What it observed is stored next to what it expected.
//!
//! How deliveries travel is the caller's [`Transport`]: HTTP to the running
//! server (console, API), or to an in-process receiver (CLI); a drill that
//! must kill a process mid-transaction asks the transport to do it in a
//! child process. Ids are opaque and random; no body carries patient data.

use std::{future::Future, pin::Pin, time::Instant};

use sea_orm::{ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, PaginatorTrait, QueryFilter};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::{
    clock,
    crypto::{SigningSecret, sha256_hex, signature},
    entity::{event_body, inbox_claim, outbox_intent, quarantine_entry, reminder, tenant},
    error::DomainResult,
    receiver::faults::{DrillFault, DrillFaults},
};
use views::{evidence::DrillResult, scheme::Scheme};

use super::drill_fixture::{DRILL_ENDPOINT, DRILL_PREFIX, DRILL_TENANT};
pub use super::drill_fixture::{Fixture, SchemeTarget, clear, fixture};

/// Concurrent deliveries in `concurrent_duplicates`.
const CONCURRENT: usize = 32;

/// One signed delivery to `/hooks/{tenant}/{endpoint}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DrillRequest {
    pub tenant: String,
    pub endpoint: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// The receiver's answer.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub body: Value,
}

impl Answer {
    /// `status` of a 2xx body, else `error`: `applied`, `duplicate`,
    /// `replay`, `unknown_endpoint`, …
    pub fn code(&self) -> String {
        self.body.get("status").or_else(|| self.body.get("error")).and_then(Value::as_str).unwrap_or("none").to_owned()
    }
}

/// Why a drill delivery got no answer. Only `what` is recorded with the run
/// (shown in the console and the API, and signed into evidence), and it is
/// a fixed text; `detail` may name internal addresses, paths or OS errors
/// and goes to the server log alone.
#[derive(Debug)]
pub struct TransportError {
    pub what: &'static str,
    pub detail: String,
}

impl TransportError {
    pub fn new(what: &'static str, detail: impl std::fmt::Display) -> TransportError {
        TransportError { what, detail: detail.to_string() }
    }
}

impl std::fmt::Display for TransportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.what)
    }
}

/// A boxed future the transport awaits before dropping a connection.
pub type Until<'a> = Pin<Box<dyn Future<Output = bool> + Send + 'a>>;

/// How drill deliveries reach a receiver.
pub trait Transport: Sync {
    /// Posts and returns the answer.
    fn deliver(&self, req: &DrillRequest) -> impl Future<Output = Result<Answer, TransportError>> + Send;
    /// Posts, waits for `committed`, then drops the connection without
    /// reading the answer. Returns what `committed` said.
    fn deliver_then_drop<'a>(
        &'a self,
        req: &'a DrillRequest,
        committed: Until<'a>,
    ) -> impl Future<Output = Result<bool, TransportError>> + Send + 'a;
    /// Delivers in another process whose receiver holds the claim
    /// transaction open before COMMIT (after the effect), and kills that
    /// process there with SIGKILL. Returns a description of what was killed.
    fn deliver_in_killed_process(
        &self,
        req: &DrillRequest,
    ) -> impl Future<Output = Result<String, TransportError>> + Send;
    /// The drill faults of the receiver that `deliver` reaches.
    fn faults(&self) -> &DrillFaults;
}

/// Expected next to observed, check by check.
#[derive(Default)]
pub(super) struct Checks {
    expected: Map<String, Value>,
    observed: Map<String, Value>,
    errors: Vec<String>,
}

impl Checks {
    pub(super) fn want(&mut self, check: &str, expected: impl Into<Value>, observed: impl Into<Value>) {
        self.expected.insert(check.to_owned(), expected.into());
        self.observed.insert(check.to_owned(), observed.into());
    }

    /// An answer's code, or the transport's error as the observation.
    pub(super) fn answer(&mut self, check: &str, expected: &str, got: &Result<Answer, TransportError>) {
        match got {
            Ok(a) => self.want(check, expected, a.code()),
            Err(e) => {
                self.want(check, expected, "no answer");
                self.failed(check, e);
            }
        }
    }

    /// Records a transport failure: its fixed text with the run, its detail
    /// in the log only.
    pub(super) fn failed(&mut self, check: &str, e: &TransportError) {
        tracing::warn!(check, detail = %e.detail, "drill delivery failed: {}", e.what);
        self.errors.push(format!("{check}: {}", e.what));
    }

    /// Records a failure that no check names.
    pub(super) fn error(&mut self, message: String) {
        self.errors.push(message);
    }

    pub(super) fn done(self, name: &str, started: Instant) -> DrillResult {
        let mut failures: Vec<String> = self
            .expected
            .iter()
            .filter(|(k, v)| self.observed.get(*k) != Some(*v))
            .map(|(k, v)| format!("{k}: expected {v}, observed {}", self.observed.get(k).unwrap_or(&Value::Null)))
            .collect();
        failures.extend(self.errors);
        DrillResult {
            name: name.to_owned(),
            passed: failures.is_empty(),
            observed: self.observed,
            expected: self.expected,
            failures,
            duration_ms: started.elapsed().as_millis() as i64,
        }
    }
}

pub(super) fn short_id(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4().simple())
}

/// A future time, whole seconds, as the envelope carries it.
pub(super) fn send_at(days: i64) -> (String, i64) {
    let ms = (clock::now_ms() / 1000 + days * 86_400) * 1000;
    (clock::rfc3339(ms), ms)
}

pub(super) fn created(reminder_id: &str, at: &str) -> Value {
    json!({"type": "reminder.created", "data": {"reminder_id": reminder_id, "send_at": at}})
}

fn scheduled(reminder_id: &str, at: &str) -> Value {
    json!({"type": "reminder.scheduled", "data": {"reminder_id": reminder_id, "send_at": at}})
}

impl Fixture {
    /// A delivery of `envelope` as event `event_id`, signed `age_secs` ago
    /// (distinct ages make distinct signed messages of the same event).
    fn request(&self, event_id: &str, envelope: &Value, age_secs: i64) -> DrillRequest {
        self.request_to(DRILL_TENANT, event_id, envelope, age_secs, &self.secret)
    }

    fn request_to(
        &self,
        tenant: &str,
        event_id: &str,
        envelope: &Value,
        age_secs: i64,
        secret: &SigningSecret,
    ) -> DrillRequest {
        self.signed_at(tenant, event_id, envelope, clock::now_ms() / 1000 - age_secs, secret)
    }

    /// Signed at exactly `ts` (Unix seconds): deliveries that must differ
    /// take their timestamps from one reading of the clock, or two made
    /// across a second boundary could come out identical (a true replay).
    fn signed_at(
        &self,
        tenant: &str,
        event_id: &str,
        envelope: &Value,
        ts: i64,
        secret: &SigningSecret,
    ) -> DrillRequest {
        let body = envelope.to_string().into_bytes();
        let headers = signature::sign(Scheme::StandardWebhooks, secret, &body, ts, event_id).unwrap_or_default();
        DrillRequest { tenant: tenant.to_owned(), endpoint: DRILL_ENDPOINT.to_owned(), headers, body }
    }

    fn notice_key(&self, event_id: &str) -> String {
        format!("reminder_notice:{}:{event_id}", self.endpoint_id)
    }
}

/// What the database holds for one drill event.
struct Observed {
    claims: u64,
    digest: Option<String>,
    outcome: Option<String>,
    intents: u64,
    /// The reminder's `send_at`, if the reminder exists.
    send_at: Option<i64>,
}

async fn observe(db: &DatabaseConnection, fx: &Fixture, event_id: &str, reminder_id: &str) -> DomainResult<Observed> {
    let claim = inbox_claim::Entity::find()
        .filter(inbox_claim::Column::TenantId.eq(&fx.tenant_id))
        .filter(inbox_claim::Column::EndpointId.eq(&fx.endpoint_id))
        .filter(inbox_claim::Column::EventId.eq(event_id))
        .all(db)
        .await?;
    let intents = outbox_intent::Entity::find()
        .filter(outbox_intent::Column::TenantId.eq(&fx.tenant_id))
        .filter(outbox_intent::Column::IdempotencyKey.eq(fx.notice_key(event_id)))
        .count(db)
        .await?;
    let r = reminder::Entity::find_by_id((fx.tenant_id.clone(), reminder_id.to_owned())).one(db).await?;
    Ok(Observed {
        claims: claim.len() as u64,
        digest: claim.first().map(|c| c.body_digest.clone()),
        outcome: claim.first().map(|c| c.outcome.as_str().to_owned()),
        intents,
        send_at: r.map(|r| r.send_at),
    })
}

/// Rows anywhere (every tenant) that a delivery of `event_id` about
/// `reminder_id` could have left: claims, quarantine entries, outbox
/// intents keyed by the event, reminders.
pub(super) async fn rows_anywhere(db: &DatabaseConnection, event_id: &str, reminder_id: &str) -> DomainResult<u64> {
    let claims = inbox_claim::Entity::find().filter(inbox_claim::Column::EventId.eq(event_id)).count(db).await?;
    let bodies = event_body::Entity::find().filter(event_body::Column::EventId.eq(event_id)).count(db).await?;
    let quarantined =
        quarantine_entry::Entity::find().filter(quarantine_entry::Column::EventId.eq(event_id)).count(db).await?;
    let intents = outbox_intent::Entity::find()
        .filter(outbox_intent::Column::IdempotencyKey.ends_with(format!(":{event_id}")))
        .count(db)
        .await?;
    let reminders = reminder::Entity::find().filter(reminder::Column::ReminderId.eq(reminder_id)).count(db).await?;
    Ok(claims + bodies + quarantined + intents + reminders)
}

/// Creates a reminder through the receiver, as setup for a drill.
/// Creates the drill's reminder, signed two minutes ago: the drill's later
/// events (signed up to a minute ago) are then newer than its state, as a
/// provider's would be (older ones apply nothing: `receiver::effects`).
async fn setup_reminder<T: Transport>(t: &T, fx: &Fixture, c: &mut Checks, reminder_id: &str, at: &str) {
    let answer = t.deliver(&fx.request(&short_id("drill-setup"), &created(reminder_id, at), 120)).await;
    c.answer("setup.answer", "applied", &answer);
}

/// Runs the drill `name` of this module (every drill but
/// `scheme_verification`) into `c`; a name it does not know is a failure.
pub(super) async fn run_named<T: Transport>(
    db: &DatabaseConnection,
    fx: &Fixture,
    t: &T,
    name: &str,
    c: &mut Checks,
) -> DomainResult<()> {
    match name {
        "concurrent_duplicates" => concurrent_duplicates(db, fx, t, c).await,
        "interrupted_before_commit" => interrupted_before_commit(db, fx, t, c).await,
        "lost_ack" => lost_ack(db, fx, t, c).await,
        "unknown_tenant" => unknown_tenant(db, fx, t, c).await,
        "invalid_signature" => invalid_signature(db, fx, t, c).await,
        "replay" => replay(db, fx, t, c).await,
        "identity_conflict" => identity_conflict(db, fx, t, c).await,
        other => {
            c.error(format!("no drill named {other}"));
            Ok(())
        }
    }
}

/// 32 concurrent deliveries of one event, each signed at its own moment
/// (re-signed, as a provider's retries are): one claim, one reminder
/// transition, one outbox intent, every other delivery a duplicate.
async fn concurrent_duplicates<T: Transport>(
    db: &DatabaseConnection,
    fx: &Fixture,
    t: &T,
    c: &mut Checks,
) -> DomainResult<()> {
    let r = short_id("drill-r");
    let ((first, _), (second, second_ms)) = (send_at(1), send_at(2));
    setup_reminder(t, fx, c, &r, &first).await;
    let event = short_id("drill-evt");
    let now = clock::now_ms() / 1000;
    let reqs: Vec<DrillRequest> = (0..CONCURRENT as i64)
        .map(|i| fx.signed_at(DRILL_TENANT, &event, &scheduled(&r, &second), now - i, &fx.secret))
        .collect();
    let answers = futures_util::future::join_all(reqs.iter().map(|q| t.deliver(q))).await;
    let count = |code: &str| answers.iter().filter(|a| a.as_ref().is_ok_and(|a| a.code() == code)).count() as u64;
    let (applied, duplicate) = (count("applied"), count("duplicate"));
    c.want("answers.applied", 1, applied);
    c.want("answers.duplicate", (CONCURRENT - 1) as u64, duplicate);
    c.want("answers.other", 0, CONCURRENT as u64 - applied - duplicate);
    // Name the stray answers, so a failed run says what went wrong.
    let strays: Vec<String> = answers
        .iter()
        .filter_map(|a| match a {
            Ok(a) if a.code() == "applied" || a.code() == "duplicate" => None,
            Ok(a) => Some(format!("{} {}", a.status, a.body)),
            Err(e) => {
                tracing::warn!(detail = %e.detail, "drill delivery failed: {}", e.what);
                Some(format!("no answer: {}", e.what))
            }
        })
        .collect();
    if !strays.is_empty() {
        c.errors.push(format!("other answers: {}", strays.join("; ")));
    }
    let o = observe(db, fx, &event, &r).await?;
    c.want("claims", 1, o.claims);
    c.want("claim.outcome", "applied", o.outcome);
    c.want("reminder.transitioned", true, o.send_at == Some(second_ms));
    c.want("outbox_intents", 1, o.intents);
    Ok(())
}

/// A child process applies the effect and is killed before COMMIT; the
/// database must hold nothing of it. The provider's retry then applies once.
async fn interrupted_before_commit<T: Transport>(
    db: &DatabaseConnection,
    fx: &Fixture,
    t: &T,
    c: &mut Checks,
) -> DomainResult<()> {
    let r = short_id("drill-r");
    let ((first, first_ms), (second, second_ms)) = (send_at(1), send_at(2));
    setup_reminder(t, fx, c, &r, &first).await;
    let event = short_id("drill-evt");
    let envelope = scheduled(&r, &second);
    match t.deliver_in_killed_process(&fx.request(&event, &envelope, 1)).await {
        Ok(killed) => c.want("killed_before_commit", true, !killed.is_empty()),
        Err(e) => {
            c.want("killed_before_commit", true, false);
            c.failed("killed_before_commit", &e);
        }
    }
    let o = observe(db, fx, &event, &r).await?;
    c.want("after_kill.claims", 0, o.claims);
    c.want("after_kill.outbox_intents", 0, o.intents);
    c.want("after_kill.reminder_unchanged", true, o.send_at == Some(first_ms));
    let retry = t.deliver(&fx.request(&event, &envelope, 0)).await;
    c.answer("retry.answer", "applied", &retry);
    let o = observe(db, fx, &event, &r).await?;
    c.want("claims", 1, o.claims);
    c.want("reminder.transitioned", true, o.send_at == Some(second_ms));
    c.want("outbox_intents", 1, o.intents);
    Ok(())
}

/// The commit succeeds but the connection drops before the answer; the
/// provider's retry must be a duplicate and nothing repeats.
async fn lost_ack<T: Transport>(db: &DatabaseConnection, fx: &Fixture, t: &T, c: &mut Checks) -> DomainResult<()> {
    let r = short_id("drill-r");
    let ((first, _), (second, second_ms)) = (send_at(1), send_at(2));
    setup_reminder(t, fx, c, &r, &first).await;
    let event = short_id("drill-evt");
    let envelope = scheduled(&r, &second);
    t.faults().arm(DrillFault::StallAfterCommit(std::time::Duration::from_secs(3)));
    let committed: Until<'_> = Box::pin(async {
        let deadline = Instant::now() + std::time::Duration::from_secs(10);
        while Instant::now() < deadline {
            if observe(db, fx, &event, &r).await.is_ok_and(|o| o.claims == 1) {
                return true;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        false
    });
    let first_req = fx.request(&event, &envelope, 1);
    match t.deliver_then_drop(&first_req, committed).await {
        Ok(seen) => c.want("connection_dropped_after_commit", true, seen),
        Err(e) => {
            c.want("connection_dropped_after_commit", true, false);
            c.failed("connection_dropped_after_commit", &e);
        }
    }
    let retry = t.deliver(&fx.request(&event, &envelope, 0)).await;
    c.answer("retry.answer", "duplicate", &retry);
    c.want(
        "retry.original",
        "applied",
        retry.as_ref().ok().and_then(|a| a.body.get("original").cloned()).unwrap_or(Value::Null),
    );
    let o = observe(db, fx, &event, &r).await?;
    c.want("claims", 1, o.claims);
    c.want("reminder.transitioned", true, o.send_at == Some(second_ms));
    c.want("outbox_intents", 1, o.intents);
    Ok(())
}

/// A correctly signed delivery to a tenant that does not exist: 404 and no
/// row anywhere.
async fn unknown_tenant<T: Transport>(
    db: &DatabaseConnection,
    fx: &Fixture,
    t: &T,
    c: &mut Checks,
) -> DomainResult<()> {
    let (r, event) = (short_id("drill-r"), short_id("drill-evt"));
    let missing = format!("{DRILL_PREFIX}-missing-{}", uuid::Uuid::new_v4().simple());
    let answer = t.deliver(&fx.request_to(&missing, &event, &created(&r, &send_at(1).0), 0, &fx.secret)).await;
    c.want("http_status", 404, answer.as_ref().map(|a| a.status).unwrap_or(0));
    c.answer("answer", "unknown_endpoint", &answer);
    c.want("rows_anywhere", 0, rows_anywhere(db, &event, &r).await?);
    Ok(())
}

/// A delivery signed with a key the endpoint never issued: 401, no rows.
async fn invalid_signature<T: Transport>(
    db: &DatabaseConnection,
    fx: &Fixture,
    t: &T,
    c: &mut Checks,
) -> DomainResult<()> {
    let (r, event) = (short_id("drill-r"), short_id("drill-evt"));
    let wrong = SigningSecret::generate();
    let answer = t.deliver(&fx.request_to(DRILL_TENANT, &event, &created(&r, &send_at(1).0), 0, &wrong)).await;
    c.want("http_status", 401, answer.as_ref().map(|a| a.status).unwrap_or(0));
    c.answer("answer", "signature_mismatch", &answer);
    c.want("rows_anywhere", 0, rows_anywhere(db, &event, &r).await?);
    Ok(())
}

/// The same signed message twice: the second is a replay (409) and there is
/// still one claim.
async fn replay<T: Transport>(db: &DatabaseConnection, fx: &Fixture, t: &T, c: &mut Checks) -> DomainResult<()> {
    let (r, event) = (short_id("drill-r"), short_id("drill-evt"));
    let req = fx.request(&event, &created(&r, &send_at(1).0), 0);
    let first = t.deliver(&req).await;
    c.answer("first.answer", "applied", &first);
    let again = t.deliver(&req).await;
    c.want("http_status", 409, again.as_ref().map(|a| a.status).unwrap_or(0));
    c.answer("answer", "replay", &again);
    c.want("claims", 1, observe(db, fx, &event, &r).await?.claims);
    Ok(())
}

/// The same event id with another body: 409 and the stored digest is
/// unchanged.
async fn identity_conflict<T: Transport>(
    db: &DatabaseConnection,
    fx: &Fixture,
    t: &T,
    c: &mut Checks,
) -> DomainResult<()> {
    let (r, other, event) = (short_id("drill-r"), short_id("drill-r"), short_id("drill-evt"));
    let original = fx.request(&event, &created(&r, &send_at(1).0), 1);
    let first = t.deliver(&original).await;
    c.answer("first.answer", "applied", &first);
    let conflicting = t.deliver(&fx.request(&event, &created(&other, &send_at(1).0), 0)).await;
    c.want("http_status", 409, conflicting.as_ref().map(|a| a.status).unwrap_or(0));
    c.answer("answer", "identity_conflict", &conflicting);
    let o = observe(db, fx, &event, &r).await?;
    c.want("claims", 1, o.claims);
    c.want("stored_digest_unchanged", true, o.digest.as_deref() == Some(sha256_hex(&original.body).as_str()));
    let other_created = reminder::Entity::find_by_id((fx.tenant_id.clone(), other)).one(db).await?.is_some();
    c.want("conflicting_effect_applied", false, other_created);
    Ok(())
}

/// The drill tenant's id, if the fixture exists (to keep it out of
/// listings and figures).
pub async fn drill_tenant_id<C: ConnectionTrait>(conn: &C) -> DomainResult<Option<String>> {
    Ok(tenant::Entity::find().filter(tenant::Column::Synthetic.eq(true)).one(conn).await?.map(|t| t.id))
}

/// Builds the envelope and signing for the unit tests.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_report_each_failed_expectation() {
        let mut c = Checks::default();
        c.want("claims", 1, 1u64);
        c.want("outbox_intents", 1, 2u64);
        let r = c.done("x", Instant::now());
        assert!(!r.passed);
        assert_eq!(r.failures, vec!["outbox_intents: expected 1, observed 2".to_owned()]);
        assert_eq!(r.expected["claims"], json!(1));
    }

    #[test]
    fn transport_failures_are_recorded_without_their_detail() {
        let mut c = Checks::default();
        let refused = TransportError::new(
            "the receiver refused the connection",
            "error sending request for url (http://10.0.0.7:3000/hooks/_drill/drill): \
             Connection refused (os error 111)",
        );
        c.answer("answer", "applied", &Err(refused));
        let r = c.done("x", Instant::now());
        assert_eq!(
            r.failures,
            ["answer: expected \"applied\", observed \"no answer\"", "answer: the receiver refused the connection"]
        );
    }

    #[test]
    fn drill_slugs_can_never_be_real_tenants() {
        assert!(views::ids::TenantSlug::parse(DRILL_TENANT).is_err());
        assert!(views::ids::TenantSlug::parse(format!("{DRILL_PREFIX}-missing-x")).is_err());
    }
}
