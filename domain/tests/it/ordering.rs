//! Reminder transitions are ordered by the sender, never by delivery time
//! (issue 23 item 6; docs/architecture.md#replays-order-and-retention), on both
//! engines: without an `occurred_at`, a transition that contradicts a state
//! applied since creation is quarantined as `ambiguous_order` (202, nothing
//! applied, its duplicate a duplicate); a non-contradicting one applies; an
//! `occurred_at` orders as before; release of an ambiguous entry is on-call's
//! ordering decision; discard works.

use domain::{
    DomainError,
    entity::{inbox_claim, outbox_intent, quarantine_entry, reminder},
    quarantine,
    receiver::Outcome,
};
use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter};
use serde_json::{Value, json};
use views::{
    events::ClaimOutcome,
    quarantine::{QuarantineFilter, QuarantineReason},
    scheme::Scheme,
};

use crate::{
    db_test,
    fixtures::*,
    receiver::{Setup, created, deliver, now_s, setup, signed},
    support::TestDb,
};

/// A `reminder.scheduled` for `r`, with `send_at` and `occurred_at` when given.
fn scheduled(r: &str, send_at: Option<&str>, occurred: Option<&str>) -> Vec<u8> {
    let mut body = json!({"type": "reminder.scheduled", "data": {"reminder_id": r}});
    if let Some(at) = send_at {
        body["data"]["send_at"] = Value::from(at);
    }
    if let Some(at) = occurred {
        body["occurred_at"] = Value::from(at);
    }
    body.to_string().into_bytes()
}

fn canceled(r: &str) -> Vec<u8> {
    json!({"type": "reminder.canceled", "data": {"reminder_id": r}}).to_string().into_bytes()
}

/// Delivers `body` as event `msg`, signed `age` seconds ago.
async fn send_signed(s: &Setup, body: &[u8], msg: &str, age: i64) -> Outcome {
    deliver(s, &signed(s, Scheme::StandardWebhooks, body, now_s() - age, msg), body).await
}

async fn row(t: &TestDb, r: &str) -> reminder::Model {
    let a = domain::registry::tenants::get(&t.db, &admin(), &"clinic-a".parse().unwrap()).await.unwrap();
    reminder::Entity::find_by_id((a.id, r.to_owned())).one(&t.db).await.unwrap().unwrap()
}

async fn notices(t: &TestDb) -> u64 {
    outbox_intent::Entity::find().count(&t.db).await.unwrap()
}

async fn claim_outcome(t: &TestDb, event_id: &str) -> String {
    inbox_claim::Entity::find()
        .filter(inbox_claim::Column::EventId.eq(event_id))
        .one(&t.db)
        .await
        .unwrap()
        .unwrap()
        .outcome
        .as_str()
        .to_owned()
}

async fn entry_id(t: &TestDb, event_id: &str) -> String {
    all_quarantined(t).await.into_iter().find(|q| q.event_id == event_id).expect("quarantined").id
}

fn ambiguous(event_id: &str) -> Outcome {
    Outcome::Quarantined { event_id: event_id.into(), reason: QuarantineReason::AmbiguousOrder }
}

