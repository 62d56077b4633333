//! Reminder transitions: late, post-cancel and racing transitions, and
//! events without an id.

use std::sync::Arc;
use views::{events::ClaimOutcome, scheme::Scheme};

use domain::{
    DomainError, clock,
    crypto::SigningSecret,
    entity::{inbox_claim, outbox_intent, quarantine_entry, reminder},
    receiver::{Outcome, Receiver, Refusal},
};
use sea_orm::{EntityTrait, PaginatorTrait};
use serde_json::json;

use super::{Setup, created, deliver, now_s, setup, signed, spawn_delivery};
use crate::{db_test, fixtures::*, support::TestDb};

fn reminder_event(kind: &str, id: &str, occurred: &str) -> Vec<u8> {
    json!({"type": kind, "occurred_at": occurred, "data": {"reminder_id": id}}).to_string().into_bytes()
}

async fn reminder_status(t: &TestDb, id: &str) -> String {
    let a = domain::registry::tenants::get(&t.db, &admin(), &"clinic-a".parse().unwrap()).await.unwrap();
    reminder::Entity::find_by_id((a.id, id.to_owned())).one(&t.db).await.unwrap().unwrap().status.as_str().to_owned()
}

db_test!(late_and_post_cancel_transitions_apply_nothing_and_say_so, async |t: &TestDb| {
    let s = setup(t, Scheme::StandardWebhooks, None).await;
    let send = |body: Vec<u8>, id: &'static str| {
        let s = &s;
        async move { deliver(s, &signed(s, Scheme::StandardWebhooks, &body, now_s(), id), &body).await }
    };
    let created = json!({
        "type": "reminder.created",
        "occurred_at": "2027-01-01T08:00:00Z",
        "data": {"reminder_id": "r-1", "send_at": "2027-01-05T09:00:00Z"},
    });
    assert!(matches!(send(created.to_string().into_bytes(), "e1").await, Outcome::Applied { .. }));
    assert!(matches!(
        send(reminder_event("reminder.scheduled", "r-1", "2027-01-01T10:00:00Z"), "e2").await,
        Outcome::Applied { .. }
    ));
    // A `scheduled` that happened before the state it would replace arrives late.
    let late = send(reminder_event("reminder.scheduled", "r-1", "2027-01-01T09:00:00Z"), "e3").await;
    assert_eq!(late, Outcome::StaleTransition { event_id: "e3".into() });
    assert_eq!(late.status(), 200);
    assert_eq!(late.body()["status"], "stale_transition");
    assert_eq!(outbox_intent::Entity::find().count(&t.db).await.unwrap(), 1, "no notice for the stale one");
    // Canceled is terminal: a newer `scheduled` after it applies nothing either.
    assert!(matches!(
        send(reminder_event("reminder.canceled", "r-1", "2027-01-01T11:00:00Z"), "e4").await,
        Outcome::Applied { .. }
    ));
    let revived = send(reminder_event("reminder.scheduled", "r-1", "2027-01-01T12:00:00Z"), "e5").await;
    assert_eq!(revived, Outcome::StaleTransition { event_id: "e5".into() });
    assert_eq!(reminder_status(t, "r-1").await, "canceled");
    assert_eq!(outbox_intent::Entity::find().count(&t.db).await.unwrap(), 1, "a cancelled reminder mints no notice");
    assert_eq!(
        send(reminder_event("reminder.canceled", "r-1", "2027-01-01T13:00:00Z"), "e6").await,
        Outcome::StaleTransition { event_id: "e6".into() }
    );
    // Recorded as their own outcome: a retry is a duplicate of it.
    let body = reminder_event("reminder.scheduled", "r-1", "2027-01-01T12:00:00Z");
    let again = deliver(&s, &signed(&s, Scheme::StandardWebhooks, &body, now_s() + 1, "e5"), &body).await;
    assert_eq!(again, Outcome::Duplicate { event_id: "e5".into(), original: ClaimOutcome::StaleTransition });
    let stale = inbox_claim::Entity::find()
        .all(&t.db)
        .await
        .unwrap()
        .into_iter()
        .filter(|c| c.outcome.as_str() == "stale_transition")
        .count();
    assert_eq!(stale, 3);
    // Visible to on-call: the events list filters by that outcome.
    let listed =
        domain::events::list_events(&t.db, &oncall(), &"clinic-a".parse().unwrap(), Some("stale_transition"), 100)
            .await
            .unwrap();
    let mut ids: Vec<&str> = listed.iter().map(|e| e.event_id.as_str()).collect();
    ids.sort();
    assert_eq!(ids, ["e3", "e5", "e6"]);
    assert!(listed.iter().all(|e| e.outcome.as_str() == "stale_transition"));
    // Without `occurred_at`, the signed timestamps order nothing (issue 23
    // item 6; `ordering.rs` has the contradicting cases): creation is no
    // transition, so the first one applies, and one that agrees with the
    // state applies too, however early it was signed.
    let created2 = created_at_ts(t, &s, "r-2", now_s()).await;
    assert!(matches!(created2, Outcome::Applied { .. }));
    let body = json!({"type": "reminder.scheduled", "data": {"reminder_id": "r-2"}}).to_string().into_bytes();
    let first = deliver(&s, &signed(&s, Scheme::StandardWebhooks, &body, now_s() - 60, "e7"), &body).await;
    assert!(matches!(first, Outcome::Applied { .. }), "{first:?}");
    let signed_earlier = deliver(&s, &signed(&s, Scheme::StandardWebhooks, &body, now_s() - 120, "e8"), &body).await;
    assert!(matches!(signed_earlier, Outcome::Applied { .. }), "{signed_earlier:?}");
    let newer = deliver(&s, &signed(&s, Scheme::StandardWebhooks, &body, now_s(), "e9"), &body).await;
    assert!(matches!(newer, Outcome::Applied { .. }));
});

