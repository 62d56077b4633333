//! Bundles: the live catalog, verification and every tampering named,
//! sign-offs of exported digests, tenant scoping, concurrent exports, expiry
//! of unsigned exports, re-verification before a stored bundle is shown,
//! and roles counted, never named, in a tenant's bundle.

use std::collections::BTreeMap;

use domain::{
    DomainError,
    auth::TenantName,
    evidence::{
        manifest::{self, MANIFEST_JSON, MANIFEST_SIG},
        record::Bundle,
        runs,
        signoff::{self, NewSignoff},
    },
    registry::{keys, tenants},
};
use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter};
use views::roles::Role;

use super::finish_now;
use crate::{db_test, fixtures::*, support::TestDb};

db_test!(every_expected_constraint_is_in_the_live_catalog, async |t: &TestDb| {
    let rows = domain::evidence::catalog::constraints(&t.db).await.unwrap();
    assert_eq!(rows.len(), migrations::expected::EXPECTED.len());
    for r in rows {
        assert!(r.present, "{} on {} not found: {:?}", r.id, r.table, r);
    }
});

fn files(b: &Bundle) -> BTreeMap<String, Vec<u8>> {
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
    let stored = export::stored(&t.db, &t.vault, &reviewer(), &b.digest.parse().unwrap()).await.unwrap();
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
    let d = since.differences.iter().find(|d| d.section == "credentials" && k.key.key_id == d.subject).unwrap();
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
    let a_id = tenants::get(&t.db, &admin(), &"clinic-a".parse().unwrap()).await.unwrap().id;
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
    assert!(matches!(
        export::stored(&t.db, &t.vault, &ca, &global.digest.parse().unwrap()).await,
        Err(DomainError::NotFound)
    ));
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
    let a_id = tenants::get(&t.db, &admin(), &"clinic-a".parse().unwrap()).await.unwrap().id;
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
    assert!(matches!(
        export::stored(&t.db, &t.vault, &reviewer(), &second.digest.parse().unwrap()).await,
        Err(DomainError::NotFound)
    ));
    let tenant_scope = export::list(&t.db, &reviewer(), Some(&"clinic-a".parse().unwrap()), 200).await.unwrap();
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
        export::stored(&t.db, &t.vault, &reviewer(), &b.digest.parse().unwrap()).await,
        export::latest(&t.db, &t.vault, &reviewer(), None).await,
    ] {
        assert_eq!(shown.unwrap_err().code(), "bundle_tampered");
    }
});

db_test!(a_tenants_bundle_counts_deployment_roles_and_never_names_them, async |t: &TestDb| {
    use domain::auth::tokens;
    active_key(t).await;
    tenant(t, "clinic-b").await;
    let a_id = tenants::get(&t.db, &admin(), &"clinic-a".parse().unwrap()).await.unwrap().id;
    let ca = user(Role::ClinicAdmin, Some(&a_id));
    let staff = [("ops-root", Role::Admin), ("audit-rita", Role::Reviewer), ("pager-otto", Role::Oncall)];
    for (name, role) in staff {
        tokens::create(&t.db, &admin(), name, role, None).await.unwrap();
    }
    tokens::create(&t.db, &admin(), "a-ci", Role::ClinicAdmin, TenantName::given(Some("clinic-a")).as_ref())
        .await
        .unwrap();
    tokens::create(&t.db, &admin(), "b-ci", Role::ClinicAdmin, TenantName::given(Some("clinic-b")).as_ref())
        .await
        .unwrap();
    let run = runs::start(&t.db, &admin()).await.unwrap();
    finish_now(t, &run.run_id).await;

    let own = export::export(&t.db, &t.vault, &ca, None, Via::Api).await.unwrap().bundle;
    let text = serde_json::to_string(&own.evidence).unwrap();
    for name in ["ops-root", "audit-rita", "pager-otto", "b-ci"] {
        assert!(!text.contains(name), "a tenant's bundle names {name}");
        assert!(!own.evidence_html.contains(name), "a tenant's printable page names {name}");
    }
    let role = |e: &views::evidence::Evidence, r: &str| e.access.iter().find(|a| a.role == r).cloned().unwrap();
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
