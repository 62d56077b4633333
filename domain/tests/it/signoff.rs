//! Sign-off integrity (issue 23 item 4) on both engines: only the newest
//! bundle of a scope is signed; an approval acknowledges every critical
//! finding by id with a comment; a reviewer signs a bundle once (the
//! database decides, even when the requests race); a bundle that fails its
//! digest or signature check is neither signed nor compared against.

use std::collections::BTreeSet;

use domain::{
    entity::{evidence_export, evidence_signoff},
    evidence::{
        runs,
        signoff::{self, NewAcknowledgement, NewSignoff},
    },
    receiver::faults::DrillFaults,
};
use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter, sea_query::Expr};

use crate::{db_test, evidence::Unreachable, fixtures::*, support::TestDb};

fn signoff(digest: &str, decision: &str, acks: &[(&str, &str)]) -> NewSignoff {
    NewSignoff {
        digest: digest.into(),
        decision: decision.into(),
        comment: "reviewed every section".into(),
        acknowledge: acks
            .iter()
            .map(|(f, c)| NewAcknowledgement { finding: (*f).into(), comment: (*c).into() })
            .collect(),
    }
}

async fn tamper(t: &TestDb, digest: &str) {
    evidence_export::Entity::update_many()
        .col_expr(evidence_export::Column::EvidenceHtml, Expr::value("<p>all fine</p>"))
        .filter(evidence_export::Column::Digest.eq(digest))
        .exec(&t.db)
        .await
        .unwrap();
}

db_test!(only_the_newest_bundle_of_a_scope_can_be_signed_off, async |t: &TestDb| {
    active_key(t).await;
    let old = export::export(&t.db, &t.vault, &reviewer(), None, Via::Api).await.unwrap().bundle;
    let new = export::export(&t.db, &t.vault, &reviewer(), None, Via::Api).await.unwrap().bundle;
    assert_ne!(old.digest, new.digest);
    let stale = signoff::sign_off(&t.db, &t.vault, &reviewer(), &signoff(&old.digest, "approved", &[])).await;
    let err = stale.unwrap_err();
    assert_eq!(err.code(), "stale_bundle");
    assert!(err.public_message().contains(&new.digest), "{}", err.public_message());
    assert_eq!(evidence_signoff::Entity::find().count(&t.db).await.unwrap(), 0);
    signoff::sign_off(&t.db, &t.vault, &reviewer(), &signoff(&new.digest, "approved", &[])).await.unwrap();
    // Scopes are apart: a tenant's bundle stays signable after a newer
    // deployment-wide one.
    let own = export::export(&t.db, &t.vault, &reviewer(), Some("clinic-a"), Via::Api).await.unwrap().bundle;
    let global = export::export(&t.db, &t.vault, &reviewer(), None, Via::Api).await.unwrap().bundle;
    signoff::sign_off(&t.db, &t.vault, &reviewer(), &signoff(&own.digest, "approved", &[])).await.unwrap();
    let err = signoff::sign_off(&t.db, &t.vault, &admin(), &signoff(&new.digest, "rejected", &[])).await.unwrap_err();
    assert_eq!(err.code(), "stale_bundle", "{} is older than {}", new.digest, global.digest);
});