async fn created_at_ts(_t: &TestDb, s: &Setup, id: &str, ts: i64) -> Outcome {
    let body = created(id);
    deliver(s, &signed(s, Scheme::StandardWebhooks, &body, ts, &format!("c-{id}")), &body).await
}

db_test!(events_without_an_id_are_quarantined_unless_a_compound_key_names_them, async |t: &TestDb| {
    let s = setup(t, Scheme::Stripe, None).await;
    let body = |id: &str, occurred: &str| {
        json!({
            "type": "reminder.created",
            "occurred_at": occurred,
            "data": {"reminder_id": id, "send_at": "2027-01-05T09:00:00Z"},
        })
        .to_string()
        .into_bytes()
    };
    let b1 = body("r-1", "2027-01-01T08:00:00Z");
    let o = deliver(&s, &signed(&s, Scheme::Stripe, &b1, now_s(), ""), &b1).await;
    assert!(matches!(&o, Outcome::Quarantined { reason, .. } if reason.as_str() == "missing_event_id"), "{o:?}");
    assert_eq!(reminder::Entity::find().count(&t.db).await.unwrap(), 0, "never applied on a body hash");
    // The same request again is a replay; the same bytes signed anew are
    // kept as an event of their own (identical bodies can be two events).
    let h1 = signed(&s, Scheme::Stripe, &b1, now_s() + 1, "");
    assert!(matches!(deliver(&s, &h1, &b1).await, Outcome::Quarantined { .. }));
    assert_eq!(deliver(&s, &h1, &b1).await, Outcome::Refused(Refusal::Replay));
    assert_eq!(
        quarantine_entry::Entity::find().count(&t.db).await.unwrap(),
        2,
        "each copy is kept for on-call to decide"
    );
    // The endpoint opts in to a documented compound key.
    let fields = vec!["type".to_owned(), "data.reminder_id".to_owned(), "occurred_at".to_owned()];
    let key = domain::registry::event_key::set(
        &t.db,
        &admin(),
        &"clinic-a".parse().unwrap(),
        &"hooks".parse().unwrap(),
        Some(fields.clone()),
        "the sender documents these as unique",
    )
    .await
    .unwrap();
    assert_eq!(key.fields.as_ref(), Some(&fields));
    assert_eq!(key.history.len(), 1);
    assert!(matches!(
        domain::registry::event_key::set(
            &t.db,
            &admin(),
            &"clinic-a".parse().unwrap(),
            &"hooks".parse().unwrap(),
            Some(fields.clone()),
            "again"
        )
        .await,
        Err(DomainError::Invalid { code: "nothing_to_change", .. })
    ));
    assert!(matches!(
        domain::registry::event_key::set(
            &t.db,
            &admin(),
            &"clinic-a".parse().unwrap(),
            &"hooks".parse().unwrap(),
            None,
            ""
        )
        .await,
        Err(DomainError::Invalid { .. })
    ));
    let s = Setup {
        r: Arc::new(Receiver::new(t.db.clone(), t.vault.clone(), domain::receiver::faults::Faults::default())),
        ..s
    };
    let b2 = body("r-2", "2027-01-01T08:00:00Z");
    let applied = deliver(&s, &signed(&s, Scheme::Stripe, &b2, now_s(), ""), &b2).await;
    assert_eq!(applied, Outcome::Applied { event_id: "key:reminder.created|r-2|2027-01-01T08:00:00Z".into() });
    let dup = deliver(&s, &signed(&s, Scheme::Stripe, &b2, now_s() + 1, ""), &b2).await;
    assert!(matches!(dup, Outcome::Duplicate { original: ClaimOutcome::Applied, .. }), "{dup:?}");
    // The key is versioned and audited; removing it quarantines again.
    let removed = domain::registry::event_key::set(
        &t.db,
        &admin(),
        &"clinic-a".parse().unwrap(),
        &"hooks".parse().unwrap(),
        None,
        "sender now sends ids",
    )
    .await
    .unwrap();
    assert_eq!(removed.fields, None);
    assert_eq!(removed.history.iter().map(|v| v.version).collect::<Vec<_>>(), vec![2, 1]);
    assert_eq!(audit_entries(t, "endpoint.event_key").await.len(), 2);
    // Only those who manage the endpoint change it.
    assert!(matches!(
        domain::registry::event_key::set(
            &t.db,
            &reviewer(),
            &"clinic-a".parse().unwrap(),
            &"hooks".parse().unwrap(),
            Some(fields),
            "x"
        )
        .await,
        Err(DomainError::Forbidden)
    ));
});

