//! Drills and sign-off evidence against real databases: the drills pass on a
//! sound schema and fail (with the constraint shown missing) when the claim's
//! uniqueness is dropped; the drill tenant stays out of real tenants'
//! listings and rows; bundles verify and every tampering is caught;
//! sign-offs name exported digests only.

use std::{collections::BTreeMap, sync::Arc};

use domain::{
    DomainError,
    auth::Role,
    entity::{inbox_claim, outbox_intent, reminder},
    evidence::{
        drills::{Answer, DRILL_NAMES, DRILL_TENANT, DrillRequest, Transport, TransportError, Until},
        manifest::{self, MANIFEST_JSON, MANIFEST_SIG},
        runs,
        signoff::{self, NewSignoff},
    },
    receiver::{
        self, Receiver,
        faults::{DrillFault, DrillFaults, Faults},
    },
    registry::{keys, tenants},
};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, PaginatorTrait, QueryFilter};

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
    let outcome = receiver::receive(r, &req.tenant, &req.endpoint, delivery).await.outcome;
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
    let s = setup(t, domain::registry::Scheme::StandardWebhooks, None).await;
    let body = created("r-real");
    assert!(matches!(
        deliver(&s, &signed(&s, domain::registry::Scheme::StandardWebhooks, &body, now_s(), "evt-real"), &body).await,
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
    let listed: Vec<String> = tenants::list(&t.db, &admin()).await.unwrap().into_iter().map(|t| t.slug).collect();
    assert_eq!(listed, ["clinic-a"]);
    assert!(matches!(tenants::get(&t.db, &admin(), DRILL_TENANT).await, Err(DomainError::NotFound)));
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

db_test!(every_expected_constraint_is_in_the_live_catalog, async |t: &TestDb| {
    let rows = domain::evidence::catalog::constraints(&t.db).await.unwrap();
    assert_eq!(rows.len(), migrations::expected::EXPECTED.len());
    for r in rows {
        assert!(r.present, "{} on {} not found: {:?}", r.id, r.table, r);
    }
});

fn files(b: &export::Bundle) -> BTreeMap<String, Vec<u8>> {
    b.files().into_iter().map(|(n, bytes)| (n.to_owned(), bytes)).collect()
}

db_test!(bundles_verify_and_any_tampering_is_named, async |t: &TestDb| {
    active_key(t).await;
    let b = export::export(&t.db, &t.vault, &reviewer(), None, Via::Cli).await.unwrap().bundle;
    let key = b.manifest.public_key.clone();
    let good = files(&b);
    let ok = manifest::verify(&good, Some(&key));
    assert!(ok.ok, "{:?}", ok.problems);
    assert_eq!(ok.digest, b.digest);
    // Any byte of any file changed: every position of every file.
    for (name, bytes) in &good {
        for i in 0..bytes.len() {
            let mut bad = good.clone();
            bad.get_mut(name).unwrap()[i] ^= 0x01;
            let r = manifest::verify(&bad, Some(&key));
            assert!(!r.ok, "flipping byte {i} of {name} went unnoticed");
        }
    }
    for name in manifest::FILES {
        let mut missing = good.clone();
        missing.remove(name);
        let r = manifest::verify(&missing, Some(&key));
        assert!(r.problems.iter().any(|p| p.contains(name) && p.contains("missing")), "{name}: {:?}", r.problems);
    }
    let mut extra = good.clone();
    extra.insert("notes.txt".into(), b"x".to_vec());
    assert!(manifest::verify(&extra, Some(&key)).problems.iter().any(|p| p.contains("notes.txt")));
    // A signature from another bundle of the same key, or by another key.
    let other = export::export(&t.db, &t.vault, &reviewer(), None, Via::Cli).await.unwrap().bundle;
    let mut swapped = good.clone();
    swapped.insert(MANIFEST_SIG.into(), files(&other)[MANIFEST_SIG].clone());
    assert!(!manifest::verify(&swapped, Some(&key)).ok);
    let (stranger, _) = domain::crypto::service::EvidenceSigner::generate();
    let mut resigned = good.clone();
    resigned.insert(MANIFEST_SIG.into(), stranger.sign_base64(&good[MANIFEST_JSON]).into_bytes());
    assert!(!manifest::verify(&resigned, Some(&key)).ok, "a signature by another key must not verify");
    assert!(
        !manifest::verify(&good, Some(&stranger.public_key_base64())).ok,
        "another deployment's key must not verify it"
    );
    // The stored export gives back exactly the signed bytes.
    let stored = export::stored(&t.db, &t.vault, &reviewer(), &b.digest).await.unwrap();
    assert_eq!(files(&stored), good);
});

db_test!(signoffs_name_exported_digests_and_show_what_changed, async |t: &TestDb| {
    let k = active_key(t).await;
    let b = export::export(&t.db, &t.vault, &reviewer(), None, Via::Console).await.unwrap().bundle;
    let new = |digest: &str, decision: &str| NewSignoff {
        digest: digest.into(),
        decision: decision.into(),
        comment: "reviewed the bundle".into(),
        acknowledge: Vec::new(),
    };
    let never = "ab".repeat(32);
    assert_eq!(
        signoff::sign_off(&t.db, &t.vault, &reviewer(), &new(&never, "approved")).await.unwrap_err().code(),
        "unknown_digest"
    );
    assert!(matches!(
        signoff::sign_off(&t.db, &t.vault, &user(Role::Oncall, None), &new(&b.digest, "approved")).await,
        Err(DomainError::Forbidden)
    ));
    assert_eq!(
        signoff::sign_off(&t.db, &t.vault, &reviewer(), &new(&b.digest, "maybe")).await.unwrap_err().code(),
        "invalid_decision"
    );
    let empty = NewSignoff { comment: "  ".into(), ..new(&b.digest, "approved") };
    assert_eq!(signoff::sign_off(&t.db, &t.vault, &reviewer(), &empty).await.unwrap_err().code(), "comment_required");
    let s = signoff::sign_off(&t.db, &t.vault, &reviewer(), &new(&b.digest, "approved")).await.unwrap();
    assert_eq!((s.decision.as_str(), s.actor.as_str()), ("approved", "reviewer-user"));
    // Nothing changed yet; then the key is revoked.
    let same = signoff::since_last_approval(&t.db, &t.vault, &reviewer(), None, &b.evidence).await.unwrap();
    assert!(same.differences.is_empty(), "{:?}", same.differences);
    keys::revoke(&t.db, &admin(), &k.key.key_id, "rotated out").await.unwrap();
    let later = export::export(&t.db, &t.vault, &reviewer(), None, Via::Console).await.unwrap().bundle;
    let since = signoff::since_last_approval(&t.db, &t.vault, &reviewer(), None, &later.evidence).await.unwrap();
    assert_eq!(since.approval.unwrap().digest, b.digest);
    let d = since.differences.iter().find(|d| d.section == "credentials" && d.subject == k.key.key_id).unwrap();
    assert!(
        d.approved.as_deref().unwrap().contains("active") && d.now.as_deref().unwrap().contains("revoked"),
        "{d:?}"
    );
    let history = signoff::list(&t.db, &reviewer(), None, 10).await.unwrap();
    assert_eq!(history.len(), 1);
});

db_test!(a_clinic_admin_sees_only_its_own_tenants_evidence, async |t: &TestDb| {
    active_key(t).await;
    let b = tenant(t, "clinic-b").await;
    let a_id = tenants::get(&t.db, &admin(), "clinic-a").await.unwrap().id;
    let ca = user(Role::ClinicAdmin, Some(&a_id));
    let own = export::export(&t.db, &t.vault, &ca, None, Via::Api).await.unwrap().bundle;
    assert_eq!(own.evidence.tenant.as_deref(), Some("clinic-a"));
    assert!(own.evidence.credentials.iter().all(|c| c.tenant == "clinic-a"));
    assert!(own.evidence.retry_policy.iter().all(|p| p.tenant == "clinic-a"));
    assert!(matches!(
        export::export(&t.db, &t.vault, &ca, Some("clinic-b"), Via::Api).await,
        Err(DomainError::NotFound)
    ));
    let global = export::export(&t.db, &t.vault, &admin(), None, Via::Api).await.unwrap().bundle;
    assert!(matches!(export::stored(&t.db, &t.vault, &ca, &global.digest).await, Err(DomainError::NotFound)));
    // Clinic admins cannot sign off.
    let s = NewSignoff {
        digest: own.digest.clone(),
        decision: "approved".into(),
        comment: "ok".into(),
        acknowledge: Vec::new(),
    };
    assert!(matches!(signoff::sign_off(&t.db, &t.vault, &ca, &s).await, Err(DomainError::Forbidden)));
    let _ = b;
});

// Eight exports of one scope at once: each answers a bundle (an identical
// one is the stored one, never a unique-key failure), every stored bundle
// has exactly one audit entry, and equal digests are equal bytes.
db_test!(concurrent_exports_of_one_scope_all_answer, async |t: &TestDb| {
    active_key(t).await;
    let mut handles = Vec::new();
    for _ in 0..8 {
        let (db, vault) = (t.db.clone(), t.vault.clone());
        handles.push(tokio::spawn(async move { export::export(&db, &vault, &reviewer(), None, Via::Api).await }));
    }
    let mut done = Vec::new();
    for h in handles {
        done.push(h.await.unwrap().expect("every concurrent export answers"));
    }
    let created = done.iter().filter(|d| d.created).count();
    let digests: std::collections::BTreeSet<&str> = done.iter().map(|d| d.bundle.digest.as_str()).collect();
    assert_eq!(created, digests.len(), "each distinct bundle is created exactly once");
    assert_eq!(domain::entity::evidence_export::Entity::find().count(&t.db).await.unwrap() as usize, digests.len());
    let audited = domain::entity::audit_entry::Entity::find()
        .filter(domain::entity::audit_entry::Column::Action.eq("evidence.export"))
        .count(&t.db)
        .await
        .unwrap();
    assert_eq!(audited as usize, digests.len());
    for d in &done {
        let twin = done.iter().find(|o| o.bundle.digest == d.bundle.digest).unwrap();
        assert_eq!(files(&d.bundle), files(&twin.bundle));
    }
});

// A scope keeps its newest exports and every signed-off one; older
// unsigned ones expire (listed in the export's audit entry), and another
// scope's are untouched.
db_test!(unsigned_exports_beyond_the_newest_expire_and_signed_ones_stay, async |t: &TestDb| {
    let k = active_key(t).await;
    let a_id = tenants::get(&t.db, &admin(), "clinic-a").await.unwrap().id;
    let own = export::export(&t.db, &t.vault, &reviewer(), Some("clinic-a"), Via::Api).await.unwrap().bundle;
    let first = export::export(&t.db, &t.vault, &reviewer(), None, Via::Api).await.unwrap().bundle;
    // Signed while it is the newest (only the newest can be signed off).
    let approve = NewSignoff {
        digest: first.digest.clone(),
        decision: "approved".into(),
        comment: "fine".into(),
        acknowledge: Vec::new(),
    };
    signoff::sign_off(&t.db, &t.vault, &reviewer(), &approve).await.unwrap();
    let second = export::export(&t.db, &t.vault, &reviewer(), None, Via::Api).await.unwrap().bundle;
    let keep = export::KEEP_UNSIGNED as usize;
    let mut last = None;
    for _ in 0..keep {
        last = Some(export::export(&t.db, &t.vault, &reviewer(), None, Via::Api).await.unwrap().bundle);
    }
    let global = export::list(&t.db, &reviewer(), None, 200).await.unwrap();
    let digests: Vec<&str> = global.iter().map(|e| e.digest.as_str()).collect();
    assert_eq!(digests.len(), keep + 1, "the newest {keep} and the signed-off one: {digests:?}");
    assert!(digests.contains(&first.digest.as_str()), "a signed-off bundle never expires");
    assert!(!digests.contains(&second.digest.as_str()), "the unsigned one beyond the newest expired");
    assert!(matches!(export::stored(&t.db, &t.vault, &reviewer(), &second.digest).await, Err(DomainError::NotFound)));
    let tenant_scope = export::list(&t.db, &reviewer(), Some("clinic-a"), 200).await.unwrap();
    assert_eq!(tenant_scope.iter().map(|e| e.digest.as_str()).collect::<Vec<_>>(), [own.digest.as_str()]);
    let entry = domain::audit::list(&t.db, &admin(), &domain::audit::AuditFilter::default())
        .await
        .unwrap()
        .into_iter()
        .find(|e| {
            e.action == "evidence.export" && e.after.as_ref().is_some_and(|a| a["expired"] != serde_json::json!([]))
        })
        .expect("an export that expired others says which");
    assert_eq!(entry.after.unwrap()["expired"], serde_json::json!([second.digest]));
    let _ = (k, a_id, last);
});

// A stored bundle is checked against its digest and signature before it
// is shown: a row edited in the database is refused, loudly.
db_test!(stored_bundles_are_reverified_before_they_are_shown, async |t: &TestDb| {
    active_key(t).await;
    let b = export::export(&t.db, &t.vault, &reviewer(), None, Via::Api).await.unwrap().bundle;
    assert_eq!(files(&export::latest(&t.db, &t.vault, &reviewer(), None).await.unwrap()), files(&b));
    let edited = b.evidence_json.replace("\"chain_verified\": true", "\"chain_verified\": false");
    assert_ne!(edited, b.evidence_json);
    domain::entity::evidence_export::Entity::update_many()
        .col_expr(domain::entity::evidence_export::Column::EvidenceJson, sea_orm::sea_query::Expr::value(edited))
        .exec(&t.db)
        .await
        .unwrap();
    for shown in [
        export::stored(&t.db, &t.vault, &reviewer(), &b.digest).await,
        export::latest(&t.db, &t.vault, &reviewer(), None).await,
    ] {
        assert_eq!(shown.unwrap_err().code(), "bundle_tampered");
    }
});

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

db_test!(drill_runs_are_rate_limited_per_principal, async |t: &TestDb| {
    for _ in 0..runs::RUNS_PER_WINDOW {
        let run = runs::start(&t.db, &admin()).await.unwrap();
        finish_now(t, &run.run_id).await;
    }
    let refused = runs::start(&t.db, &admin()).await.unwrap_err();
    assert_eq!(refused.code(), "drill_rate_limited", "{refused:?}");
    let wait = refused.retry_after_secs().unwrap();
    assert!(wait > 0 && wait <= runs::WINDOW_MS / 1000, "{wait}");
    // Another principal is not held back by the admin's runs, nor is the CLI.
    let other = runs::start(&t.db, &reviewer()).await.unwrap();
    finish_now(t, &other.run_id).await;
    for _ in 0..=runs::RUNS_PER_WINDOW {
        let run = runs::start(&t.db, &domain::auth::Principal::cli()).await.unwrap();
        finish_now(t, &run.run_id).await;
    }
    // Once the admin's runs leave the window, it may start again.
    use domain::entity::drill_run;
    use sea_orm::{ColumnTrait, QueryFilter};
    drill_run::Entity::update_many()
        .col_expr(drill_run::Column::StartedAt, sea_orm::sea_query::Expr::value(0i64))
        .filter(drill_run::Column::Actor.eq("admin-user"))
        .exec(&t.db)
        .await
        .unwrap();
    runs::start(&t.db, &admin()).await.unwrap();
});

db_test!(a_clinic_admin_sees_only_its_own_tenants_runs, async |t: &TestDb| {
    active_key(t).await;
    let b = tenant(t, "clinic-b").await;
    let a_id = tenants::get(&t.db, &admin(), "clinic-a").await.unwrap().id;
    let ca = user(Role::ClinicAdmin, Some(&a_id));
    let cb = domain::auth::Principal {
        actor: domain::auth::Actor::User { id: "id-b".into(), username: "clinic-b-user".into() },
        role: Role::ClinicAdmin,
        tenant_id: Some(b.id.clone()),
    };
    let mut ids = Vec::new();
    for p in [&cb, &admin(), &ca] {
        let run = runs::start(&t.db, p).await.unwrap();
        finish_now(t, &run.run_id).await;
        ids.push(run.run_id);
    }
    let (by_b, by_admin, by_a) = (&ids[0], &ids[1], &ids[2]);
    let listed: Vec<String> = runs::list(&t.db, &ca, 10).await.unwrap().into_iter().map(|r| r.run_id).collect();
    assert_eq!(listed, [by_a.as_str()]);
    for other in [by_b, by_admin] {
        assert!(matches!(runs::get(&t.db, &ca, other).await, Err(DomainError::NotFound)));
    }
    assert_eq!(runs::get(&t.db, &ca, by_a).await.unwrap().actor.as_deref(), Some("clinic-admin-user"));
    assert_eq!(runs::list(&t.db, &admin(), 10).await.unwrap().len(), 3);
    assert_eq!(runs::get(&t.db, &reviewer(), by_b).await.unwrap().actor.as_deref(), Some("clinic-b-user"));
});

db_test!(a_tenants_bundle_counts_deployment_roles_and_never_names_them, async |t: &TestDb| {
    use domain::auth::tokens;
    active_key(t).await;
    tenant(t, "clinic-b").await;
    let a_id = tenants::get(&t.db, &admin(), "clinic-a").await.unwrap().id;
    let ca = user(Role::ClinicAdmin, Some(&a_id));
    let staff = [("ops-root", Role::Admin), ("audit-rita", Role::Reviewer), ("pager-otto", Role::Oncall)];
    for (name, role) in staff {
        tokens::create(&t.db, &admin(), name, role, None).await.unwrap();
    }
    tokens::create(&t.db, &admin(), "a-ci", Role::ClinicAdmin, Some("clinic-a")).await.unwrap();
    tokens::create(&t.db, &admin(), "b-ci", Role::ClinicAdmin, Some("clinic-b")).await.unwrap();
    let run = runs::start(&t.db, &admin()).await.unwrap();
    finish_now(t, &run.run_id).await;

    let own = export::export(&t.db, &t.vault, &ca, None, Via::Api).await.unwrap().bundle;
    let text = serde_json::to_string(&own.evidence).unwrap();
    for name in ["ops-root", "audit-rita", "pager-otto", "b-ci"] {
        assert!(!text.contains(name), "a tenant's bundle names {name}");
        assert!(!own.evidence_html.contains(name), "a tenant's printable page names {name}");
    }
    let role =
        |e: &domain::evidence::bundle::Evidence, r: &str| e.access.iter().find(|a| a.role == r).cloned().unwrap();
    for r in ["admin", "reviewer", "oncall"] {
        let a = role(&own.evidence, r);
        assert!(a.holders.is_empty(), "{a:?}");
        assert_eq!((a.user_count, a.token_count), (0, 1), "{a:?}");
    }
    let clinic = role(&own.evidence, "clinic-admin");
    assert_eq!(clinic.holders.iter().map(|h| h.name.as_str()).collect::<Vec<_>>(), ["a-ci"]);
    assert_eq!(clinic.token_count, 1);
    assert!(own.evidence.retry_policy[0].may_roll_back.iter().any(|w| w.starts_with("0 user(s) and 1 token(s)")));
    let latest = own.evidence.drills.latest.as_ref().unwrap();
    assert_eq!((latest.run_id.as_str(), latest.actor.as_deref()), (run.run_id.as_str(), None));

    // The deployment's bundle still names everyone.
    let global = export::export(&t.db, &t.vault, &admin(), None, Via::Api).await.unwrap().bundle;
    let text = serde_json::to_string(&global.evidence).unwrap();
    for name in ["ops-root", "audit-rita", "pager-otto", "a-ci", "b-ci"] {
        assert!(text.contains(name), "the deployment's bundle must name {name}");
    }
    assert_eq!(global.evidence.drills.latest.as_ref().unwrap().actor.as_deref(), Some("admin-user"));
    assert_eq!(role(&global.evidence, "clinic-admin").token_count, 2);
});

/// In-process deliveries whose lost connection is never noticed: the
/// `lost_ack` delivery sleeps out its whole post-commit stall, and meanwhile
/// another tenant's event goes through the same receiver.
struct NeverDrops {
    inner: InProcess,
    real: crate::receiver::Setup,
    beside: std::sync::Mutex<Option<(domain::receiver::Outcome, std::time::Duration)>>,
}

impl Transport for NeverDrops {
    async fn deliver(&self, req: &DrillRequest) -> Result<Answer, TransportError> {
        self.inner.deliver(req).await
    }

    async fn deliver_then_drop<'a>(
        &'a self,
        req: &'a DrillRequest,
        committed: Until<'a>,
    ) -> Result<bool, TransportError> {
        let (r, req) = (self.inner.r.clone(), req.clone());
        let stalled = tokio::spawn(async move { run_in(&r, req).await });
        let seen = committed.await;
        let body = created("r-beside-a-drill");
        let headers = crate::receiver::signed(
            &self.real,
            domain::registry::Scheme::StandardWebhooks,
            &body,
            now_s(),
            "evt-beside",
        );
        let started = std::time::Instant::now();
        let outcome = deliver(&self.real, &headers, &body).await;
        *self.beside.lock().unwrap() = Some((outcome, started.elapsed()));
        let _ = stalled.await;
        Ok(seen)
    }

    async fn deliver_in_killed_process(&self, req: &DrillRequest) -> Result<String, TransportError> {
        self.inner.deliver_in_killed_process(req).await
    }

    fn faults(&self) -> &DrillFaults {
        self.inner.faults()
    }
}

// `lost_ack` stalls 3 s after its commit; the stall must not hold the
// receiver's write turn (SQLite), or every tenant waits it out.
db_test!(a_stalled_drill_delivery_never_holds_up_another_tenant, async |t: &TestDb| {
    let real = setup(t, domain::registry::Scheme::StandardWebhooks, None).await;
    let inner = InProcess { db: t.db.clone(), vault: t.vault.clone(), r: real.r.clone() };
    let transport = NeverDrops { inner, real, beside: std::sync::Mutex::new(None) };
    let run = runs::run(&t.db, &t.vault, &admin(), &transport).await.unwrap();
    assert_eq!(run.passed, Some(true), "{:?}", run.drills.iter().flat_map(|d| d.failures.clone()).collect::<Vec<_>>());
    let (outcome, took) = transport.beside.lock().unwrap().take().expect("a delivery beside the stalled one");
    assert!(matches!(outcome, domain::receiver::Outcome::Applied { .. }), "{outcome:?}");
    assert!(took < std::time::Duration::from_secs(1), "another tenant's event waited {took:?} for a drill's stall");
});
