//! The system's automatic resume of stopped jobs (issue 28 item 3), on both
//! engines: it takes over only jobs whose runner has been silent long
//! enough, one of two concurrent resumers wins, a bulk release runs on only
//! under its starter's rights as they are now, and a job that keeps failing
//! is resumed a bounded number of times.

use std::time::Duration;
use views::{jobs::RunStatus, roles::Role, scheme::Scheme};

use domain::{
    auth::{Actor, Principal, tokens, users},
    entity::{audit_entry, bulk_release as job, kek_rewrap, outbox_intent},
    kek,
    quarantine::bulk_release,
    receiver::faults::Faults,
};
use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder, sea_query::Expr};
use serde_json::Value;

use crate::{
    db_test,
    fixtures::*,
    kek::{by_version, everything_opens, fill},
    release_fixtures::{audit_count, not_found_filter, pending_items, releasable, silence_bulk, stored_oncall},
    support::TestDb,
};

/// A short threshold, as a test deployment would set it.
const STALE_MS: i64 = 2_000;

/// The `after` of the latest audit entry for `action`, with its actor kind.
async fn last_audit(t: &TestDb, action: &str) -> (String, Value) {
    let e = audit_entry::Entity::find()
        .filter(audit_entry::Column::Action.eq(action))
        .order_by_desc(audit_entry::Column::Seq)
        .one(&t.db)
        .await
        .unwrap()
        .expect("audited");
    (e.actor_kind, serde_json::from_str(e.after.as_deref().unwrap()).unwrap())
}

async fn silence_kek(t: &TestDb, id: &str, status: RunStatus) {
    kek_rewrap::Entity::update_many()
        .col_expr(kek_rewrap::Column::UpdatedAt, Expr::value(domain::clock::now_ms() - STALE_MS - 1_000))
        .col_expr(kek_rewrap::Column::Status, Expr::value(status))
        .filter(kek_rewrap::Column::Id.eq(id))
        .exec(&t.db)
        .await
        .unwrap();
}

async fn bulk(t: &TestDb, id: &str) -> job::Model {
    job::Entity::find_by_id(id.to_owned()).one(&t.db).await.unwrap().unwrap()
}

