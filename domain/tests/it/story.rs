//! One event's whole story on both engines: the claim records the first
//! accepted answer (applied or quarantined, even after a release) and the
//! delivery log every other one (duplicate, bad signature), and the story
//! gathers the claim, replay records, quarantine with triage, reminder
//! transition, outbox intents with attempts and audit entries; a clinic
//! admin of another tenant, an unknown tenant and an unknown event all get
//! the same not-found; an id a path cannot carry is invalid; retention
//! purges old delivery rows.

use domain::{
    DomainError, clock,
    crypto::SigningSecret,
    entity::delivery_log,
    events::story,
    outbox::{self, RetryRule},
    quarantine,
    receiver::Outcome,
    retention::{partitions, purge},
};
use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter, Set};
use serde_json::json;
use views::{events::EventStory, outbox::OutboxStatus, roles::Role, scheme::Scheme};

use crate::{
    db_test,
    fixtures::*,
    receiver::{created, deliver, now_s, setup, signed},
    support::TestDb,
};

async fn story_of(t: &TestDb, event_id: &str) -> EventStory {
    story::story(
        &t.db,
        &t.vault,
        &admin(),
        &"clinic-a".parse().unwrap(),
        &"hooks".parse().unwrap(),
        &event_id.parse().unwrap(),
    )
    .await
    .unwrap()
}

fn scheduled(id: &str) -> Vec<u8> {
    json!({"type": "reminder.scheduled", "data": {"reminder_id": id, "send_at": "2027-01-06T09:00:00Z"}})
        .to_string()
        .into_bytes()
}