db_test!(a_transition_without_occurred_at_that_contradicts_a_later_state_is_quarantined, async |t: &TestDb| {
    let s = setup(t, Scheme::StandardWebhooks, None).await;
    assert!(matches!(send_signed(&s, &created("r-1"), "c-1", 0).await, Outcome::Applied { .. }));
    // The first transition contradicts nothing applied since creation.
    let newer = scheduled("r-1", Some("2027-01-06T09:00:00Z"), None);
    assert!(matches!(send_signed(&s, &newer, "s-new", 60).await, Outcome::Applied { .. }));
    let before = row(t, "r-1").await;
    assert_eq!(before.send_at, domain::clock::parse_rfc3339("2027-01-06T09:00:00Z").unwrap());
    assert_eq!(
        (before.state_order.map(|o| o.as_str()), before.state_at),
        (Some("none"), None),
        "no delivery time kept"
    );
    let notices_before = notices(t).await;
    // A re-signed retry of an older `scheduled` (the creation's send time),
    // signed after the newer one: its delivery time says nothing.
    let older = scheduled("r-1", Some("2027-01-05T09:00:00Z"), None);
    let out = send_signed(&s, &older, "s-old", 0).await;
    assert_eq!(out, ambiguous("s-old"));
    assert_eq!(out.status(), 202);
    assert_eq!(out.body(), json!({"status": "quarantined", "reason": "ambiguous_order"}));
    assert_eq!(row(t, "r-1").await, before, "never applied: the reminder row is unchanged");
    assert_eq!(notices(t).await, notices_before, "no notice minted");
    assert_eq!(claim_outcome(t, "s-old").await, "quarantined");
    let entry = quarantine::get(&t.db, &oncall(), &entry_id(t, "s-old").await).await.unwrap();
    assert_eq!((entry.reason.as_str(), entry.status.as_str()), ("ambiguous_order", "open"));
    // Listed under its reason for triage.
    let filter = QuarantineFilter { reason: Some("ambiguous_order".into()), ..Default::default() };
    let listed = quarantine::list(&t.db, &oncall(), &parsed(filter)).await.unwrap();
    assert_eq!(listed.total, 1);
    assert_eq!(listed.items[0].event_id, "s-old");
    // The provider's retry of it is a duplicate of the quarantined event.
    let again = send_signed(&s, &older, "s-old", -1).await;
    assert_eq!(again, Outcome::Duplicate { event_id: "s-old".into(), original: ClaimOutcome::Quarantined });
    assert_eq!(again.status(), 200);
    assert_eq!(quarantine_entry::Entity::find().count(&t.db).await.unwrap(), 1);
    assert_eq!(row(t, "r-1").await, before);
    // Non-contradicting ones apply: the same send time, no send time, and a
    // cancellation (terminal, so the last transition in either order).
    let same = scheduled("r-1", Some("2027-01-06T09:00:00Z"), None);
    assert!(matches!(send_signed(&s, &same, "s-same", 0).await, Outcome::Applied { .. }));
    let bare = scheduled("r-1", None, None);
    assert!(matches!(send_signed(&s, &bare, "s-bare", 0).await, Outcome::Applied { .. }));
    assert_eq!(notices(t).await, notices_before + 2, "a notice for each applied `scheduled`");
    assert_eq!(row(t, "r-1").await.send_at, before.send_at);
    assert!(matches!(send_signed(&s, &canceled("r-1"), "x-1", 0).await, Outcome::Applied { .. }));
    assert_eq!(row(t, "r-1").await.status.as_str(), "canceled");
    // After a cancellation a `scheduled` is refused by the terminal rule,
    // which holds in any order: a stale transition, not an ambiguity.
    let late = scheduled("r-1", Some("2027-01-07T09:00:00Z"), None);
    assert_eq!(send_signed(&s, &late, "s-late", 0).await, Outcome::StaleTransition { event_id: "s-late".into() });
    assert_eq!(row(t, "r-1").await.status.as_str(), "canceled");
});

db_test!(a_transition_with_occurred_at_is_ordered_by_it, async |t: &TestDb| {
    let s = setup(t, Scheme::StandardWebhooks, None).await;
    assert!(matches!(send_signed(&s, &created("r-1"), "c-1", 0).await, Outcome::Applied { .. }));
    let newer = scheduled("r-1", Some("2027-01-06T09:00:00Z"), Some("2027-01-01T10:00:00Z"));
    assert!(matches!(send_signed(&s, &newer, "s-new", 60).await, Outcome::Applied { .. }));
    let before = row(t, "r-1").await;
    assert_eq!(before.state_order.map(|o| o.as_str()), Some("occurred_at"));
    assert_eq!(before.state_at, domain::clock::parse_rfc3339("2027-01-01T10:00:00Z"));
    // An older one, signed after the newer one, does not override it.
    let older = scheduled("r-1", Some("2027-01-05T09:00:00Z"), Some("2027-01-01T09:00:00Z"));
    assert_eq!(send_signed(&s, &older, "s-old", 0).await, Outcome::StaleTransition { event_id: "s-old".into() });
    assert_eq!(row(t, "r-1").await, before, "the older one changed nothing");
    // A newer one, signed before the others, applies.
    let newest = scheduled("r-1", Some("2027-01-07T09:00:00Z"), Some("2027-01-01T11:00:00Z"));
    assert!(matches!(send_signed(&s, &newest, "s-newest", 120).await, Outcome::Applied { .. }));
    assert_eq!(row(t, "r-1").await.send_at, domain::clock::parse_rfc3339("2027-01-07T09:00:00Z").unwrap());
    // An unordered one that contradicts that ordered state is ambiguous too.
    let unordered = scheduled("r-1", Some("2027-01-08T09:00:00Z"), None);
    let before = row(t, "r-1").await;
    assert_eq!(send_signed(&s, &unordered, "s-unordered", 0).await, ambiguous("s-unordered"));
    assert_eq!(row(t, "r-1").await, before);

    // A state set without order cannot be compared with an `occurred_at`:
    // an ordered transition that contradicts it is ambiguous; one that
    // agrees with it applies and orders what comes after.
    assert!(matches!(send_signed(&s, &created("r-2"), "c-2", 0).await, Outcome::Applied { .. }));
    let unordered = scheduled("r-2", Some("2027-01-06T09:00:00Z"), None);
    assert!(matches!(send_signed(&s, &unordered, "u-1", 0).await, Outcome::Applied { .. }));
    let before = row(t, "r-2").await;
    let contradicting = scheduled("r-2", Some("2027-01-09T09:00:00Z"), Some("2027-01-01T12:00:00Z"));
    assert_eq!(send_signed(&s, &contradicting, "o-1", 0).await, ambiguous("o-1"));
    assert_eq!(row(t, "r-2").await, before);
    let agreeing = scheduled("r-2", Some("2027-01-06T09:00:00Z"), Some("2027-01-01T12:00:00Z"));
    assert!(matches!(send_signed(&s, &agreeing, "o-2", 0).await, Outcome::Applied { .. }));
    assert_eq!(row(t, "r-2").await.state_order.map(|o| o.as_str()), Some("occurred_at"));
    let older = scheduled("r-2", Some("2027-01-09T09:00:00Z"), Some("2027-01-01T11:00:00Z"));
    assert_eq!(send_signed(&s, &older, "o-3", 0).await, Outcome::StaleTransition { event_id: "o-3".into() });
});