async fn wait_finished(t: &TestDb, id: &str) -> job::Model {
    for _ in 0..400 {
        let j = bulk(t, id).await;
        if j.status == RunStatus::Finished {
            return j;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("bulk release {id} did not finish: {:?}", bulk(t, id).await);
}

db_test!(a_stale_bulk_release_is_resumed_once_under_its_starter, async |t: &TestDb| {
    let _s = releasable(t, 6).await;
    let otto = stored_oncall(t, "otto").await;
    let j = bulk_release::start(&t.db, &otto, &parsed(not_found_filter()), "backfill").await.unwrap();
    bulk_release::step(&t.db, &t.vault, &otto, &j.id, 2).await.unwrap();
    let faults = Faults::default();
    // Its runner still reports: not the system's to take.
    let fresh = bulk_release::resume_stale(&t.db, &t.vault, STALE_MS, "p-1", &faults).await.unwrap();
    assert!(fresh.is_empty(), "{fresh:?}");
    assert_eq!(bulk(t, &j.id).await.auto_resumes, 0);

    silence_bulk(t, &j.id, STALE_MS).await;
    let old_runner = bulk(t, &j.id).await.runner;
    // Two processes' resumers at once: one takes the job over.
    let (a, b) = tokio::join!(
        bulk_release::resume_stale(&t.db, &t.vault, STALE_MS, "p-1", &faults),
        bulk_release::resume_stale(&t.db, &t.vault, STALE_MS, "p-2", &faults)
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a.len() + b.len(), 1, "one resumer wins: {a:?} {b:?}");
    let done = wait_finished(t, &j.id).await;
    assert_eq!((done.processed, done.released, done.already_resolved), (6, 6, 0));
    assert_eq!(outbox_intent::Entity::find().count(&t.db).await.unwrap(), 6, "one effect per entry");
    assert_eq!(audit_count(t, "quarantine.release").await, 6);
    assert_eq!(audit_count(t, "quarantine.bulk_release.resume").await, 1);
    let (kind, after) = last_audit(t, "quarantine.bulk_release.resume").await;
    assert_eq!(kind, "system");
    assert_eq!(after["automatic"], true);
    assert_eq!(after["previous_runner"], old_runner.as_str());
    assert_eq!(after["previous_status"], "running");
    assert!(after["process"] == "p-1" || after["process"] == "p-2", "{after}");
    // It ran under otto's rights, not the system's.
    assert_eq!(after["authority"]["username"], "otto");
    assert_eq!(done.auto_resumes, 1);
    // The finish is audited as otto's, as a person's resume would leave it.
    let finish = audit_entry::Entity::find()
        .filter(audit_entry::Column::Action.eq("quarantine.bulk_release.finish"))
        .one(&t.db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(finish.actor, "otto");
    // Finished: nothing more to resume.
    silence_bulk(t, &j.id, STALE_MS).await;
    assert!(bulk_release::resume_stale(&t.db, &t.vault, STALE_MS, "p-1", &faults).await.unwrap().is_empty());
});

db_test!(a_bulk_release_whose_starter_lost_the_right_is_not_resumed, async |t: &TestDb| {
    let s = releasable(t, 4).await;
    let faults = Faults::default();
    // Started by an API token, which is then revoked.
    let minted = tokens::create(&t.db, &admin(), "pager", Role::Oncall, None).await.unwrap();
    let pager = Principal { actor: Actor::Token { id: minted.view.id.clone(), name: "pager".into() }, ..oncall() };
    let j = bulk_release::start(&t.db, &pager, &parsed(not_found_filter()), "backfill").await.unwrap();
    bulk_release::step(&t.db, &t.vault, &pager, &j.id, 1).await.unwrap();
    tokens::revoke(&t.db, &admin(), &minted.view.id).await.unwrap();
    silence_bulk(t, &j.id, STALE_MS).await;
    let resumed = bulk_release::resume_stale(&t.db, &t.vault, STALE_MS, "p-1", &faults).await.unwrap();
    assert!(resumed.is_empty(), "a revoked token's job is not resumed: {resumed:?}");
    let stopped = bulk(t, &j.id).await;
    assert_eq!((stopped.status.as_str(), stopped.processed), ("failed", 1));
    assert!(stopped.error.as_deref().is_some_and(|e| e.contains("revoked")), "{:?}", stopped.error);
    assert_eq!(stopped.auto_resumes, bulk_release::MAX_AUTO_RESUMES, "left to a person");
    assert_eq!(audit_count(t, "quarantine.bulk_release.resume").await, 0);
    // Failed and silent again: still not the system's to resume.
    silence_bulk(t, &j.id, STALE_MS).await;
    assert!(bulk_release::resume_stale(&t.db, &t.vault, STALE_MS, "p-1", &faults).await.unwrap().is_empty());
    assert_eq!(pending_items(t, &j.id).await, 3, "nothing released after the revocation");
    assert_eq!(outbox_intent::Entity::find().count(&t.db).await.unwrap(), 1);

    // A user demoted to reviewer: may no longer triage, so not resumed.
    quarantine_updates_more(&s).await;
    let olga = stored_oncall(t, "olga").await;
    let filter =
        views::quarantine::QuarantineFilter { reason: Some("malformed_envelope".into()), ..not_found_filter() };
    let k = bulk_release::start(&t.db, &olga, &parsed(filter), "junk").await.unwrap();
    let patch = users::UserChange { role: Some(Role::Reviewer), ..Default::default() };
    users::update(&t.db, &admin(), "olga", patch).await.unwrap();
    silence_bulk(t, &k.id, STALE_MS).await;
    assert!(bulk_release::resume_stale(&t.db, &t.vault, STALE_MS, "p-1", &faults).await.unwrap().is_empty());
    let k = bulk(t, &k.id).await;
    assert_eq!((k.status.as_str(), k.processed), ("failed", 0));
    // A person with the right may still resume it, under their own rights.
    let ivy = stored_oncall(t, "ivy").await;
    bulk_release::resume(&t.db, &t.vault, &ivy, &k.id, STALE_MS, &faults).await.unwrap();
    let k = wait_finished(t, &k.id).await;
    assert_eq!((k.processed, k.auto_resumes), (1, 0), "a person's resume gives the budget back");
});

/// One more quarantined event of another reason (`malformed_envelope`).
async fn quarantine_updates_more(s: &crate::receiver::Setup) {
    use domain::receiver::Outcome;
    let body = b"not json";
    let sent = crate::receiver::deliver(
        s,
        &crate::receiver::signed(s, Scheme::StandardWebhooks, body, crate::receiver::now_s(), "junk"),
        body,
    )
    .await;
    assert!(matches!(sent, Outcome::Quarantined { .. }), "{sent:?}");
}

db_test!(a_stale_rewrap_is_resumed_once_by_the_system, async |t: &TestDb| {
    let sealed = fill(t).await;
    let rotation = kek::rotate(&t.db, &t.vault, &admin(), kek::DEFAULT_STALE_AFTER_MS).await.unwrap();
    let id = rotation.rewrap.id.clone();
    let first = kek_rewrap::Entity::find_by_id(id.clone()).one(&t.db).await.unwrap().unwrap();
    kek::step(&t.db, &t.vault, &id, &first.runner, 2).await.unwrap().unwrap();
    // Its runner still reports.
    assert!(kek::resume_stale(&t.db, &t.vault, STALE_MS, "p-1").await.unwrap().is_none());

    silence_kek(t, &id, RunStatus::Running).await;
    let (a, b) = tokio::join!(
        kek::resume_stale(&t.db, &t.vault, STALE_MS, "p-1"),
        kek::resume_stale(&t.db, &t.vault, STALE_MS, "p-2")
    );
    let won: Vec<_> = [a.unwrap(), b.unwrap()].into_iter().flatten().collect();
    assert_eq!(won.len(), 1, "one resumer wins: {won:?}");
    assert_eq!((won[0].id.as_str(), won[0].status), (id.as_str(), RunStatus::Running));
    let (kind, after) = last_audit(t, "kek.rewrap.resume").await;
    assert_eq!(kind, "system");
    assert_eq!(after["automatic"], true);
    assert_eq!(after["previous_runner"], first.runner.as_str());
    assert_eq!(audit_count(t, "kek.rewrap.resume").await, 1);
    // The old runner, only slow, does nothing more.
    let old = kek_rewrap::Entity::find_by_id(id.clone()).one(&t.db).await.unwrap().unwrap();
    assert!(kek::step(&t.db, &t.vault, &id, &first.runner, 2).await.unwrap().is_none());
    assert_eq!(old.auto_resumes, 1);
    let done = kek::run(&t.db, &t.vault, &id, |_| {}).await.unwrap();
    assert_eq!(done.status, RunStatus::Finished);
    assert_eq!(done.rewrapped, sealed as u64, "no row resealed twice, none missed");
    assert_eq!(by_version(t).await.into_iter().collect::<Vec<_>>(), vec![(2, sealed as u64)]);
    assert_eq!(everything_opens(t).await, sealed);
    // Finished: nothing more to resume.
    silence_kek(t, &id, RunStatus::Finished).await;
    assert!(kek::resume_stale(&t.db, &t.vault, STALE_MS, "p-1").await.unwrap().is_none());
});

db_test!(a_failing_rewrap_is_resumed_a_bounded_number_of_times, async |t: &TestDb| {
    fill(t).await;
    let id = kek::rotate(&t.db, &t.vault, &admin(), kek::DEFAULT_STALE_AFTER_MS).await.unwrap().rewrap.id;
    // It fails every time it runs; each failure waits out the threshold.
    for n in 1..=kek::MAX_AUTO_RESUMES {
        silence_kek(t, &id, RunStatus::Failed).await;
        let resumed = kek::resume_stale(&t.db, &t.vault, STALE_MS, "p-1").await.unwrap();
        assert!(resumed.is_some(), "automatic resume {n}");
    }
    silence_kek(t, &id, RunStatus::Failed).await;
    assert!(kek::resume_stale(&t.db, &t.vault, STALE_MS, "p-1").await.unwrap().is_none(), "then it waits");
    assert_eq!(audit_count(t, "kek.rewrap.resume").await, kek::MAX_AUTO_RESUMES as u64);
    // A failure that just happened is not retried at once either.
    kek::resume(&t.db, &admin(), &id, kek::DEFAULT_STALE_AFTER_MS).await.unwrap();
    kek_rewrap::Entity::update_many()
        .col_expr(kek_rewrap::Column::Status, Expr::value(RunStatus::Failed))
        .filter(kek_rewrap::Column::Id.eq(&id))
        .exec(&t.db)
        .await
        .unwrap();
    assert!(kek::resume_stale(&t.db, &t.vault, STALE_MS, "p-1").await.unwrap().is_none());
    // The admin's resume gave the budget back.
    silence_kek(t, &id, RunStatus::Failed).await;
    assert!(kek::resume_stale(&t.db, &t.vault, STALE_MS, "p-1").await.unwrap().is_some());
});