db_test!(the_story_of_accepted_duplicate_refused_and_quarantined_events, async |t: &TestDb| {
    let s = setup(t, Scheme::StandardWebhooks, None).await;
    // Accepted, then delivered again (re-signed: a duplicate).
    let body = created("rem-1");
    assert!(matches!(
        deliver(&s, &signed(&s, Scheme::StandardWebhooks, &body, now_s(), "evt-c"), &body).await,
        Outcome::Applied { .. }
    ));
    let sched = scheduled("rem-1");
    // The retry is signed one second before the first delivery, so it is a
    // different signed message (not a replay) however slow the run.
    let at = now_s();
    let first = signed(&s, Scheme::StandardWebhooks, &sched, at, "evt-s");
    assert!(matches!(deliver(&s, &first, &sched).await, Outcome::Applied { .. }));
    let again = signed(&s, Scheme::StandardWebhooks, &sched, at - 1, "evt-s");
    assert!(matches!(deliver(&s, &again, &sched).await, Outcome::Duplicate { .. }));
    // A bad signature naming an event id: answered 401 and logged under it.
    let wrong = SigningSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
    let forged = domain::crypto::signature::sign(Scheme::StandardWebhooks, &wrong, &sched, now_s(), "evt-bad").unwrap();
    assert_eq!(deliver(&s, &forged, &sched).await.status(), 401);
    // Quarantined, then discarded by on-call.
    let odd = json!({"type": "invoice.paid", "data": {}}).to_string().into_bytes();
    let q = deliver(&s, &signed(&s, Scheme::StandardWebhooks, &odd, now_s(), "evt-q"), &odd).await;
    assert!(matches!(q, Outcome::Quarantined { .. }));
    s.r.flush_delivery_log().await;

    let st = story_of(t, "evt-s").await;
    let claim = st.claim.as_ref().unwrap();
    assert_eq!((claim.outcome.as_str(), claim.event_type.as_deref()), ("applied", Some("reminder.scheduled")));
    assert_eq!(claim.key_id, s.key_id);
    let answers: Vec<(u16, &str, Option<&str>, &str)> = st
        .deliveries
        .iter()
        .map(|d| (d.status, d.answer.as_str(), d.key_id.as_ref().map(|k| k.as_str()), d.scheme.as_str()))
        .collect();
    assert_eq!(
        answers,
        [
            (200, "applied", Some(s.key_id.as_str()), "standard-webhooks"),
            (200, "duplicate", Some(s.key_id.as_str()), "standard-webhooks")
        ]
    );
    assert_eq!(st.replay.len(), 2, "each signed message's replay record");
    // Each record says how long it guards and how long it is kept: the same
    // on SQLite; on PostgreSQL until its signed day's partition is dropped.
    let mut kept: Vec<&str> = st.replay.iter().map(|r| r.kept_until.as_str()).collect();
    kept.sort();
    let mut want: Vec<String> = if t.is_postgres() {
        [at - 1, at]
            .map(|secs| {
                let day = partitions::day_of(secs * 1000);
                clock::rfc3339((day + 1) * partitions::DAY_MS + partitions::REPLAY_DAY_KEPT_MS)
            })
            .into()
    } else {
        st.replay.iter().map(|r| r.expires_at.clone()).collect()
    };
    want.sort();
    assert_eq!(kept, want);
    // The claim records the applied answer; the log holds only the duplicate.
    let logged: Vec<String> = delivery_log::Entity::find()
        .filter(delivery_log::Column::EventId.eq("evt-s"))
        .all(&t.db)
        .await
        .unwrap()
        .into_iter()
        .map(|d| d.answer)
        .collect();
    assert_eq!(logged, ["duplicate"]);
    let reminder = st.reminder.as_ref().unwrap();
    assert_eq!((reminder.reminder_id.as_str(), reminder.transition.as_str()), ("rem-1", "reminder.scheduled"));
    assert_eq!(reminder.current.as_ref().unwrap().status.as_str(), "scheduled");
    assert_eq!(st.outbox.len(), 1);
    assert_eq!((st.outbox[0].kind.as_str(), st.outbox[0].attempts), ("reminder_notice", 0));
    assert!(st.quarantine.is_none());
    let text = serde_json::to_string(&st).unwrap();
    assert!(!text.contains("\"data\"") && !text.contains("body_ciphertext"), "no body: {text}");
    let keys: Vec<String> = serde_json::to_value(&st).unwrap().as_object().unwrap().keys().cloned().collect();
    assert_eq!(keys, ["audit", "claim", "deliveries", "outbox", "quarantine", "reminder", "replay"]);

    // A send attempt that failed shows on the intent; a manual retry is audited.
    let leased = outbox::claim_batch(&t.db, &t.vault, 10, 60_000).await.unwrap();
    let notice = leased.iter().find(|d| d.id == st.outbox[0].id).unwrap();
    let rule = RetryRule { base_ms: 10, cap_ms: 10, max_attempts: 1 };
    assert_eq!(
        outbox::mark_failed(&t.db, notice, "relay answered 500", false, &rule).await.unwrap(),
        Some(OutboxStatus::Dead)
    );
    let st = story_of(t, "evt-s").await;
    assert_eq!((st.outbox[0].status.as_str(), st.outbox[0].attempts), ("dead", 1));
    assert_eq!(st.outbox[0].last_error.as_deref(), Some("relay answered 500"));
    // The manual retry starts the count over; its audit entry keeps the attempts before it.
    outbox::retry(&t.db, &oncall(), &notice.id).await.unwrap();
    let st = story_of(t, "evt-s").await;
    assert_eq!((st.outbox[0].status.as_str(), st.outbox[0].attempts), ("pending", 0));
    let retried = st.audit.iter().find(|a| a.action == "outbox.retry" && a.target_id == notice.id).unwrap();
    assert_eq!(retried.before.as_ref().unwrap()["attempts"], 1);

    let bad = story_of(t, "evt-bad").await;
    assert!(bad.claim.is_none() && bad.replay.is_empty() && bad.outbox.is_empty());
    assert_eq!(bad.deliveries.len(), 1);
    assert_eq!((bad.deliveries[0].status, bad.deliveries[0].answer.as_str()), (401, "signature_mismatch"));

    let entry = story_of(t, "evt-q").await.quarantine.unwrap().entry;
    quarantine::discard(&t.db, &oncall(), &entry.id, "not ours").await.unwrap();
    let qs = story_of(t, "evt-q").await;
    assert_eq!(qs.deliveries.iter().map(|d| (d.status, d.answer.as_str())).collect::<Vec<_>>(), [(202, "quarantined")]);
    let q = qs.quarantine.unwrap();
    assert_eq!((q.entry.status.as_str(), q.entry.reason.as_str()), ("discarded", "unknown_event_type"));
    assert_eq!(q.triage.iter().map(|a| a.action.as_str()).collect::<Vec<_>>(), ["quarantine.discard"]);
    assert_eq!(q.reveal, format!("/api/v1/quarantine/{}?include_body=true", entry.id));
    assert!(qs.audit.iter().any(|a| a.action == "quarantine.discard"));

    // `kept_until` is when the purge really removes the records (to the
    // second the story prints): none gone a moment before the earliest, all
    // gone a second after the latest (the two are the same day's on
    // PostgreSQL, a second or so apart on SQLite).
    let until: Vec<i64> = st.replay.iter().map(|r| clock::parse_rfc3339(&r.kept_until).unwrap()).collect();
    let digests: Vec<&str> = st.replay.iter().map(|r| r.message_sha256.as_str()).collect();
    let records = async || {
        domain::entity::replay_record::Entity::find()
            .filter(domain::entity::replay_record::Column::MessageDigest.is_in(digests.clone()))
            .count(&t.db)
            .await
            .unwrap()
    };
    purge::run(&t.db, until.iter().min().unwrap() - 1, purge::DEFAULT_BATCH).await.unwrap();
    assert_eq!(records().await, 2, "kept until {until:?}");
    purge::run(&t.db, until.iter().max().unwrap() + 1000, purge::DEFAULT_BATCH).await.unwrap();
    assert_eq!(records().await, 0, "purged after {until:?}");
});

