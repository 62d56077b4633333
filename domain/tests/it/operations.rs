//! Quarantine triage and the retry policy, on both engines: release is
//! exactly once under concurrent clicks, failures stay open, bodies are
//! revealed only to triage roles (audited, redacted), and policy changes are
//! versioned and roll back.

use std::sync::Arc;
use views::{
    events::ClaimOutcome,
    quarantine::{QuarantineFilter, QuarantineReason, QuarantineStatus},
    retry_policy::RetryPolicy,
    roles::Role,
    scheme::Scheme,
};

use domain::{
    DomainError,
    entity::{audit_entry, inbox_claim, outbox_intent, tenant},
    quarantine::{
        self,
        redact::{MASK, Redaction},
    },
    receiver::Outcome,
    retry_policy,
};
use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter};
use serde_json::json;

use crate::{
    db_test,
    fixtures::*,
    receiver::{Setup, created, deliver, now_s, setup, signed},
    support::TestDb,
};

fn scheduled(id: &str) -> Vec<u8> {
    json!({"type": "reminder.scheduled", "data": {"reminder_id": id, "phone": "+41 79 555 01 23"}})
        .to_string()
        .into_bytes()
}

async fn send(s: &Setup, body: &[u8], msg: &str) -> Outcome {
    deliver(s, &signed(s, Scheme::StandardWebhooks, body, now_s(), msg), body).await
}

/// A provider retry: the same event re-signed with a later timestamp.
async fn resend(s: &Setup, body: &[u8], msg: &str) -> Outcome {
    deliver(s, &signed(s, Scheme::StandardWebhooks, body, now_s() + 1, msg), body).await
}

/// The id of the only quarantine entry for `event_id`.
async fn entry_id(t: &TestDb, event_id: &str) -> String {
    all_quarantined(t).await.into_iter().find(|q| q.event_id == event_id).expect("quarantined").id
}

async fn audit_count(t: &TestDb, action: &str) -> u64 {
    audit_entry::Entity::find().filter(audit_entry::Column::Action.eq(action)).count(&t.db).await.unwrap()
}

db_test!(release_applies_exactly_once_under_concurrent_clicks, async |t: &TestDb| {
    let s = setup(t, Scheme::StandardWebhooks, None).await;
    let out = send(&s, &scheduled("r-1"), "msg_sched").await;
    assert_eq!(out, Outcome::Quarantined { event_id: "msg_sched".into(), reason: QuarantineReason::ReminderNotFound });
    let id = entry_id(t, "msg_sched").await;

    // Releasing before the cause is fixed changes nothing but the error note.
    let early = quarantine::release(&t.db, &t.vault, &oncall(), &id, "try").await;
    assert!(matches!(early, Err(DomainError::Conflict { code: "release_failed", .. })), "{early:?}");
    let q = quarantine::get(&t.db, &oncall(), &id).await.unwrap();
    assert_eq!((q.status.as_str(), q.last_release_error.as_deref()), ("open", Some("reminder_not_found")));
    assert_eq!(outbox_intent::Entity::find().count(&t.db).await.unwrap(), 0);
    assert_eq!(audit_count(t, "quarantine.release_failed").await, 1);

    // The missing reminder arrives through a webhook, then several engineers
    // click release at once.
    assert!(matches!(send(&s, &created("r-1"), "msg_created").await, Outcome::Applied { .. }));
    let mut tasks = Vec::new();
    for i in 0..8 {
        let (db, vault, id) = (t.db.clone(), t.vault.clone(), id.clone());
        tasks.push(tokio::spawn(async move {
            quarantine::release(&db, &vault, &oncall(), &id, &format!("click {i}")).await
        }));
    }
    let mut released = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(v) => {
                released += 1;
                assert_eq!(v.status.as_str(), "released");
            }
            Err(DomainError::Conflict { code: "already_resolved", .. }) => {}
            Err(e) => panic!("unexpected: {e:?}"),
        }
    }
    assert_eq!(released, 1, "exactly one release wins");
    // One effect: the reminder notice intent exists once; the claim is applied.
    assert_eq!(outbox_intent::Entity::find().count(&t.db).await.unwrap(), 1);
    let claim = inbox_claim::Entity::find()
        .filter(inbox_claim::Column::EventId.eq("msg_sched"))
        .one(&t.db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(claim.outcome.as_str(), "applied");
    assert_eq!(audit_count(t, "quarantine.release").await, 1);
    let q = quarantine::get(&t.db, &admin(), &id).await.unwrap();
    assert_eq!(q.resolved_by.as_deref(), Some("oncall-user"));
    assert!(q.resolution_note.unwrap().starts_with("click "));
    // A provider retry is still a duplicate, now of an applied event.
    let again = resend(&s, &scheduled("r-1"), "msg_sched").await;
    assert_eq!(again, Outcome::Duplicate { event_id: "msg_sched".into(), original: ClaimOutcome::Applied });
});

