//! Bulk release in the background, on both engines: it snapshots what the
//! filter matched, reports progress entry by entry, counts each outcome
//! once even with two runners on one job, and an interrupted job resumes
//! without touching what it already did.

use std::time::Duration;
use views::{jobs::RunStatus, quarantine::QuarantineFilter, roles::Role, scheme::Scheme};

use domain::{
    DomainError,
    auth::users,
    entity::{bulk_release as job, event_body, outbox_intent},
    quarantine::{
        self,
        bulk_release::{self, DEFAULT_STALE_AFTER_MS as STALE},
    },
    receiver::{Outcome, faults::Faults},
};
use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter, sea_query::Expr};
use serde_json::json;

use crate::{
    db_test,
    fixtures::*,
    receiver::setup,
    release_fixtures::{
        audit_count, create_reminders, not_found_filter, pending_items, quarantine_updates, releasable, send,
        silence_bulk, stored_oncall,
    },
    support::TestDb,
};

async fn entry_of(t: &TestDb, event_id: &str) -> views::quarantine::QuarantineView {
    all_quarantined(t).await.into_iter().find(|q| q.event_id == event_id).expect("quarantined")
}

async fn drain(t: &TestDb, job_id: &str) {
    while bulk_release::step(&t.db, &t.vault, &oncall(), job_id, 3).await.unwrap() > 0 {}
    bulk_release::finish(&t.db, &oncall(), job_id).await.unwrap();
}

db_test!(progress_is_reported_entry_by_entry_with_each_outcome, async |t: &TestDb| {
    let s = setup(t, Scheme::StandardWebhooks, None).await;
    quarantine_updates(&s, 6).await;
    let junk = send(&s, b"not json", "junk").await;
    assert!(matches!(junk, Outcome::Quarantined { ref reason, .. } if reason.as_str() == "malformed_envelope"));
    create_reminders(&s, 0..4).await;

    let j = bulk_release::start(&t.db, &oncall(), &parsed(not_found_filter()), "reminders backfilled").await.unwrap();
    assert_eq!((j.status.as_str(), j.total, j.processed), ("running", 6, 0), "the snapshot is what the filter matched");
    assert_eq!(j.started_by, "oncall-user");
    // Someone releases one of them by hand before the runner gets there.
    let by_hand = entry_of(t, "upd-3").await.id;
    quarantine::release(&t.db, &t.vault, &admin(), &by_hand, "by hand").await.unwrap();
    // Events quarantined after the start are not part of this job.
    let late = json!({"type": "reminder.scheduled", "data": {"reminder_id": "r-6"}}).to_string();
    assert!(matches!(send(&s, late.as_bytes(), "upd-6").await, Outcome::Quarantined { .. }));

    assert_eq!(bulk_release::step(&t.db, &t.vault, &oncall(), &j.id, 2).await.unwrap(), 2);
    let mid = bulk_release::get(&t.db, &oncall(), &j.id, STALE).await.unwrap();
    assert_eq!((mid.status.as_str(), mid.processed, mid.released, mid.total), ("running", 2, 2, 6));

    drain(t, &j.id).await;
    let done = bulk_release::get(&t.db, &oncall(), &j.id, STALE).await.unwrap();
    assert_eq!(done.status, RunStatus::Finished);
    assert!(done.finished_at.is_some());
    assert_eq!((done.processed, done.released, done.already_resolved, done.still_failing), (6, 3, 1, 2));
    let failed: Vec<String> = done.failures.iter().map(|f| f.error.clone()).collect();
    let failed_events: Vec<&str> = done.failures.iter().map(|f| f.event_id.as_str()).collect();
    assert_eq!(failed_events, vec!["upd-4", "upd-5"]);
    assert!(failed.iter().all(|e| e.contains("reminder_not_found")), "{failed:?}");
    for (event, status) in [
        ("upd-0", "released"),
        ("upd-3", "released"),
        ("upd-4", "open"),
        ("upd-5", "open"),
        ("upd-6", "open"),
        ("junk", "open"),
    ] {
        assert_eq!(entry_of(t, event).await.status.as_str(), status, "{event}");
    }
    assert_eq!(
        entry_of(t, "upd-1").await.resolution_note.as_deref(),
        Some("reminders backfilled"),
        "the reason is on each event"
    );
    // One effect per applied update: a reminder notice each.
    assert_eq!(outbox_intent::Entity::find().count(&t.db).await.unwrap(), 4);
    assert_eq!(audit_count(t, "quarantine.bulk_release.start").await, 1);
    assert_eq!(audit_count(t, "quarantine.release").await, 4);
    // Finishing again records nothing new.
    assert_eq!(bulk_release::step(&t.db, &t.vault, &oncall(), &j.id, 3).await.unwrap(), 0);
    bulk_release::finish(&t.db, &oncall(), &j.id).await.unwrap();
    assert_eq!(audit_count(t, "quarantine.bulk_release.finish").await, 1);
    let recent = bulk_release::recent(&t.db, &user(Role::Reviewer, None), 5, STALE).await.unwrap();
    assert_eq!(recent.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), vec![j.id.as_str()]);
});