db_test!(a_released_event_still_tells_its_first_answer_was_quarantine, async |t: &TestDb| {
    let s = setup(t, Scheme::StandardWebhooks, None).await;
    // A transition for a reminder not created yet: quarantined, then released
    // once the reminder exists. The release rewrites the claim's outcome.
    let sched = scheduled("rem-9");
    let q = deliver(&s, &signed(&s, Scheme::StandardWebhooks, &sched, now_s(), "evt-early"), &sched).await;
    assert!(matches!(q, Outcome::Quarantined { .. }), "{q:?}");
    let body = created("rem-9");
    deliver(&s, &signed(&s, Scheme::StandardWebhooks, &body, now_s(), "evt-made"), &body).await;
    let entry = story_of(t, "evt-early").await.quarantine.unwrap().entry;
    quarantine::release(&t.db, &t.vault, &oncall(), &entry.id, "reminder exists now").await.unwrap();
    s.r.flush_delivery_log().await;

    let st = story_of(t, "evt-early").await;
    assert_eq!(st.claim.as_ref().unwrap().outcome.as_str(), "applied", "released");
    let answers: Vec<(u16, &str)> = st.deliveries.iter().map(|d| (d.status, d.answer.as_str())).collect();
    assert_eq!(answers, [(202, "quarantined")], "the answer the provider got");
    assert_eq!(st.replay.len(), 1, "the first delivery's replay record, named by its claim");
    assert_eq!(delivery_log::Entity::find().count(&t.db).await.unwrap(), 0, "no answer but claims' so far");
});