db_test!(discard_needs_a_reason_and_keeps_the_claim, async |t: &TestDb| {
    let s = setup(t, Scheme::StandardWebhooks, None).await;
    send(&s, &scheduled("r-9"), "msg_9").await;
    let id = entry_id(t, "msg_9").await;
    let blank = quarantine::discard(&t.db, &oncall(), &id, "  ").await;
    assert!(matches!(blank, Err(DomainError::Invalid { code: "reason_required", .. })), "{blank:?}");
    // Roles without triage rights cannot act, whatever they can read.
    assert!(matches!(quarantine::discard(&t.db, &reviewer(), &id, "no").await, Err(DomainError::Forbidden)));
    let v = quarantine::discard(&t.db, &oncall(), &id, "test event").await.unwrap();
    assert_eq!((v.status.as_str(), v.resolution_note.as_deref()), ("discarded", Some("test event")));
    let late = quarantine::release(&t.db, &t.vault, &oncall(), &id, "oops").await;
    assert!(matches!(late, Err(DomainError::Conflict { code: "already_resolved", .. })), "{late:?}");
    let again = resend(&s, &scheduled("r-9"), "msg_9").await;
    assert_eq!(again, Outcome::Duplicate { event_id: "msg_9".into(), original: ClaimOutcome::Quarantined });
    assert_eq!(audit_count(t, "quarantine.discard").await, 1);
});

db_test!(listing_filters_counts_and_tenant_boundaries, async |t: &TestDb| {
    let s = setup(t, Scheme::StandardWebhooks, None).await;
    tenant(t, "clinic-b").await;
    let b = tenant::Entity::find().filter(tenant::Column::Slug.eq("clinic-b")).one(&t.db).await.unwrap().unwrap();
    send(&s, &scheduled("r-1"), "m1").await;
    send(&s, &scheduled("r-2"), "m2").await;
    let junk = b"not json at all";
    let kept = send(&s, junk, "m3").await;
    assert!(matches!(kept, Outcome::Quarantined { reason: QuarantineReason::MalformedEnvelope, .. }), "{kept:?}");

    let all = quarantine::list(&t.db, &oncall(), &parsed(QuarantineFilter::default())).await.unwrap();
    assert_eq!(all.total, 3);
    let counts: Vec<(String, u64)> = all.by_reason.iter().map(|c| (c.reason.as_str().to_owned(), c.count)).collect();
    assert_eq!(counts, vec![("malformed_envelope".into(), 1), ("reminder_not_found".into(), 2)]);
    let f = QuarantineFilter {
        tenant: Some("clinic-a".into()),
        endpoint: Some("hooks".into()),
        reason: Some("reminder_not_found".into()),
        age: Some("1h".into()),
        ..Default::default()
    };
    let some = quarantine::list(&t.db, &reviewer(), &parsed(f)).await.unwrap();
    assert_eq!((some.total, some.items.len()), (2, 2));
    assert_eq!(some.by_reason.len(), 2, "counts ignore the reason filter");
    assert!(some.items.iter().all(|q| q.tenant == "clinic-a"
        && q.endpoint == "hooks"
        && q.event_type.as_deref() == Some("reminder.scheduled")));
    let bad =
        quarantine::list(&t.db, &oncall(), &parsed(QuarantineFilter { age: Some("2w".into()), ..Default::default() }))
            .await;
    assert!(matches!(bad, Err(DomainError::Invalid { code: "invalid_age", .. })));
    let bad = quarantine::list(
        &t.db,
        &oncall(),
        &parsed(QuarantineFilter { endpoint: Some("hooks".into()), ..Default::default() }),
    )
    .await;
    assert!(matches!(bad, Err(DomainError::Invalid { code: "tenant_required", .. })));
    // The status filter: open by default, a stored word, or `all`; nothing else.
    quarantine::discard(&t.db, &oncall(), &entry_id(t, "m3").await, "junk").await.unwrap();
    let by_status = async |s: &str| {
        let f = QuarantineFilter { status: Some(s.into()), ..Default::default() };
        let l = quarantine::list(&t.db, &oncall(), &parsed(f)).await?;
        Ok::<_, DomainError>(l.items.into_iter().map(|q| q.status).collect::<Vec<_>>())
    };
    assert_eq!(by_status("").await.unwrap(), [QuarantineStatus::Open; 2]);
    assert_eq!(by_status("discarded").await.unwrap(), [QuarantineStatus::Discarded]);
    assert!(by_status("released").await.unwrap().is_empty());
    assert_eq!(by_status("all").await.unwrap().len(), 3);
    let bad = by_status("Open").await;
    assert!(matches!(bad, Err(DomainError::Invalid { code: "invalid_status", .. })), "{bad:?}");

    // Another clinic's admin sees nothing of clinic-a, by filter or by id.
    let other = user(Role::ClinicAdmin, Some(&b.id));
    assert_eq!(quarantine::list(&t.db, &other, &parsed(QuarantineFilter::default())).await.unwrap().total, 0);
    let by_filter = quarantine::list(
        &t.db,
        &other,
        &parsed(QuarantineFilter { tenant: Some("clinic-a".into()), ..Default::default() }),
    )
    .await;
    assert!(matches!(by_filter, Err(DomainError::NotFound)));
    let id = entry_id(t, "m1").await;
    assert!(matches!(quarantine::get(&t.db, &other, &id).await, Err(DomainError::NotFound)));
});