db_test!(releasing_an_ambiguous_order_entry_applies_it_and_discard_works, async |t: &TestDb| {
    let s = setup(t, Scheme::StandardWebhooks, None).await;
    assert!(matches!(send_signed(&s, &created("r-1"), "c-1", 0).await, Outcome::Applied { .. }));
    let first = scheduled("r-1", Some("2027-01-06T09:00:00Z"), None);
    assert!(matches!(send_signed(&s, &first, "s-1", 0).await, Outcome::Applied { .. }));
    let second = scheduled("r-1", Some("2027-01-07T09:00:00Z"), None);
    assert_eq!(send_signed(&s, &second, "s-2", 0).await, ambiguous("s-2"));
    let third = scheduled("r-1", Some("2027-01-08T09:00:00Z"), None);
    assert_eq!(send_signed(&s, &third, "s-3", 0).await, ambiguous("s-3"));
    let notices_before = notices(t).await;
    // On-call decides s-2 is the newest: releasing it applies it, once.
    let id = entry_id(t, "s-2").await;
    let released = quarantine::release(&t.db, &t.vault, &oncall(), &id, "the clinic confirms 7 Jan").await.unwrap();
    assert_eq!(released.status.as_str(), "released");
    let r = row(t, "r-1").await;
    assert_eq!(r.send_at, domain::clock::parse_rfc3339("2027-01-07T09:00:00Z").unwrap());
    assert_eq!(r.state_order.map(|o| o.as_str()), Some("none"));
    assert_eq!(claim_outcome(t, "s-2").await, "applied");
    assert_eq!(notices(t).await, notices_before + 1);
    let again = quarantine::release(&t.db, &t.vault, &oncall(), &id, "again").await;
    assert!(matches!(again, Err(DomainError::Conflict { code: "already_resolved", .. })), "{again:?}");
    // s-3 is discarded: nothing applies, the claim stays, a retry is a duplicate.
    let id3 = entry_id(t, "s-3").await;
    let discarded = quarantine::discard(&t.db, &oncall(), &id3, "superseded").await.unwrap();
    assert_eq!(discarded.status.as_str(), "discarded");
    assert_eq!(row(t, "r-1").await, r);
    let retry = send_signed(&s, &third, "s-3", -1).await;
    assert_eq!(retry, Outcome::Duplicate { event_id: "s-3".into(), original: ClaimOutcome::Quarantined });

    // An entry quarantined for another reason meets the order rules at
    // release: the ambiguity fails the release and says so; releasing it
    // again is on-call's decision, and applies it.
    let early = scheduled("r-2", Some("2027-01-06T09:00:00Z"), None);
    assert!(matches!(send_signed(&s, &early, "e-1", 0).await, Outcome::Quarantined { .. }));
    assert!(matches!(send_signed(&s, &created("r-2"), "c-2", 0).await, Outcome::Applied { .. }));
    let moved = scheduled("r-2", Some("2027-01-09T09:00:00Z"), None);
    assert!(matches!(send_signed(&s, &moved, "e-2", 0).await, Outcome::Applied { .. }));
    let id = entry_id(t, "e-1").await;
    let failed = quarantine::release(&t.db, &t.vault, &oncall(), &id, "reminder exists now").await;
    assert!(
        matches!(&failed, Err(DomainError::Conflict { code: "release_failed", message })
            if message.contains("ambiguous_order")),
        "{failed:?}"
    );
    let entry = quarantine::get(&t.db, &oncall(), &id).await.unwrap();
    assert_eq!((entry.status.as_str(), entry.last_release_error.as_deref()), ("open", Some("ambiguous_order")));
    assert_eq!(row(t, "r-2").await.send_at, domain::clock::parse_rfc3339("2027-01-09T09:00:00Z").unwrap());
    quarantine::release(&t.db, &t.vault, &oncall(), &id, "6 Jan is the newest").await.unwrap();
    assert_eq!(row(t, "r-2").await.send_at, domain::clock::parse_rfc3339("2027-01-06T09:00:00Z").unwrap());
    // Release still never revives a cancelled reminder.
    assert!(matches!(send_signed(&s, &canceled("r-2"), "e-3", 0).await, Outcome::Applied { .. }));
    let revive = scheduled("r-2", Some("2027-01-10T09:00:00Z"), None);
    assert!(matches!(send_signed(&s, &revive, "e-4", 0).await, Outcome::StaleTransition { .. }));
});
