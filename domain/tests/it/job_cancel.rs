//! Canceling a job (issue 27 item 4), on both engines: its runner stops at
//! its next step, what it did stays done, nothing resumes it, a finished
//! job answers a conflict; and the one status view of every job.

use std::time::Duration;
use views::{jobs::RunStatus, roles::Role};

use domain::{
    DomainError,
    entity::{audit_entry, bulk_release as job, kek_rewrap, kek_version, outbox_intent},
    job_lease,
    jobs::{self, StaleAfter},
    kek,
    quarantine::bulk_release::{self, DEFAULT_STALE_AFTER_MS as STALE},
    receiver::faults::Faults,
};
use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter, sea_query::Expr};

use crate::{
    db_test,
    fixtures::*,
    kek::{by_version, everything_opens, fill},
    release_fixtures::{audit_count, not_found_filter, pending_items, releasable, silence_bulk, stored_oncall},
    support::TestDb,
};

fn is_conflict<T: std::fmt::Debug>(r: &Result<T, DomainError>, want: &str) -> bool {
    matches!(r, Err(DomainError::Conflict { code, .. }) if *code == want)
}

async fn intents(t: &TestDb) -> u64 {
    outbox_intent::Entity::find().count(&t.db).await.unwrap()
}

db_test!(a_canceled_bulk_release_keeps_what_it_released_and_is_never_resumed, async |t: &TestDb| {
    let _s = releasable(t, 6).await;
    let j = bulk_release::start(&t.db, &oncall(), &parsed(not_found_filter()), "backfill").await.unwrap();
    assert_eq!(bulk_release::step(&t.db, &t.vault, &oncall(), &j.id, 2).await.unwrap(), 2);

    // Only someone who may triage its events cancels it.
    for who in [reviewer(), user(Role::ClinicAdmin, Some("no-such-tenant"))] {
        let refused = bulk_release::cancel(&t.db, &who, &j.id, STALE).await;
        assert!(matches!(refused, Err(DomainError::Forbidden | DomainError::NotFound)), "{refused:?}");
    }
    let canceled = bulk_release::cancel(&t.db, &oncall(), &j.id, STALE).await.unwrap();
    assert_eq!((canceled.status.as_str(), canceled.processed, canceled.released), ("canceled", 2, 2));
    assert!(canceled.finished_at.is_some());
    let audited = audit_entry::Entity::find()
        .filter(audit_entry::Column::Action.eq("quarantine.bulk_release.cancel"))
        .all(&t.db)
        .await
        .unwrap();
    assert_eq!(audited.len(), 1);
    assert_eq!(audited[0].actor, "oncall-user", "audited as the person who canceled");
    let after: serde_json::Value = serde_json::from_str(audited[0].after.as_deref().unwrap()).unwrap();
    assert_eq!((after["previous_status"].as_str(), after["released"].as_i64()), (Some("running"), Some(2)));

    // The runner's next round releases nothing.
    assert_eq!(bulk_release::step(&t.db, &t.vault, &oncall(), &j.id, 10).await.unwrap(), 0);
    assert_eq!(pending_items(t, &j.id).await, 4, "the rest stay in quarantine");
    assert_eq!(intents(t).await, 2, "what was released stays released");
    // Neither a person nor the system resumes it.
    let resumed = bulk_release::resume(&t.db, &t.vault, &oncall(), &j.id, STALE, &Faults::default()).await;
    assert!(is_conflict(&resumed, "bulk_release_canceled"), "{resumed:?}");
    silence_bulk(t, &j.id, 1_000).await;
    let auto = bulk_release::resume_stale(&t.db, &t.vault, 1_000, "p-1", &Faults::default()).await.unwrap();
    assert!(auto.is_empty(), "{auto:?}");
    let again = bulk_release::cancel(&t.db, &oncall(), &j.id, STALE).await;
    assert!(is_conflict(&again, "bulk_release_canceled"), "{again:?}");
    assert_eq!(audit_count(t, "quarantine.bulk_release.finish").await, 0);

    // A new bulk release takes the rest; a finished one cannot be canceled.
    let next = bulk_release::start(&t.db, &oncall(), &parsed(not_found_filter()), "the rest").await.unwrap();
    assert_eq!(next.total, 4);
    while bulk_release::step(&t.db, &t.vault, &oncall(), &next.id, 3).await.unwrap() > 0 {}
    bulk_release::finish(&t.db, &oncall(), &next.id).await.unwrap();
    assert_eq!(intents(t).await, 6);
    let finished = bulk_release::cancel(&t.db, &oncall(), &next.id, STALE).await;
    assert!(is_conflict(&finished, "bulk_release_finished"), "{finished:?}");
    assert_eq!(audit_count(t, "quarantine.bulk_release.cancel").await, 1);
});

