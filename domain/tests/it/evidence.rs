//! Drills and sign-off evidence against real databases: the drills pass on a
//! sound schema and fail (with the constraint shown missing) when the claim's
//! uniqueness is dropped; the drill tenant stays out of real tenants'
//! listings and rows; bundles verify and every tampering is caught;
//! sign-offs name exported digests only.

mod bundles;
mod drill_runs;

use std::sync::Arc;

use domain::{
    DomainError,
    entity::{inbox_claim, outbox_intent, reminder},
    evidence::{
        drills::{Answer, DrillRequest, Transport, TransportError, Until},
        runs,
    },
    receiver::{
        self, Receiver,
        faults::{DrillFault, DrillFaults, Faults},
    },
    registry::{keys, tenants},
};
use sea_orm::{ConnectionTrait, EntityTrait, PaginatorTrait};
use views::{evidence::DRILL_NAMES, roles::Role};

use crate::{
    db_test,
    fixtures::*,
    receiver::{created, deliver, now_s, setup, signed},
    support::TestDb,
};

/// Deliveries straight into an in-process receiver (the server tests drive
/// the real binary over HTTP and kill a real child process).
pub(crate) struct InProcess {
    db: sea_orm::DatabaseConnection,
    vault: Arc<domain::vault::Vault>,
    r: Arc<Receiver>,
}

impl InProcess {
    pub(crate) fn new(t: &TestDb) -> InProcess {
        InProcess {
            db: t.db.clone(),
            vault: t.vault.clone(),
            r: Arc::new(Receiver::new(t.db.clone(), t.vault.clone(), Faults::default())),
        }
    }
}

async fn run_in(r: &Arc<Receiver>, req: DrillRequest) -> Answer {
    let h: Vec<(&str, &str)> = req.headers.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let delivery = receiver::Buffered { headers: &h[..], body: bytes::Bytes::from(req.body.clone()) };
    // As the server's `/hooks` route: a path that names no endpoint is
    // answered without the receiver (the unknown-tenant drill's).
    let receipt = match receiver::address(&req.tenant, &req.endpoint) {
        Some((tenant, endpoint)) => receiver::receive(r, &tenant, &endpoint, delivery).await,
        None => receiver::Receipt::unknown_endpoint(),
    };
    let outcome = receipt.outcome;
    Answer { status: outcome.status(), body: outcome.body() }
}

impl Transport for InProcess {
    async fn deliver(&self, req: &DrillRequest) -> Result<Answer, TransportError> {
        Ok(run_in(&self.r, req.clone()).await)
    }

    async fn deliver_then_drop<'a>(
        &'a self,
        req: &'a DrillRequest,
        committed: Until<'a>,
    ) -> Result<bool, TransportError> {
        let (r, req) = (self.r.clone(), req.clone());
        let task = tokio::spawn(async move { run_in(&r, req).await });
        let seen = committed.await;
        // The handler is dropped mid-answer, as a closed connection drops it.
        task.abort();
        Ok(seen)
    }

    async fn deliver_in_killed_process(&self, req: &DrillRequest) -> Result<String, TransportError> {
        // In-process stand-in for the child: a receiver whose fault holds the
        // transaction open; aborting the task drops it uncommitted.
        let faults = Faults::default();
        let reached = Arc::new(tokio::sync::Notify::new());
        faults.drill.arm(DrillFault::HoldBeforeCommit { reached: reached.clone() });
        let r = Arc::new(Receiver::new(self.db.clone(), self.vault.clone(), faults));
        let req = req.clone();
        let task = tokio::spawn(async move { run_in(&r, req).await });
        tokio::time::timeout(std::time::Duration::from_secs(20), reached.notified())
            .await
            .map_err(|e| TransportError::new("the transaction was never held", e))?;
        task.abort();
        let _ = task.await;
        Ok("task aborted while holding the transaction".into())
    }

    fn faults(&self) -> &DrillFaults {
        &self.r.faults().drill
    }
}

/// A transport whose every delivery fails the way a refused connection does,
/// with the detail a real HTTP client gives (an internal URL, an OS error).
pub(crate) struct Unreachable(pub(crate) DrillFaults);

const UNREACHABLE_DETAIL: &str = "error sending request for url (http://10.9.8.7:3000/hooks/_drill/drill): \
     client error (Connect): tcp connect error: Connection refused (os error 111)";

impl Transport for Unreachable {
    async fn deliver(&self, _: &DrillRequest) -> Result<Answer, TransportError> {
        Err(TransportError::new("the receiver refused the connection", UNREACHABLE_DETAIL))
    }
    async fn deliver_then_drop<'a>(&'a self, _: &'a DrillRequest, _: Until<'a>) -> Result<bool, TransportError> {
        Err(TransportError::new("the receiver refused the connection", UNREACHABLE_DETAIL))
    }
    async fn deliver_in_killed_process(&self, _: &DrillRequest) -> Result<String, TransportError> {
        Err(TransportError::new("the drill child could not be started", "No such file or directory (os error 2)"))
    }
    fn faults(&self) -> &DrillFaults {
        &self.0
    }
}