db_test!(refuses_empty_matches_and_callers_outside_their_rights, async |t: &TestDb| {
    let s = setup(t, Scheme::StandardWebhooks, None).await;
    let b_id = tenant(t, "clinic-b").await.id;
    quarantine_updates(&s, 2).await;
    let nothing = QuarantineFilter { reason: Some("no_such_reason".into()), ..not_found_filter() };
    let empty = bulk_release::start(&t.db, &oncall(), &parsed(nothing), "x").await;
    assert!(matches!(empty, Err(DomainError::Conflict { code: "nothing_to_release", .. })), "{empty:?}");
    let blank = bulk_release::start(&t.db, &oncall(), &parsed(not_found_filter()), " ").await;
    assert!(matches!(blank, Err(DomainError::Invalid { code: "reason_required", .. })), "{blank:?}");
    for who in [reviewer(), user(Role::ClinicAdmin, None)] {
        let denied = bulk_release::start(&t.db, &who, &parsed(QuarantineFilter::default()), "x").await;
        assert!(matches!(denied, Err(DomainError::Forbidden | DomainError::NotFound)), "{denied:?}");
    }
    assert_eq!(job::Entity::find().count(&t.db).await.unwrap(), 0, "refusals record nothing");

    let a = bulk_release::start(&t.db, &oncall(), &parsed(not_found_filter()), "for clinic-a").await.unwrap();
    let all = bulk_release::start(&t.db, &oncall(), &parsed(QuarantineFilter::default()), "all tenants").await.unwrap();
    let a_id = domain::registry::tenants::find(&t.db, &admin(), &"clinic-a".parse().unwrap()).await.unwrap().id;
    let clinic_a = user(Role::ClinicAdmin, Some(&a_id));
    let clinic_b = user(Role::ClinicAdmin, Some(&b_id));
    assert!(bulk_release::get(&t.db, &clinic_a, &a.id, STALE).await.is_ok());
    assert!(matches!(bulk_release::get(&t.db, &clinic_b, &a.id, STALE).await, Err(DomainError::NotFound)));
    assert!(
        matches!(bulk_release::get(&t.db, &clinic_a, &all.id, STALE).await, Err(DomainError::NotFound)),
        "an all-tenant job is not a clinic's"
    );
    let seen: Vec<String> =
        bulk_release::recent(&t.db, &clinic_a, 10, STALE).await.unwrap().into_iter().map(|j| j.id).collect();
    assert_eq!(seen, vec![a.id.clone()]);
    assert!(bulk_release::recent(&t.db, &clinic_b, 10, STALE).await.unwrap().is_empty());
    let still_running = bulk_release::resume(&t.db, &t.vault, &oncall(), &a.id, STALE, &Faults::default()).await;
    assert!(
        matches!(still_running, Err(DomainError::Conflict { code: "bulk_release_running", .. })),
        "{still_running:?}"
    );
});

db_test!(two_runners_on_one_job_count_each_entry_once, async |t: &TestDb| {
    let _s = releasable(t, 12).await;
    let j = bulk_release::start(&t.db, &oncall(), &parsed(not_found_filter()), "race").await.unwrap();
    let mut runners = Vec::new();
    for _ in 0..4 {
        let (db, vault, id) = (t.db.clone(), t.vault.clone(), j.id.clone());
        runners.push(tokio::spawn(async move {
            while bulk_release::step(&db, &vault, &oncall(), &id, 2).await.unwrap() > 0 {}
        }));
    }
    for r in runners {
        r.await.unwrap();
    }
    bulk_release::finish(&t.db, &oncall(), &j.id).await.unwrap();
    let done = bulk_release::get(&t.db, &oncall(), &j.id, STALE).await.unwrap();
    assert_eq!(done.processed, 12, "each entry counted once");
    // The release and its item's outcome commit together: whichever runner
    // released an entry, it counts as released, never as someone else's.
    assert_eq!((done.released, done.already_resolved), (12, 0));
    assert_eq!(done.still_failing, 0);
    assert_eq!(pending_items(t, &j.id).await, 0);
    // Exactly one effect per entry, whichever runner released it.
    assert_eq!(outbox_intent::Entity::find().count(&t.db).await.unwrap(), 12);
    assert_eq!(audit_count(t, "quarantine.release").await, 12);
});