db_test!(a_running_bulk_release_stops_at_its_next_entry_once_canceled, async |t: &TestDb| {
    let _s = releasable(t, 8).await;
    let otto = stored_oncall(t, "otto").await;
    let j = bulk_release::start(&t.db, &otto, &parsed(not_found_filter()), "backfill").await.unwrap();
    let faults = Faults { stall_bulk_entry: Some(Duration::from_millis(150)), ..Faults::default() };
    bulk_release::spawn(t.db.clone(), t.vault.clone(), otto.clone(), j.id.clone(), &faults);
    for _ in 0..400 {
        if bulk_release::get(&t.db, &otto, &j.id, STALE).await.unwrap().processed >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let canceled = bulk_release::cancel(&t.db, &otto, &j.id, STALE).await.unwrap();
    assert_eq!(canceled.status, RunStatus::Canceled);
    assert!((2..8).contains(&canceled.processed), "canceled midway: {canceled:?}");
    // Long enough for several more entries, had it gone on.
    tokio::time::sleep(Duration::from_millis(900)).await;
    let after = bulk_release::get(&t.db, &otto, &j.id, STALE).await.unwrap();
    assert_eq!((after.status.as_str(), after.processed), ("canceled", canceled.processed));
    assert_eq!(pending_items(t, &j.id).await, 8 - canceled.processed);
    assert_eq!(intents(t).await, canceled.released, "no release after the cancel");
    let row = job::Entity::find_by_id(j.id.clone()).one(&t.db).await.unwrap().unwrap();
    assert_eq!(row.status, RunStatus::Canceled);
});

async fn age_versions(t: &TestDb) {
    kek_version::Entity::update_many()
        .col_expr(kek_version::Column::CreatedAt, Expr::value(0i64))
        .exec(&t.db)
        .await
        .unwrap();
}

db_test!(a_canceled_rewrap_keeps_what_it_resealed_and_a_new_one_finishes_it, async |t: &TestDb| {
    let sealed = fill(t).await;
    let rotation = kek::rotate(&t.db, &t.vault, &admin(), kek::DEFAULT_STALE_AFTER_MS).await.unwrap();
    let id = rotation.rewrap.id.clone();
    let first = kek_rewrap::Entity::find_by_id(id.clone()).one(&t.db).await.unwrap().unwrap();
    let window = kek::step(&t.db, &t.vault, &id, &first.runner, 3).await.unwrap().unwrap();
    assert!(window.rewrapped > 0, "{window:?}");
    let midway = by_version(t).await;

    let refused = kek::cancel(&t.db, &oncall(), kek::DEFAULT_STALE_AFTER_MS).await;
    assert!(matches!(refused, Err(DomainError::Forbidden)), "only an admin: {refused:?}");
    let canceled = kek::cancel(&t.db, &admin(), kek::DEFAULT_STALE_AFTER_MS).await.unwrap();
    assert_eq!((canceled.id.as_str(), canceled.status), (id.as_str(), RunStatus::Canceled));
    assert_eq!(audit_count(t, "kek.rewrap.cancel").await, 1);

    // Its runner writes nothing more; the resealed rows stay resealed.
    assert!(kek::step(&t.db, &t.vault, &id, &first.runner, 3).await.unwrap().is_none());
    assert_eq!(by_version(t).await, midway);
    assert_eq!(midway.get(&2).copied(), Some(window.rewrapped));
    // The old version still seals rows: it cannot be retired.
    age_versions(t).await;
    let retire = kek::retire(&t.db, &t.vault, &admin(), 1).await;
    assert!(is_conflict(&retire, "kek_in_use"), "{retire:?}");
    // Nothing resumes it.
    let resumed = kek::resume(&t.db, &admin(), &id, kek::DEFAULT_STALE_AFTER_MS).await;
    assert!(is_conflict(&resumed, "rewrap_canceled"), "{resumed:?}");
    kek_rewrap::Entity::update_many()
        .col_expr(kek_rewrap::Column::UpdatedAt, Expr::value(domain::clock::now_ms() - 10_000))
        .filter(kek_rewrap::Column::Id.eq(&id))
        .exec(&t.db)
        .await
        .unwrap();
    assert!(kek::resume_stale(&t.db, &t.vault, 1_000, "p-1").await.unwrap().is_none());
    let again = kek::cancel(&t.db, &admin(), kek::DEFAULT_STALE_AFTER_MS).await;
    assert!(is_conflict(&again, "rewrap_canceled"), "{again:?}");

    // The next rewrap is a new job (the canceled one holds no "one running"
    // slot), and reseals the rest.
    let next = kek::start_rewrap(&t.db, &t.vault, &admin(), kek::DEFAULT_STALE_AFTER_MS).await.unwrap();
    assert_ne!(next.id, id);
    let done = kek::run(&t.db, &t.vault, &next.id, |_| {}).await.unwrap();
    assert_eq!(done.status, RunStatus::Finished);
    assert_eq!(by_version(t).await.into_iter().collect::<Vec<_>>(), vec![(2, sealed as u64)]);
    assert_eq!(everything_opens(t).await, sealed);
    let finished = kek::cancel(&t.db, &admin(), kek::DEFAULT_STALE_AFTER_MS).await;
    assert!(is_conflict(&finished, "rewrap_finished"), "{finished:?}");
});

db_test!(the_status_view_lists_every_lease_and_the_latest_runs, async |t: &TestDb| {
    let _s = releasable(t, 3).await;
    let stale = StaleAfter { kek_ms: kek::DEFAULT_STALE_AFTER_MS, bulk_ms: STALE };
    let held = job_lease::acquire(&t.db, "outbox_relay", "p-1", 60_000).await.unwrap().unwrap();
    let gone = job_lease::acquire(&t.db, "maintenance", "p-2", 60_000).await.unwrap().unwrap();
    job_lease::release(&t.db, "maintenance", "p-2", gone).await.unwrap();
    job_lease::acquire(&t.db, "retired_job", "p-3", 60_000).await.unwrap().unwrap();
    let running = bulk_release::start(&t.db, &oncall(), &parsed(not_found_filter()), "one").await.unwrap();
    bulk_release::cancel(&t.db, &oncall(), &running.id, STALE).await.unwrap();
    let stuck = bulk_release::start(&t.db, &oncall(), &parsed(not_found_filter()), "two").await.unwrap();
    silence_bulk(t, &stuck.id, STALE).await;
    let rewrap = kek::rotate(&t.db, &t.vault, &admin(), kek::DEFAULT_STALE_AFTER_MS).await.unwrap().rewrap;

    let names = ["outbox_relay", "maintenance", "job_resume"];
    let v = jobs::overview(&t.db, &admin(), &names, stale).await.unwrap();
    let leases: Vec<(&str, Option<&str>, u64, bool)> =
        v.leases.iter().map(|l| (l.job.as_str(), l.holder.as_deref(), l.epoch, l.held)).collect();
    assert_eq!(
        leases,
        vec![
            ("outbox_relay", Some("p-1"), held as u64, true),
            ("maintenance", Some("p-2"), gone as u64, false),
            ("job_resume", None, 0, false),
            ("retired_job", Some("p-3"), 1, true),
        ]
    );
    assert!(v.leases[0].expires_at.is_some() && v.leases[2].expires_at.is_none());
    assert_eq!(
        v.kek_rewrap.as_ref().map(|r| (r.id.as_str(), r.status.as_str())),
        Some((rewrap.id.as_str(), "running"))
    );
    let runs: Vec<(&str, &str)> = v.bulk_releases.iter().map(|b| (b.id.as_str(), b.status.as_str())).collect();
    assert_eq!(runs, vec![(stuck.id.as_str(), "interrupted"), (running.id.as_str(), "canceled")], "newest first");

    // On-call reads it too, but not the KEK's rewrap; a clinic admin, bound
    // to one tenant, not at all.
    let on_call = jobs::overview(&t.db, &oncall(), &names, stale).await.unwrap();
    assert_eq!((on_call.leases.len(), on_call.kek_rewrap.is_none(), on_call.bulk_releases.len()), (4, true, 2));
    let a_id = domain::registry::tenants::find(&t.db, &admin(), &"clinic-a".parse().unwrap()).await.unwrap().id;
    let clinic = jobs::overview(&t.db, &user(Role::ClinicAdmin, Some(&a_id)), &names, stale).await;
    assert!(matches!(clinic, Err(DomainError::Forbidden)), "{clinic:?}");
});