db_test!(approving_critical_findings_acknowledges_each_by_id, async |t: &TestDb| {
    active_key(t).await;
    // Drills that cannot reach the receiver: critical `drill_failed`.
    runs::run(&t.db, &t.vault, &reviewer(), &Unreachable(DrillFaults::default())).await.unwrap();
    let b = export::export(&t.db, &t.vault, &reviewer(), None, Via::Api).await.unwrap().bundle;
    let critical: BTreeSet<&str> =
        b.evidence.findings.iter().filter(|f| f.severity == "critical").map(|f| f.id.as_str()).collect();
    assert!(critical.contains("drill_failed"), "{critical:?}");
    let all: Vec<(&str, &str)> = critical.iter().map(|id| (*id, "accepted: drills rerun after the fix")).collect();
    let sign = |p, s: NewSignoff| async move { signoff::sign_off(&t.db, &t.vault, &p, &s).await };

    let missing = sign(reviewer(), signoff(&b.digest, "approved", &[])).await.unwrap_err();
    assert_eq!(missing.code(), "unacknowledged_findings");
    for id in &critical {
        assert!(missing.public_message().contains(id), "{id}: {}", missing.public_message());
    }
    let mut unknown = all.clone();
    unknown.push(("no_such_finding", "x"));
    let err = sign(reviewer(), signoff(&b.digest, "approved", &unknown)).await.unwrap_err();
    assert_eq!(err.code(), "unknown_finding");
    assert!(err.public_message().contains("no_such_finding"));
    let mut blank = all.clone();
    blank[0].1 = "   ";
    let err = sign(reviewer(), signoff(&b.digest, "approved", &blank)).await.unwrap_err();
    assert_eq!(err.code(), "acknowledgement_comment_required");
    let mut twice = all.clone();
    twice.push(all[0]);
    assert_eq!(
        sign(reviewer(), signoff(&b.digest, "approved", &twice)).await.unwrap_err().code(),
        "duplicate_acknowledgement"
    );
    assert_eq!(evidence_signoff::Entity::find().count(&t.db).await.unwrap(), 0, "nothing stored on refusal");

    // A rejection needs no acknowledgement.
    sign(admin(), signoff(&b.digest, "rejected", &[])).await.unwrap();
    let s = sign(reviewer(), signoff(&b.digest, "approved", &all)).await.unwrap();
    let acked: Vec<(&str, &str)> = s.acknowledged.iter().map(|a| (a.finding.as_str(), a.comment.as_str())).collect();
    assert_eq!(acked, all);
    let listed = signoff::list(&t.db, &reviewer(), None, 10).await.unwrap();
    assert_eq!(listed.iter().find(|l| l.id == s.id).unwrap().acknowledged, s.acknowledged);
    let audited = audit_entries(t, "evidence.signoff").await;
    let (_, after) = audited.iter().find(|(_, a)| a["decision"] == "approved").unwrap();
    assert_eq!(after["acknowledged"][0]["finding"], all[0].0);
    assert_eq!(after["acknowledged"][0]["comment"], all[0].1);
});

db_test!(a_reviewer_signs_a_bundle_once_even_when_requests_race, async |t: &TestDb| {
    active_key(t).await;
    let b = export::export(&t.db, &t.vault, &reviewer(), None, Via::Api).await.unwrap().bundle;
    let mut handles = Vec::new();
    for i in 0..6 {
        let (db, vault, digest) = (t.db.clone(), t.vault.clone(), b.digest.clone());
        let decision = if i % 2 == 0 { "approved" } else { "rejected" };
        handles.push(tokio::spawn(async move {
            signoff::sign_off(&db, &vault, &reviewer(), &signoff(&digest, decision, &[])).await
        }));
    }
    let (mut ok, mut refused) = (0, 0);
    for h in handles {
        match h.await.unwrap() {
            Ok(_) => ok += 1,
            Err(e) => {
                assert_eq!(e.code(), "already_signed", "{e:?}");
                refused += 1;
            }
        }
    }
    assert_eq!((ok, refused), (1, 5));
    assert_eq!(evidence_signoff::Entity::find().count(&t.db).await.unwrap(), 1);
    assert_eq!(audit_entries(t, "evidence.signoff").await.len(), 1);
    // Another reviewer still may.
    signoff::sign_off(&t.db, &t.vault, &admin(), &signoff(&b.digest, "approved", &[])).await.unwrap();
});

db_test!(a_tampered_bundle_is_neither_signed_nor_compared_against, async |t: &TestDb| {
    active_key(t).await;
    let approved = export::export(&t.db, &t.vault, &reviewer(), None, Via::Api).await.unwrap().bundle;
    signoff::sign_off(&t.db, &t.vault, &reviewer(), &signoff(&approved.digest, "approved", &[])).await.unwrap();
    let later = export::export(&t.db, &t.vault, &reviewer(), None, Via::Api).await.unwrap().bundle;
    signoff::since_last_approval(&t.db, &t.vault, &reviewer(), None, &later.evidence).await.unwrap();
    // The approved baseline edited in the database: "what changed" refuses.
    tamper(t, &approved.digest).await;
    let err = signoff::since_last_approval(&t.db, &t.vault, &reviewer(), None, &later.evidence).await.unwrap_err();
    assert_eq!(err.code(), "bundle_tampered");
    // The newest bundle edited: it cannot be signed off.
    tamper(t, &later.digest).await;
    let err = signoff::sign_off(&t.db, &t.vault, &admin(), &signoff(&later.digest, "approved", &[])).await.unwrap_err();
    assert_eq!(err.code(), "bundle_tampered");
    assert_eq!(evidence_signoff::Entity::find().count(&t.db).await.unwrap(), 1);
});