db_test!(unknown_foreign_and_unknown_tenant_are_the_same_not_found, async |t: &TestDb| {
    let s = setup(t, Scheme::StandardWebhooks, None).await;
    let b = tenant(t, "clinic-b").await;
    let body = created("rem-1");
    deliver(&s, &signed(&s, Scheme::StandardWebhooks, &body, now_s(), "evt-1"), &body).await;
    s.r.flush_delivery_log().await;
    let other = user(Role::ClinicAdmin, Some(&b.id));
    let a_id = domain::registry::tenants::get(&t.db, &admin(), &"clinic-a".parse().unwrap()).await.unwrap().id;
    let own = user(Role::ClinicAdmin, Some(&a_id));
    assert!(
        story::story(
            &t.db,
            &t.vault,
            &own,
            &"clinic-a".parse().unwrap(),
            &"hooks".parse().unwrap(),
            &"evt-1".parse().unwrap()
        )
        .await
        .is_ok()
    );
    assert!(
        story::story(
            &t.db,
            &t.vault,
            &reviewer(),
            &"clinic-a".parse().unwrap(),
            &"hooks".parse().unwrap(),
            &"evt-1".parse().unwrap()
        )
        .await
        .is_ok()
    );
    for (who, tenant, endpoint, event) in [
        (&other, "clinic-a", "hooks", "evt-1"),
        (&admin(), "clinic-a", "hooks", "evt-unknown"),
        (&admin(), "clinic-zz", "hooks", "evt-1"),
        (&admin(), "clinic-a", "nope", "evt-1"),
    ] {
        let e = story::story(
            &t.db,
            &t.vault,
            who,
            &tenant.parse().unwrap(),
            &endpoint.parse().unwrap(),
            &event.parse().unwrap(),
        )
        .await
        .unwrap_err();
        assert!(matches!(e, DomainError::NotFound), "{tenant}/{endpoint}/{event}: {e:?}");
    }
    let long = "x".repeat(256);
    for id in ["", "a/b", "tab\there", long.as_str()] {
        // Refused before any lookup: no such id can be made.
        let e = DomainError::from(views::ids::EventId::parse(id).unwrap_err());
        assert_eq!(e.code(), "invalid_event_id", "{id:?}");
    }
});

db_test!(retention_purges_old_delivery_rows, async |t: &TestDb| {
    let s = setup(t, Scheme::StandardWebhooks, None).await;
    let body = created("rem-1");
    let at = now_s();
    deliver(&s, &signed(&s, Scheme::StandardWebhooks, &body, at, "evt-1"), &body).await;
    // Delivered again (signed a second earlier: a retry, never a replay of
    // the first): the duplicate is the answer the log keeps.
    deliver(&s, &signed(&s, Scheme::StandardWebhooks, &body, at - 1, "evt-1"), &body).await;
    s.r.flush_delivery_log().await;
    let fresh = delivery_log::Entity::find().one(&t.db).await.unwrap().unwrap();
    // One clock read: the 400-day-old day's hourly partitions (kept exactly
    // 400 days) stay only if the purge's now is the day's own.
    let now = clock::now_ms();
    let old_at = now - 400 * 86_400_000;
    domain::retention::partitions::cover(&t.db, old_at, old_at).await.unwrap();
    delivery_log::Entity::insert(delivery_log::ActiveModel {
        id: Set(domain::ids::new_id()),
        tenant_id: Set(fresh.tenant_id.clone()),
        endpoint_id: Set(fresh.endpoint_id.clone()),
        event_id: Set("evt-old".into()),
        answered_at: Set(old_at),
        status: Set(200),
        answer: Set("applied".into()),
        key_id: Set(None),
        scheme: Set(fresh.scheme.clone()),
        message_digest: Set(None),
    })
    .exec_without_returning(&t.db)
    .await
    .unwrap();
    let replay_days = replay_days_past(t, now).await;
    let report = purge::run(&t.db, now, purge::DEFAULT_BATCH).await.unwrap();
    if t.is_postgres() {
        // That day's delivery log, minute rollups, minute gauge samples,
        // bodies and replay records.
        // Two replay days when the migration ran before 02:00 (it made
        // yesterday's too) and the purge after: yesterday's is past then.
        assert!((1..=2).contains(&replay_days), "the old day's replay records: {replay_days}");
        assert_eq!((report.deliveries_deleted, report.partitions_dropped), (0, 4 + replay_days), "dropped by day");
    } else {
        assert_eq!(report.deliveries_deleted, 1, "past the endpoint's dedup retention");
    }
    assert_eq!(delivery_log::Entity::find().count(&t.db).await.unwrap(), 1, "the fresh row stays");
    assert_eq!(story_of(t, "evt-1").await.deliveries.len(), 2, "the claim's answer and the logged duplicate");
});