// What a failed run records (the console, the API, signed evidence) says
// what failed in fixed words; the internal URL and the OS error are in the
// server log only.
db_test!(drill_failures_never_record_internal_urls_or_os_errors, async |t: &TestDb| {
    let run = runs::run(&t.db, &t.vault, &reviewer(), &Unreachable(DrillFaults::default())).await.unwrap();
    assert_eq!(run.passed, Some(false));
    let stored = runs::get(&t.db, &reviewer(), &run.run_id).await.unwrap();
    let text = serde_json::to_string(&stored).unwrap();
    for leak in ["10.9.8.7", "http://", "os error", "Connection refused", "/hooks/"] {
        assert!(!text.contains(leak), "{leak} in {text}");
    }
    let failures: Vec<String> = stored.drills.iter().flat_map(|d| d.failures.clone()).collect();
    assert!(failures.iter().any(|f| f.ends_with(": the receiver refused the connection")), "{failures:?}");
    assert!(failures.iter().any(|f| f.ends_with(": the drill child could not be started")), "{failures:?}");
    assert!(stored.schemes.is_empty(), "a run whose deliveries failed verified no scheme");
});

db_test!(every_drill_passes_and_the_run_is_stored_and_audited, async |t: &TestDb| {
    let transport = InProcess::new(t);
    let run = runs::run(&t.db, &t.vault, &reviewer(), &transport).await.unwrap();
    for d in &run.drills {
        assert!(d.passed, "{}: {:?}", d.name, d.failures);
        assert_eq!(d.expected.keys().collect::<Vec<_>>(), d.observed.keys().collect::<Vec<_>>());
    }
    assert_eq!(run.drills.iter().map(|d| d.name.as_str()).collect::<Vec<_>>(), DRILL_NAMES);
    assert_eq!(run.passed, Some(true));
    assert_eq!(run.status, "finished");
    assert_eq!(run.actor.as_deref(), Some("reviewer-user"));
    // Each scheme's verification was drilled on its own endpoint, and the
    // run records the schemes it covered.
    assert_eq!(run.schemes, ["standard-webhooks", "stripe", "github", "hmac"]);
    let schemes = run.drills.iter().find(|d| d.name == "scheme_verification").unwrap();
    let profiles = ["hmac.dvir", "hmac.shopify", "hmac.slack", "hmac.custom"];
    for s in ["standard-webhooks", "stripe", "github"].into_iter().chain(profiles) {
        assert_eq!(schemes.observed[&format!("{s}.answer")], "applied");
        assert_eq!(schemes.observed[&format!("{s}.retry.answer")], "duplicate");
        assert_eq!(schemes.observed[&format!("{s}.claims")], 1);
        assert_eq!(schemes.observed[&format!("{s}.wrong_key.http_status")], 401);
    }
    // Each hmac endpoint signed as its profile says and met every gate: a
    // tampered body refused, the window where the profile signs a timestamp
    // (Shopify signs none), a replay and a duplicate.
    for p in profiles {
        assert_eq!(schemes.observed[&format!("{p}.tampered.answer")], "signature_mismatch", "{p}");
        assert_eq!(schemes.observed[&format!("{p}.refused.rows_anywhere")], 0, "{p}");
        assert_eq!(schemes.observed[&format!("{p}.replay.answer")], "replay", "{p}");
        let window = schemes.observed.get(&format!("{p}.outside_window.late.answer"));
        if p == "hmac.shopify" {
            assert_eq!(window, None);
        } else {
            assert_eq!(window.unwrap(), "timestamp_outside_window", "{p}");
            assert_eq!(schemes.observed[&format!("{p}.outside_window.early.answer")], "timestamp_outside_window");
        }
    }
    let stored = domain::entity::drill_run::Entity::find_by_id(run.run_id.clone()).one(&t.db).await.unwrap().unwrap();
    assert_eq!(stored.schemes.as_deref(), Some(r#"["standard-webhooks","stripe","github","hmac"]"#));
    let listed = runs::list(&t.db, &reviewer(), 5).await.unwrap();
    assert_eq!(listed[0].run_id, run.run_id);
    let actions: Vec<String> = domain::audit::list(&t.db, &admin(), &Default::default())
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.action)
        .collect();
    assert!(actions.contains(&"drill.start".to_owned()) && actions.contains(&"drill.finish".to_owned()), "{actions:?}");
    // A second run reuses the fixture and starts from an empty drill tenant.
    let again = runs::run(&t.db, &t.vault, &admin(), &transport).await.unwrap();
    assert_eq!(
        again.passed,
        Some(true),
        "{:?}",
        again.drills.iter().flat_map(|d| d.failures.clone()).collect::<Vec<_>>()
    );
});

db_test!(drills_leave_real_tenants_untouched_and_the_drill_tenant_hidden, async |t: &TestDb| {
    let s = setup(t, views::scheme::Scheme::StandardWebhooks, None).await;
    let body = created("r-real");
    assert!(matches!(
        deliver(&s, &signed(&s, views::scheme::Scheme::StandardWebhooks, &body, now_s(), "evt-real"), &body).await,
        domain::receiver::Outcome::Applied { .. }
    ));
    let count = |db: sea_orm::DatabaseConnection| async move {
        (
            inbox_claim::Entity::find().count(&db).await.unwrap(),
            reminder::Entity::find().count(&db).await.unwrap(),
            outbox_intent::Entity::find().count(&db).await.unwrap(),
        )
    };
    let before = count(t.db.clone()).await;
    let transport = InProcess::new(t);
    runs::run(&t.db, &t.vault, &admin(), &transport).await.unwrap();
    let drill = domain::evidence::drills::drill_tenant_id(&t.db).await.unwrap().unwrap();
    // Every new row belongs to the drill tenant.
    use sea_orm::{ColumnTrait, QueryFilter};
    let real_claims =
        inbox_claim::Entity::find().filter(inbox_claim::Column::TenantId.ne(&drill)).count(&t.db).await.unwrap();
    let real_reminders =
        reminder::Entity::find().filter(reminder::Column::TenantId.ne(&drill)).count(&t.db).await.unwrap();
    let real_intents =
        outbox_intent::Entity::find().filter(outbox_intent::Column::TenantId.ne(&drill)).count(&t.db).await.unwrap();
    assert_eq!((real_claims, real_reminders, real_intents), before);
    // Hidden from listings and lookups, and its intents are never sent.
    let listed: Vec<String> =
        tenants::list(&t.db, &admin()).await.unwrap().into_iter().map(|t| t.slug.into_string()).collect();
    assert_eq!(listed, ["clinic-a"]);
    assert!(matches!(
        tenants::get(&t.db, &admin(), &views::ids::TenantSlug::synthetic()).await,
        Err(DomainError::NotFound)
    ));
    let keys = keys::list(&t.db, &admin(), &Default::default()).await.unwrap();
    assert!(keys.iter().all(|k| k.tenant == "clinic-a"));
    let leased = domain::outbox::claim_batch(&t.db, &t.vault, 100, 60_000).await.unwrap();
    assert!(leased.iter().all(|d| d.tenant_slug == "clinic-a"), "drill intents must never be sent");
});

db_test!(one_run_at_a_time, async |t: &TestDb| {
    let first = runs::start(&t.db, &admin()).await.unwrap();
    let err = runs::start(&t.db, &reviewer()).await.unwrap_err();
    assert_eq!(err.code(), "drill_run_in_progress");
    assert!(matches!(runs::start(&t.db, &user(Role::Oncall, None)).await, Err(DomainError::Forbidden)));
    runs::execute(&t.db, &t.vault, &admin(), &first.run_id, &InProcess::new(t)).await.unwrap();
    runs::start(&t.db, &reviewer()).await.unwrap();
});

/// The claim's uniqueness is what every exactly-once guarantee rests on:
/// without it the drills fail and the evidence says it is missing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_the_claim_constraint_drills_fail_and_evidence_shows_it_missing() {
    let Some(t) = TestDb::postgres().await else { return };
    let sound = export::export(&t.db, &t.vault, &admin(), None, Via::Cli).await.unwrap().bundle;
    assert!(sound.evidence.constraints.iter().all(|c| c.present), "{:?}", sound.evidence.constraints);
    t.db.execute_unprepared("ALTER TABLE inbox_claims DROP CONSTRAINT inbox_claims_pkey").await.unwrap();
    let run = runs::run(&t.db, &t.vault, &admin(), &InProcess::new(&t)).await.unwrap();
    assert_eq!(run.passed, Some(false));
    let failed: Vec<&str> = run.drills.iter().filter(|d| !d.passed).map(|d| d.name.as_str()).collect();
    assert!(failed.contains(&"concurrent_duplicates"), "{failed:?}");
    let b = export::export(&t.db, &t.vault, &admin(), None, Via::Cli).await.unwrap().bundle;
    let claim = b.evidence.constraints.iter().find(|c| c.id == "claim_unique").unwrap();
    assert!(!claim.present);
    let codes: Vec<(&str, &str)> = b.evidence.findings.iter().map(|f| (f.id.as_str(), f.subject.as_str())).collect();
    assert!(codes.contains(&("constraint_missing", "claim_unique")), "{codes:?}");
    assert!(codes.iter().any(|(c, _)| *c == "drill_failed"), "{codes:?}");
    t.close().await;
}

/// Marks a started run finished without executing it (the limit counts
/// starts, not how runs ended).
async fn finish_now(t: &TestDb, run_id: &str) {
    use domain::entity::drill_run;
    use sea_orm::{ColumnTrait, QueryFilter};
    drill_run::Entity::update_many()
        .col_expr(drill_run::Column::Status, sea_orm::sea_query::Expr::value("finished"))
        .filter(drill_run::Column::Id.eq(run_id))
        .exec(&t.db)
        .await
        .unwrap();
}