// Transitions of one reminder racing each other, from two receivers (two
// instances) at once: each is one conditional UPDATE, so whatever order the
// transactions commit in, the newest `scheduled` is the state, a `canceled`
// among them wins for good, and a notice is minted exactly for each
// `scheduled` that applied.
db_test!(racing_transitions_end_in_the_state_the_rules_give, async |t: &TestDb| {
    let first = setup(t, Scheme::StandardWebhooks, None).await;
    let second = Arc::new(Setup {
        r: Arc::new(Receiver::new(t.db.clone(), t.vault.clone(), domain::receiver::faults::Faults::default())),
        secret: SigningSecret::parse(first.secret.expose()).unwrap(),
        key_id: first.key_id.clone(),
    });
    let first = Arc::new(first);
    for round in 0..6 {
        let id = format!("r-{round}");
        assert!(matches!(created_at_ts(t, &first, &id, now_s()).await, Outcome::Applied { .. }));
        let with_cancel = round % 2 == 1;
        let notices_before = outbox_intent::Entity::find().count(&t.db).await.unwrap();
        let mut tasks = Vec::new();
        // Eight `scheduled`, sent newest first, so most arrive after a newer one.
        for minute in (1..=8).rev() {
            let body = reminder_event("reminder.scheduled", &id, &format!("2027-01-01T10:{minute:02}:00Z"));
            let s = if minute % 2 == 0 { &first } else { &second };
            let h = signed(s, Scheme::StandardWebhooks, &body, now_s(), &format!("s-{round}-{minute}"));
            tasks.push(("scheduled", minute, spawn_delivery(s, body, h)));
        }
        if with_cancel {
            let body = reminder_event("reminder.canceled", &id, "2027-01-01T10:04:30Z");
            let h = signed(&second, Scheme::StandardWebhooks, &body, now_s(), &format!("c-{round}"));
            tasks.push(("canceled", 0, spawn_delivery(&second, body, h)));
        }
        let mut scheduled_applied = 0;
        for (kind, minute, task) in tasks {
            match (kind, task.await.unwrap()) {
                ("scheduled", Outcome::Applied { .. }) => scheduled_applied += 1,
                ("scheduled", Outcome::StaleTransition { .. }) => {
                    assert!(with_cancel || minute < 8, "the newest `scheduled` always applies")
                }
                ("canceled", Outcome::Applied { .. }) => {}
                (kind, other) => panic!("round {round}: {kind} answered {other:?}"),
            }
        }
        let a = domain::registry::tenants::get(&t.db, &admin(), &"clinic-a".parse().unwrap()).await.unwrap();
        let row = reminder::Entity::find_by_id((a.id, id.clone())).one(&t.db).await.unwrap().unwrap();
        let newest = clock::parse_rfc3339("2027-01-01T10:08:00Z").unwrap();
        if with_cancel {
            assert_eq!(row.status.as_str(), "canceled", "round {round}: a `scheduled` applied over the cancellation");
        } else {
            assert_eq!(
                (row.status.as_str(), row.state_at),
                ("scheduled", Some(newest)),
                "round {round}: the state is not the newest `scheduled`"
            );
        }
        let notices = outbox_intent::Entity::find().count(&t.db).await.unwrap() - notices_before;
        assert_eq!(
            notices, scheduled_applied,
            "round {round}: one notice per applied `scheduled`, none for a stale one"
        );
    }
});