db_test!(an_interrupted_job_resumes_where_it_stopped, async |t: &TestDb| {
    let _s = releasable(t, 5).await;
    let j = bulk_release::start(&t.db, &oncall(), &parsed(not_found_filter()), "backfill").await.unwrap();
    bulk_release::step(&t.db, &t.vault, &oncall(), &j.id, 2).await.unwrap();
    // The runner's process dies: its heartbeat goes stale.
    silence_bulk(t, &j.id, STALE).await;
    let stuck = bulk_release::get(&t.db, &oncall(), &j.id, STALE).await.unwrap();
    assert_eq!((stuck.status.as_str(), stuck.processed), ("interrupted", 2));
    assert!(matches!(
        bulk_release::resume(&t.db, &t.vault, &reviewer(), &j.id, STALE, &Faults::default()).await,
        Err(DomainError::Forbidden)
    ));

    // Two engineers click Resume at once: one takes the job over.
    let (one, two) = (stored_oncall(t, "otto").await, stored_oncall(t, "olga").await);
    let faults = Faults::default();
    let (a, b) = tokio::join!(
        bulk_release::resume(&t.db, &t.vault, &one, &j.id, STALE, &faults),
        bulk_release::resume(&t.db, &t.vault, &two, &j.id, STALE, &faults)
    );
    let (won, lost): (Vec<_>, Vec<_>) = [a, b].into_iter().partition(|r| r.is_ok());
    assert_eq!(won.len(), 1, "one resume wins: {lost:?}");
    assert!(
        lost.iter().all(|r| matches!(r, Err(DomainError::Conflict { code: "bulk_release_running", .. }))),
        "{lost:?}"
    );
    let mut done = won.into_iter().next().unwrap().unwrap();
    assert_eq!(done.status, RunStatus::Running);
    for _ in 0..200 {
        done = bulk_release::get(&t.db, &oncall(), &j.id, STALE).await.unwrap();
        if done.status == RunStatus::Finished {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!((done.status.as_str(), done.processed, done.released), ("finished", 5, 5));
    assert_eq!(outbox_intent::Entity::find().count(&t.db).await.unwrap(), 5);
    assert_eq!(audit_count(t, "quarantine.bulk_release.resume").await, 1);
    let finished = bulk_release::resume(&t.db, &t.vault, &oncall(), &j.id, STALE, &Faults::default()).await;
    assert!(matches!(finished, Err(DomainError::Conflict { code: "bulk_release_finished", .. })), "{finished:?}");
});

db_test!(an_entry_that_cannot_be_decrypted_does_not_stop_the_job, async |t: &TestDb| {
    let _s = releasable(t, 3).await;
    // One stored body is corrupt: it will not open.
    event_body::Entity::update_many()
        .col_expr(event_body::Column::BodyCiphertext, Expr::value(vec![0u8; 64]))
        .filter(event_body::Column::EventId.eq("upd-1"))
        .exec(&t.db)
        .await
        .unwrap();
    let j = bulk_release::start(&t.db, &oncall(), &parsed(not_found_filter()), "backfill").await.unwrap();
    drain(t, &j.id).await;
    let done = bulk_release::get(&t.db, &oncall(), &j.id, STALE).await.unwrap();
    assert_eq!((done.status.as_str(), done.processed, done.released, done.still_failing), ("finished", 3, 2, 1));
    assert_eq!(done.failures.iter().map(|f| f.event_id.as_str()).collect::<Vec<_>>(), vec!["upd-1"]);
    assert_eq!(entry_of(t, "upd-1").await.status.as_str(), "open");
});

db_test!(a_runner_stops_when_its_user_is_disabled, async |t: &TestDb| {
    let _s = releasable(t, 2).await;
    let otto = stored_oncall(t, "otto").await;
    let j = bulk_release::start(&t.db, &otto, &parsed(not_found_filter()), "backfill").await.unwrap();
    users::update(&t.db, &admin(), "otto", users::UserChange { disabled: Some(true), ..Default::default() })
        .await
        .unwrap();
    bulk_release::spawn(t.db.clone(), t.vault.clone(), otto, j.id.clone(), &Faults::default());
    let mut seen = j;
    for _ in 0..200 {
        seen = bulk_release::get(&t.db, &admin(), &seen.id, STALE).await.unwrap();
        if seen.status != RunStatus::Running {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!((seen.status.as_str(), seen.processed), ("failed", 0), "a disabled user's job releases nothing more");
    assert_eq!(entry_of(t, "upd-0").await.status.as_str(), "open");
});
