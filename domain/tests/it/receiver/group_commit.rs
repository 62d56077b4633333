//! Group commit: deliveries that queue while the claim workers are busy
//! share a transaction, and each is still applied exactly once.

use std::sync::Arc;

use domain::{
    entity::{inbox_claim, quarantine_entry, reminder},
    receiver::{Outcome, Refusal},
};
use sea_orm::{EntityTrait, PaginatorTrait};
use serde_json::json;
use views::scheme::Scheme;

use super::{Setup, created, now_s, setup, signed, spawn_delivery, stalling};
use crate::{db_test, support::TestDb};

/// Four deliveries that keep the claim workers busy (stalled) for a while,
/// so that what is delivered next queues up behind them.
async fn occupy_workers(s: &Arc<Setup>) -> Vec<tokio::task::JoinHandle<Outcome>> {
    let tasks = (0..4)
        .map(|i| {
            let body = created(&format!("first-{i}"));
            let h = signed(s, Scheme::StandardWebhooks, &body, now_s(), &format!("f{i}"));
            spawn_delivery(s, body, h)
        })
        .collect();
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    tasks
}

// Group commit: deliveries that queue while the workers are busy share a
// transaction, and each is still applied exactly once.
db_test!(deliveries_that_queue_share_a_claim_transaction, async |t: &TestDb| {
    let s = stalling(t, setup(t, Scheme::StandardWebhooks, None).await, 300);
    let tasks: Vec<_> = (0..48)
        .map(|i| {
            let body = created(&format!("r-{i}"));
            let h = signed(&s, Scheme::StandardWebhooks, &body, now_s(), &format!("m{i}"));
            spawn_delivery(&s, body, h)
        })
        .collect();
    for task in tasks {
        assert!(matches!(task.await.unwrap(), Outcome::Applied { .. }));
    }
    assert_eq!(reminder::Entity::find().count(&t.db).await.unwrap(), 48);
    assert_eq!(inbox_claim::Entity::find().count(&t.db).await.unwrap(), 48);
    let stats = s.r.batch_stats();
    let (batches, events) = (
        stats.batches.load(std::sync::atomic::Ordering::Relaxed),
        stats.events.load(std::sync::atomic::Ordering::Relaxed),
    );
    assert_eq!(events, 48);
    assert!(batches < 48 / 2, "48 queued deliveries took {batches} transactions");
});

// One event in a shared transaction whose effect cannot apply: it is
// quarantined on its own, and the events queued with it still apply once.
db_test!(a_poison_event_in_a_shared_transaction_quarantines_alone, async |t: &TestDb| {
    let s = stalling(t, setup(t, Scheme::StandardWebhooks, None).await, 200);
    // Occupy the workers, then queue eight deliveries behind them.
    let mut tasks = occupy_workers(&s).await;
    for i in 0..8 {
        let body = if i == 3 {
            json!({"type": "reminder.canceled", "data": {"reminder_id": "missing"}}).to_string().into_bytes()
        } else {
            created(&format!("r-{i}"))
        };
        let h = signed(&s, Scheme::StandardWebhooks, &body, now_s(), &format!("m{i}"));
        tasks.push(spawn_delivery(&s, body, h));
    }
    let mut applied = 0;
    for task in tasks {
        match task.await.unwrap() {
            Outcome::Applied { .. } => applied += 1,
            Outcome::Quarantined { event_id, reason } => {
                assert_eq!((event_id.as_str(), reason.as_str()), ("m3", "reminder_not_found"))
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(applied, 11);
    assert_eq!(reminder::Entity::find().count(&t.db).await.unwrap(), 11);
    assert_eq!(inbox_claim::Entity::find().count(&t.db).await.unwrap(), 12);
    assert_eq!(quarantine_entry::Entity::find().count(&t.db).await.unwrap(), 1);
});

// The same signed message twice in one queue: one applies, the other is a
// replay (it leaves the shared transaction and meets the first one's
// replay record). A re-signed duplicate in the same queue is a duplicate.
db_test!(a_message_and_its_replay_queued_together_apply_once, async |t: &TestDb| {
    let s = stalling(t, setup(t, Scheme::StandardWebhooks, None).await, 200);
    let first = occupy_workers(&s).await;
    let body = created("r-1");
    let h = signed(&s, Scheme::StandardWebhooks, &body, now_s(), "m1");
    let resigned = signed(&s, Scheme::StandardWebhooks, &body, now_s() + 1, "m1");
    let same = [
        spawn_delivery(&s, body.clone(), h.clone()),
        spawn_delivery(&s, body.clone(), h),
        spawn_delivery(&s, body, resigned),
    ];
    for task in first {
        assert!(matches!(task.await.unwrap(), Outcome::Applied { .. }));
    }
    let mut outcomes = Vec::new();
    for task in same {
        outcomes.push(match task.await.unwrap() {
            Outcome::Applied { .. } => "applied",
            Outcome::Duplicate { .. } => "duplicate",
            Outcome::Refused(Refusal::Replay) => "replay",
            other => panic!("unexpected {other:?}"),
        });
    }
    outcomes.sort();
    assert_eq!(outcomes, ["applied", "duplicate", "replay"]);
    assert_eq!(reminder::Entity::find().count(&t.db).await.unwrap(), 5);
    assert_eq!(inbox_claim::Entity::find().count(&t.db).await.unwrap(), 5);
});