db_test!(bodies_are_revealed_only_to_triage_roles_redacted_and_audited, async |t: &TestDb| {
    let s = setup(t, Scheme::StandardWebhooks, None).await;
    send(&s, &scheduled("r-1"), "m1").await;
    let id = entry_id(t, "m1").await;
    let redaction = Redaction::default();
    for who in [reviewer()] {
        assert!(matches!(
            quarantine::reveal_body(&t.db, &t.vault, &who, &id, &redaction).await,
            Err(DomainError::Forbidden)
        ));
    }
    assert_eq!(audit_count(t, "quarantine.reveal_body").await, 0);
    let body = quarantine::reveal_body(&t.db, &t.vault, &oncall(), &id, &redaction).await.unwrap();
    assert!(body.json);
    assert!(body.text.contains("r-1") && body.text.contains(MASK), "{}", body.text);
    assert!(!body.text.contains("555"), "the phone number is redacted");
    assert_eq!(audit_count(t, "quarantine.reveal_body").await, 1);
    // The audit entry names the event, never its content.
    let e = audit_entry::Entity::find()
        .filter(audit_entry::Column::Action.eq("quarantine.reveal_body"))
        .one(&t.db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(e.actor, "oncall-user");
    assert!(!format!("{:?}{:?}", e.before, e.after).contains("555"));
    // A body that is not JSON cannot be redacted, so none of it is shown.
    let raw = b"patient=Jane Roe; phone=555-0100";
    assert!(matches!(send(&s, raw, "m-raw").await, Outcome::Quarantined { .. }));
    let raw_id = entry_id(t, "m-raw").await;
    let shown = quarantine::reveal_body(&t.db, &t.vault, &oncall(), &raw_id, &redaction).await.unwrap();
    assert!(!shown.json);
    assert_eq!(shown.text, "");
    assert_eq!(shown.size_bytes, raw.len() as u64);
    assert!(!format!("{shown:?}").contains("Jane"), "{shown:?}");
});

db_test!(retry_policy_is_versioned_and_rolls_back, async |t: &TestDb| {
    tenant(t, "clinic-a").await;
    let v = retry_policy::get(&t.db, &reviewer(), &"clinic-a".parse().unwrap()).await.unwrap();
    // The rollout order (docs/architecture.md#rollout-order-and-sign-off): a
    // new tenant starts with retries off.
    assert_eq!((v.policy.as_str(), v.version, v.history.len()), ("disabled", 1, 1));
    assert!(v.history[0].reason.contains("drills"), "{:?}", v.history[0]);
    let nothing = retry_policy::rollback(&t.db, &gate(t), &admin(), &"clinic-a".parse().unwrap(), "why").await;
    assert!(matches!(nothing, Err(DomainError::Conflict { code: "nothing_to_roll_back", .. })));
    for word in ["maybe", "Enabled", ""] {
        let r = retry_policy::parse(word);
        assert!(matches!(r, Err(DomainError::Invalid { code: "invalid_retry_policy", .. })), "{word:?}: {r:?}");
    }
    let r =
        retry_policy::set(&t.db, &gate(t), &admin(), &"clinic-a".parse().unwrap(), RetryPolicy::Disabled, " ").await;
    assert!(matches!(r, Err(DomainError::Invalid { code: "reason_required", .. })), "{r:?}");
    assert!(matches!(
        retry_policy::set(&t.db, &gate(t), &oncall(), &"clinic-a".parse().unwrap(), RetryPolicy::Enabled, "x").await,
        Err(DomainError::Forbidden)
    ));

    meet_rollout_order(t).await;
    let v =
        retry_policy::set(&t.db, &gate(t), &admin(), &"clinic-a".parse().unwrap(), RetryPolicy::Enabled, "cohort 1")
            .await
            .unwrap();
    assert_eq!((v.policy.as_str(), v.version), ("enabled", 2));
    assert_eq!((v.history[0].actor.as_str(), v.history[0].reason.as_str()), ("admin-user", "cohort 1"));
    let v =
        retry_policy::rollback(&t.db, &gate(t), &admin(), &"clinic-a".parse().unwrap(), "incident 42").await.unwrap();
    assert_eq!((v.policy.as_str(), v.version), ("disabled", 3));
    assert_eq!(v.history[0].reason, "rollback to v1: incident 42");
    let row = tenant::Entity::find().filter(tenant::Column::Slug.eq("clinic-a")).one(&t.db).await.unwrap().unwrap();
    assert_eq!(row.retry_policy, RetryPolicy::Disabled, "the receiver's copy follows the newest version");
    assert_eq!(audit_count(t, "retry_policy.set").await, 1);
    assert_eq!(audit_count(t, "retry_policy.rollback").await, 1);

    // A cohort moves all or none.
    tenant(t, "clinic-b").await;
    let partial = retry_policy::set_cohort(
        &t.db,
        &gate(t),
        &admin(),
        &["clinic-b".parse().unwrap(), "no-such".parse().unwrap()],
        RetryPolicy::Enabled,
        "cohort 1",
    )
    .await;
    assert!(matches!(partial, Err(DomainError::NotFound)));
    assert_eq!(retry_policy::get(&t.db, &admin(), &"clinic-b".parse().unwrap()).await.unwrap().version, 1);
    let n = retry_policy::set_cohort(
        &t.db,
        &gate(t),
        &admin(),
        &["clinic-a".parse().unwrap(), "clinic-b".parse().unwrap()],
        RetryPolicy::Enabled,
        "cohort 1",
    )
    .await
    .unwrap();
    assert_eq!(n, 2);
    for slug in ["clinic-a", "clinic-b"] {
        assert_eq!(
            retry_policy::get(&t.db, &admin(), &slug.parse().unwrap()).await.unwrap().policy,
            RetryPolicy::Enabled
        );
    }
});

db_test!(concurrent_policy_changes_get_consecutive_versions, async |t: &TestDb| {
    tenant(t, "clinic-a").await;
    meet_rollout_order(t).await;
    let db = Arc::new(t.db.clone());
    let mut tasks = Vec::new();
    for i in 0..8 {
        let (db, vault) = (db.clone(), t.vault.clone());
        let policy = if i % 2 == 0 { RetryPolicy::Disabled } else { RetryPolicy::Enabled };
        tasks.push(tokio::spawn(async move {
            let gate = domain::rollout::Rollout { vault: &vault, drill_max_age_days: 7 };
            retry_policy::set(&db, &gate, &admin(), &"clinic-a".parse().unwrap(), policy, &format!("change {i}")).await
        }));
    }
    for task in tasks {
        task.await.unwrap().expect("every change lands");
    }
    let v = retry_policy::get(&t.db, &admin(), &"clinic-a".parse().unwrap()).await.unwrap();
    let versions: Vec<i32> = v.history.iter().rev().map(|h| h.version).collect();
    assert_eq!(versions, (1..=9).collect::<Vec<_>>());
    let row = tenant::Entity::find().filter(tenant::Column::Slug.eq("clinic-a")).one(&t.db).await.unwrap().unwrap();
    assert_eq!(row.retry_policy.as_str(), v.history[0].policy, "the tenant row matches the newest version");
});

// Gate 8 holds on the transient path: with retries disabled, an event its
// key may not send is refused, not quarantined as "transient" for a later
// release to apply.
db_test!(transient_failures_never_quarantine_an_out_of_scope_event, async |t: &TestDb| {
    let s = setup(t, Scheme::StandardWebhooks, Some(vec!["reminder.created"])).await;
    retry_policy::set(
        &t.db,
        &gate(t),
        &admin(),
        &"clinic-a".parse().unwrap(),
        RetryPolicy::Disabled,
        "keep events through a database incident",
    )
    .await
    .unwrap();
    let faults = domain::receiver::faults::Faults { transient: true, ..Default::default() };
    let s = Setup { r: Arc::new(domain::receiver::Receiver::new(t.db.clone(), t.vault.clone(), faults)), ..s };
    let out = send(&s, &scheduled("r-1"), "msg_out_of_scope").await;
    assert_eq!(out, Outcome::Refused(domain::receiver::Refusal::EventTypeNotPermitted));
    assert!(all_quarantined(t).await.is_empty(), "nothing quarantined");
    // An in-scope event on the same path is still kept (quarantined as transient).
    let kept = send(&s, &created("r-2"), "msg_in_scope").await;
    assert_eq!(kept, Outcome::Quarantined { event_id: "msg_in_scope".into(), reason: QuarantineReason::Transient });
});

// Gate 8 again at release: a quarantined event whose key no longer permits
// its type does not apply, and stays open with the reason.
db_test!(release_rechecks_the_key_scope, async |t: &TestDb| {
    let s = setup(t, Scheme::StandardWebhooks, Some(vec!["reminder.created", "reminder.scheduled"])).await;
    let out = send(&s, &scheduled("r-late"), "msg_early").await;
    assert_eq!(out, Outcome::Quarantined { event_id: "msg_early".into(), reason: QuarantineReason::ReminderNotFound });
    assert_eq!(send(&s, &created("r-late"), "msg_created").await, Outcome::Applied { event_id: "msg_created".into() });
    // The key's scope narrows (it goes back for approval; the rule is its scope now).
    domain::registry::keys::set_scope(&t.db, &admin(), &s.key_id.parse().unwrap(), &["reminder.created".to_owned()])
        .await
        .unwrap();
    let id = entry_id(t, "msg_early").await;
    let refused = quarantine::release(&t.db, &t.vault, &oncall(), &id, "try").await;
    assert!(
        matches!(&refused, Err(DomainError::Conflict { code: "release_failed", message })
            if message.contains("event_type_not_permitted")),
        "{refused:?}"
    );
    let entry = quarantine::get(&t.db, &admin(), &id).await.unwrap();
    assert_eq!(entry.status.as_str(), "open");
    assert_eq!(entry.last_release_error.as_deref(), Some("event_type_not_permitted"));
    let applied = inbox_claim::Entity::find()
        .filter(inbox_claim::Column::EventId.eq("msg_early"))
        .one(&t.db)
        .await
        .unwrap()
        .unwrap();
    assert_ne!(applied.outcome.as_str(), "applied");
    // The scope is approved again, then the key is revoked (say it leaked):
    // what it signed is not released either.
    domain::registry::keys::set_scope(
        &t.db,
        &admin(),
        &s.key_id.parse().unwrap(),
        &["reminder.created".to_owned(), "reminder.scheduled".to_owned()],
    )
    .await
    .unwrap();
    domain::registry::keys::approve(&t.db, &reviewer(), &s.key_id.parse().unwrap(), None, "widened back")
        .await
        .unwrap();
    domain::registry::keys::revoke(&t.db, &admin(), &s.key_id.parse().unwrap(), "leaked").await.unwrap();
    let refused = quarantine::release(&t.db, &t.vault, &oncall(), &id, "try again").await;
    assert!(
        matches!(&refused, Err(DomainError::Conflict { code: "release_failed", message })
            if message.contains("key_revoked")),
        "{refused:?}"
    );
    assert_eq!(quarantine::get(&t.db, &admin(), &id).await.unwrap().status.as_str(), "open");
});

// A `scheduled` quarantined until its reminder exists, released after the
// reminder was cancelled: resolved, but recorded as the stale transition it
// is (claim, entry note, audit), with no notice minted.
db_test!(releasing_a_transition_the_reminder_moved_past_applies_nothing_and_says_so, async |t: &TestDb| {
    let s = setup(t, Scheme::StandardWebhooks, None).await;
    assert!(matches!(send(&s, &scheduled("r-1"), "msg_early").await, Outcome::Quarantined { .. }));
    assert!(matches!(send(&s, &created("r-1"), "msg_created").await, Outcome::Applied { .. }));
    let cancel = json!({"type": "reminder.canceled", "data": {"reminder_id": "r-1"}}).to_string().into_bytes();
    assert!(matches!(send(&s, &cancel, "msg_cancel").await, Outcome::Applied { .. }));
    let id = entry_id(t, "msg_early").await;
    let released = quarantine::release(&t.db, &t.vault, &oncall(), &id, "reminder exists now").await.unwrap();
    assert_eq!(released.status.as_str(), "released");
    assert!(released.resolution_note.as_deref().is_some_and(|n| n.contains("stale transition")), "{released:?}");
    let claim = inbox_claim::Entity::find()
        .filter(inbox_claim::Column::EventId.eq("msg_early"))
        .one(&t.db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(claim.outcome.as_str(), "stale_transition");
    assert_eq!(
        domain::entity::outbox_intent::Entity::find().count(&t.db).await.unwrap(),
        0,
        "no notice for a cancelled reminder"
    );
    let audited = audit_entries(t, "quarantine.release").await;
    assert_eq!(audited.last().map(|(_, after)| after["outcome"].clone()), Some(json!("stale_transition")));
});

// An event quarantined for want of an id applies once even when its
// endpoint opts in to a compound key afterwards: whichever comes first, the
// release or the sender's redelivery under the key, the other applies
// nothing.
db_test!(a_missing_id_release_and_a_redelivery_under_the_compound_key_apply_once, async |t: &TestDb| {
    let s = setup(t, Scheme::Stripe, None).await;
    let body = |id: &str| {
        json!({
            "type": "reminder.created",
            "occurred_at": "2027-01-01T08:00:00Z",
            "data": {"reminder_id": id, "send_at": "2027-01-05T09:00:00Z"},
        })
        .to_string()
        .into_bytes()
    };
    let post = |b: Vec<u8>, ts: i64| {
        let s = &s;
        async move { deliver(s, &signed(s, Scheme::Stripe, &b, ts, ""), &b).await }
    };
    assert!(matches!(post(body("r-1"), now_s()).await, Outcome::Quarantined { .. }));
    assert!(matches!(post(body("r-2"), now_s()).await, Outcome::Quarantined { .. }));
    let fields = vec!["type".to_owned(), "data.reminder_id".to_owned(), "occurred_at".to_owned()];
    domain::registry::event_key::set(
        &t.db,
        &admin(),
        &"clinic-a".parse().unwrap(),
        &"hooks".parse().unwrap(),
        Some(fields),
        "documented by the sender",
    )
    .await
    .unwrap();
    let s = Setup {
        r: std::sync::Arc::new(domain::receiver::Receiver::new(
            t.db.clone(),
            t.vault.clone(),
            domain::receiver::faults::Faults::default(),
        )),
        ..s
    };
    let post = |b: Vec<u8>, ts: i64| {
        let s = &s;
        async move { deliver(s, &signed(s, Scheme::Stripe, &b, ts, ""), &b).await }
    };
    let entries = quarantine::list(&t.db, &admin(), &parsed(QuarantineFilter::default())).await.unwrap().items;
    let entry = |rid: &str| {
        entries
            .iter()
            .find(|q| {
                q.reason.as_str() == "missing_event_id"
                    && q.body_sha256.as_deref() == Some(&domain::crypto::sha256_hex(&body(rid)))
            })
            .unwrap()
            .id
            .clone()
    };
    // r-1: the redelivery under the key comes first; the release then applies nothing.
    assert!(matches!(post(body("r-1"), now_s() + 1).await, Outcome::Applied { .. }));
    let refused = quarantine::release(&t.db, &t.vault, &oncall(), &entry("r-1"), "the cause is fixed").await;
    assert!(
        matches!(&refused, Err(DomainError::Conflict { message, .. }) if message.contains("applied_under_event_key")),
        "{refused:?}"
    );
    // r-2: the release comes first; the redelivery is then a duplicate.
    quarantine::release(&t.db, &t.vault, &oncall(), &entry("r-2"), "the cause is fixed").await.unwrap();
    assert!(matches!(post(body("r-2"), now_s() + 1).await, Outcome::Duplicate { .. }));
    assert_eq!(domain::entity::reminder::Entity::find().count(&t.db).await.unwrap(), 2, "each reminder created once");
});
