//! The pipeline against real databases: gates, exactly-once claims under
//! concurrency, quarantine and outbox intents.

use std::sync::Arc;

use domain::{
    DomainError, clock,
    crypto::{SigningSecret, signature},
    entity::{inbox_claim, outbox_intent, quarantine_entry, reminder, replay_record},
    receiver::{self, ClaimOutcome, Outcome, Receiver, Refusal, faults::Faults},
    registry::{
        Scheme,
        endpoints::{self, NewEndpoint},
        keys::{self, Approval, ProvisionRequest},
    },
};
use sea_orm::{EntityTrait, PaginatorTrait};
use serde_json::json;

use crate::{db_test, fixtures::*, support::TestDb};

pub(crate) struct Setup {
    pub r: Arc<Receiver>,
    pub secret: SigningSecret,
    pub key_id: String,
}

pub(crate) async fn setup(t: &TestDb, scheme: Scheme, types: Option<Vec<&str>>) -> Setup {
    tenant(t, "clinic-a").await;
    endpoints::create(
        &t.db,
        &admin(),
        "clinic-a",
        NewEndpoint {
            slug: "hooks".into(),
            scheme,
            event_types: None,
            tolerance_secs: None,
            max_body_bytes: None,
            hmac_profile: None,
        },
    )
    .await
    .unwrap();
    let k = keys::provision(
        &t.db,
        &t.vault,
        &admin(),
        "clinic-a",
        "hooks",
        ProvisionRequest {
            event_types: types.map(|ts| ts.into_iter().map(str::to_owned).collect()),
            ..Default::default()
        },
        Approval::ApproveAs { reviewer: "rev".into(), comment: String::new() },
    )
    .await
    .unwrap();
    Setup {
        r: Arc::new(Receiver::new(t.db.clone(), t.vault.clone(), domain::receiver::faults::Faults::default())),
        secret: k.secret.unwrap(),
        key_id: k.key.key_id,
    }
}

pub(crate) fn signed(s: &Setup, scheme: Scheme, body: &[u8], ts: i64, id: &str) -> Vec<(String, String)> {
    signature::sign(scheme, &s.secret, body, ts, id).unwrap()
}

pub(crate) async fn deliver(s: &Setup, headers: &[(String, String)], body: &[u8]) -> Outcome {
    let h: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let delivery = receiver::Buffered { headers: &h[..], body: bytes::Bytes::copy_from_slice(body) };
    receiver::receive(&s.r, "clinic-a", "hooks", delivery).await.outcome
}

pub(crate) fn now_s() -> i64 {
    clock::now_ms() / 1000
}

pub(crate) fn created(id: &str) -> Vec<u8> {
    json!({"type": "reminder.created", "data": {"reminder_id": id, "send_at": "2027-01-05T09:00:00Z"}})
        .to_string()
        .into_bytes()
}

db_test!(applies_once_and_duplicates_repeat_nothing, async |t: &TestDb| {
    let s = setup(t, Scheme::StandardWebhooks, None).await;
    let body = created("r-1");
    let first = deliver(&s, &signed(&s, Scheme::StandardWebhooks, &body, now_s(), "msg_1"), &body).await;
    assert_eq!(first, Outcome::Applied { event_id: "msg_1".into() });
    // A provider retry re-signs with a fresh timestamp.
    let again = deliver(&s, &signed(&s, Scheme::StandardWebhooks, &body, now_s() + 1, "msg_1"), &body).await;
    assert_eq!(again, Outcome::Duplicate { event_id: "msg_1".into(), original: ClaimOutcome::Applied });
    // The exact same signed message again is a replay.
    let h = signed(&s, Scheme::StandardWebhooks, &body, now_s() + 2, "msg_1");
    deliver(&s, &h, &body).await;
    assert_eq!(deliver(&s, &h, &body).await, Outcome::Refused(Refusal::Replay));
    // Same id, different body: identity conflict, nothing overwritten.
    let other = created("r-2");
    let conflict = deliver(&s, &signed(&s, Scheme::StandardWebhooks, &other, now_s(), "msg_1"), &other).await;
    assert_eq!(conflict, Outcome::IdentityConflict { event_id: "msg_1".into() });
    assert_eq!(reminder::Entity::find().count(&t.db).await.unwrap(), 1);
    assert_eq!(inbox_claim::Entity::find().count(&t.db).await.unwrap(), 1);
});

db_test!(refusals_store_nothing, async |t: &TestDb| {
    let s = setup(t, Scheme::StandardWebhooks, Some(vec!["reminder.created"])).await;
    let body = created("r-1");
    let good = signed(&s, Scheme::StandardWebhooks, &body, now_s(), "msg_1");
    let wrong_secret =
        signature::sign(Scheme::StandardWebhooks, &SigningSecret::generate(), &body, now_s(), "msg_1").unwrap();
    assert_eq!(deliver(&s, &wrong_secret, &body).await, Outcome::Refused(Refusal::SignatureMismatch));
    assert_eq!(deliver(&s, &good[..2], &body).await, Outcome::Refused(Refusal::SignatureMissing));
    let mut bad = good.clone();
    bad[2].1 = "v1,@@@".into();
    assert_eq!(deliver(&s, &bad, &body).await, Outcome::Refused(Refusal::SignatureMalformed));
    let stale = signed(&s, Scheme::StandardWebhooks, &body, now_s() - 310, "msg_1");
    assert_eq!(deliver(&s, &stale, &body).await, Outcome::Refused(Refusal::TimestampStale));
    let future = signed(&s, Scheme::StandardWebhooks, &body, now_s() + 310, "msg_1");
    assert_eq!(deliver(&s, &future, &body).await, Outcome::Refused(Refusal::TimestampFuture));
    let otp =
        json!({"type": "otp.requested", "data": {"otp_request_id": "o1", "channel": "sms"}}).to_string().into_bytes();
    let h = signed(&s, Scheme::StandardWebhooks, &otp, now_s(), "msg_2");
    assert_eq!(deliver(&s, &h, &otp).await, Outcome::Refused(Refusal::EventTypeNotPermitted));
    let foreign = json!({
        "type": "reminder.created",
        "tenant": "clinic-b",
        "data": {"reminder_id": "x", "send_at": "2027-01-05T09:00:00Z"},
    })
    .to_string()
    .into_bytes();
    let h = signed(&s, Scheme::StandardWebhooks, &foreign, now_s(), "msg_3");
    assert_eq!(deliver(&s, &h, &foreign).await, Outcome::Refused(Refusal::TenantMismatch));
    // A key id outside the accepted set.
    let naming = |key_id: &str| {
        let mut hp: Vec<(&str, &str)> = good.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        hp.push(("signet-key-id", key_id));
        hp.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<Vec<_>>()
    };
    let receive = async |headers: Vec<(String, String)>| {
        let hp: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let delivery = receiver::Buffered { headers: &hp[..], body: bytes::Bytes::from(body.clone()) };
        let receipt = receiver::receive(&s.r, "clinic-a", "hooks", delivery).await;
        (receipt.outcome, receipt.key_id)
    };
    let (o, _) = receive(naming("key_other")).await;
    assert_eq!(o, Outcome::Refused(Refusal::UnknownKey));
    let (o, key) = receive(naming(&s.key_id)).await;
    assert!(matches!(o, Outcome::Applied { .. }), "{o:?}");
    assert_eq!(key.as_deref(), Some(s.key_id.as_str()));
    // Unknown endpoint.
    assert!(matches!(s.r.resolve("clinic-a", "nope").await, Err(Outcome::Refused(Refusal::UnknownEndpoint))));
    assert!(matches!(s.r.resolve("nobody", "hooks").await, Err(Outcome::Refused(Refusal::UnknownEndpoint))));
    // Only the one good delivery left anything behind.
    assert_eq!(inbox_claim::Entity::find().count(&t.db).await.unwrap(), 1);
    assert_eq!(replay_record::Entity::find().count(&t.db).await.unwrap(), 1);
    assert_eq!(quarantine_entry::Entity::find().count(&t.db).await.unwrap(), 0);
});

db_test!(poison_events_go_to_quarantine_and_retries_are_duplicates, async |t: &TestDb| {
    let s = setup(t, Scheme::StandardWebhooks, None).await;
    for (id, body, reason) in [
        ("m1", b"not json at all".to_vec(), "malformed_envelope"),
        (
            "m2",
            json!({"type": "reminder.canceled", "data": {"reminder_id": "missing"}}).to_string().into_bytes(),
            "reminder_not_found",
        ),
        ("m3", json!({"type": "invoice.paid", "data": {}}).to_string().into_bytes(), "unknown_event_type"),
        (
            "m4",
            json!({"type": "reminder.created", "data": {"reminder_id": "r"}}).to_string().into_bytes(),
            "invalid_data",
        ),
    ] {
        let o = deliver(&s, &signed(&s, Scheme::StandardWebhooks, &body, now_s(), id), &body).await;
        assert_eq!(o, Outcome::Quarantined { event_id: id.into(), reason: reason.into() });
        let again = deliver(&s, &signed(&s, Scheme::StandardWebhooks, &body, now_s() + 1, id), &body).await;
        assert_eq!(again, Outcome::Duplicate { event_id: id.into(), original: ClaimOutcome::Quarantined });
    }
    assert_eq!(quarantine_entry::Entity::find().count(&t.db).await.unwrap(), 4);
    assert_eq!(reminder::Entity::find().count(&t.db).await.unwrap(), 0, "rolled back");
    // The stored body is sealed.
    for c in inbox_claim::Entity::find().all(&t.db).await.unwrap() {
        let sealed = c.body_ciphertext.unwrap();
        assert!(!String::from_utf8_lossy(&sealed).contains("reminder"));
    }
});

db_test!(github_bodies_resent_under_a_new_delivery_id_are_replays, async |t: &TestDb| {
    let s = setup(t, Scheme::Github, None).await;
    let c = created("r-9");
    assert!(matches!(deliver(&s, &signed(&s, Scheme::Github, &c, 0, "d1"), &c).await, Outcome::Applied { .. }));
    // The provider redelivering d1: a duplicate, as before.
    let again = deliver(&s, &signed(&s, Scheme::Github, &c, 0, "d1"), &c).await;
    assert_eq!(again, Outcome::Duplicate { event_id: "d1".into(), original: ClaimOutcome::Applied });
    // The same signed body under a delivery id of the sender's choosing: a replay.
    let forged = deliver(&s, &signed(&s, Scheme::Github, &c, 0, "d-forged"), &c).await;
    assert_eq!(forged, Outcome::Refused(Refusal::Replay));
    // The same on the one-event path (a quarantined body): the first is kept,
    // its redelivery is a duplicate, a new id for it is a replay.
    let poison = b"not json".to_vec();
    assert!(matches!(
        deliver(&s, &signed(&s, Scheme::Github, &poison, 0, "p1"), &poison).await,
        Outcome::Quarantined { .. }
    ));
    let again = deliver(&s, &signed(&s, Scheme::Github, &poison, 0, "p1"), &poison).await;
    assert_eq!(again, Outcome::Duplicate { event_id: "p1".into(), original: ClaimOutcome::Quarantined });
    assert_eq!(
        deliver(&s, &signed(&s, Scheme::Github, &poison, 0, "p2"), &poison).await,
        Outcome::Refused(Refusal::Replay)
    );
    // Nothing was applied twice; the replay record lasts the dedup retention.
    assert_eq!(inbox_claim::Entity::find().count(&t.db).await.unwrap(), 2);
    let kept = domain::entity::replay_record::Entity::find().all(&t.db).await.unwrap();
    assert_eq!(kept.len(), 2);
    let thirty_days = 30 * 86_400_000;
    assert!(kept.iter().all(|r| r.expires_at > domain::clock::now_ms() + thirty_days - 60_000), "{kept:?}");
});

db_test!(outbox_intents_are_written_in_the_transaction, async |t: &TestDb| {
    let s = setup(t, Scheme::Github, None).await;
    let c = created("r-1");
    assert!(matches!(deliver(&s, &signed(&s, Scheme::Github, &c, 0, "d1"), &c).await, Outcome::Applied { .. }));
    let sched = json!({"type": "reminder.scheduled", "data": {"reminder_id": "r-1"}}).to_string().into_bytes();
    assert!(matches!(deliver(&s, &signed(&s, Scheme::Github, &sched, 0, "d2"), &sched).await, Outcome::Applied { .. }));
    for (i, id) in ["d3", "d4", "d5"].into_iter().enumerate() {
        // Three events for the same OTP request: one intent, ever.
        // (Each body differs: GitHub signs the body alone, so the same body
        // under another delivery id would be a replay.)
        let channel = if i == 0 { "sms" } else { "email" };
        let otp = json!({"type": "otp.requested", "data": {"otp_request_id": "otp-7", "channel": channel, "n": i}})
            .to_string()
            .into_bytes();
        assert!(matches!(deliver(&s, &signed(&s, Scheme::Github, &otp, 0, id), &otp).await, Outcome::Applied { .. }));
    }
    let intents = outbox_intent::Entity::find().all(&t.db).await.unwrap();
    let kinds: Vec<&str> = intents.iter().map(|i| i.kind.as_str()).collect();
    assert_eq!(kinds.iter().filter(|k| **k == "otp").count(), 1);
    assert_eq!(kinds.iter().filter(|k| **k == "reminder_notice").count(), 1);
    let otp = intents.iter().find(|i| i.kind == "otp").unwrap();
    assert!(!String::from_utf8_lossy(&otp.payload_ciphertext).contains("otp-7"), "payload sealed");
});

db_test!(concurrent_deliveries_of_one_event_apply_once, async |t: &TestDb| {
    let s = Arc::new(setup(t, Scheme::StandardWebhooks, None).await);
    let body = created("r-race");
    let mut handles = Vec::new();
    // One clock reading: read per task, two tasks on either side of a second
    // boundary could sign the same timestamp, which is a true replay.
    let now = now_s();
    for i in 0..64 {
        let s = s.clone();
        let body = body.clone();
        handles.push(tokio::spawn(async move {
            // Distinct valid signatures: each attempt has its own timestamp.
            let h = signed(&s, Scheme::StandardWebhooks, &body, now - i, "msg_race");
            deliver(&s, &h, &body).await
        }));
    }
    let (mut applied, mut dup) = (0, 0);
    for h in handles {
        match h.await.unwrap() {
            Outcome::Applied { .. } => applied += 1,
            Outcome::Duplicate { original: ClaimOutcome::Applied, .. } => dup += 1,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!((applied, dup), (1, 63));
    assert_eq!(reminder::Entity::find().count(&t.db).await.unwrap(), 1);
    assert_eq!(inbox_claim::Entity::find().count(&t.db).await.unwrap(), 1);
});

db_test!(many_distinct_events_on_sixteen_workers_all_apply, async |t: &TestDb| {
    let s = Arc::new(setup(t, Scheme::Stripe, None).await);
    let mut handles = Vec::new();
    for w in 0..16 {
        let s = s.clone();
        handles.push(tokio::spawn(async move {
            let mut n = 0;
            for i in 0..(200 / 16 + 1) {
                let k = w * 13 + i;
                if k >= 200 {
                    break;
                }
                let body = json!({
                    "id": format!("evt_{k}"),
                    "type": "reminder.created",
                    "data": {"reminder_id": format!("r-{k}"), "send_at": "2027-01-05T09:00:00Z"},
                })
                .to_string()
                .into_bytes();
                let o = deliver(&s, &signed(&s, Scheme::Stripe, &body, now_s(), ""), &body).await;
                assert!(matches!(o, Outcome::Applied { .. }), "{o:?}");
                n += 1;
            }
            n
        }));
    }
    let mut total = 0;
    for h in handles {
        total += h.await.unwrap();
    }
    assert_eq!(total, 200);
    assert_eq!(reminder::Entity::find().count(&t.db).await.unwrap(), 200);
});

db_test!(revocation_takes_effect_within_the_cache_ttl, async |t: &TestDb| {
    let s = setup(t, Scheme::StandardWebhooks, None).await;
    let body = created("r-1");
    assert!(matches!(
        deliver(&s, &signed(&s, Scheme::StandardWebhooks, &body, now_s(), "m1"), &body).await,
        Outcome::Applied { .. }
    ));
    keys::revoke(&t.db, &admin(), &s.key_id, "leaked").await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(5_100)).await;
    let body2 = created("r-2");
    let o = deliver(&s, &signed(&s, Scheme::StandardWebhooks, &body2, now_s(), "m2"), &body2).await;
    assert_eq!(o, Outcome::Refused(Refusal::SignatureMismatch));
});

/// Pooled connections are pinged only after 5 s idle (a ping on every
/// checkout would be one more round trip per webhook), so a hot connection
/// the database has ended is only found out by the request itself. Gate 1
/// and the claim retry on another connection: the event applies once and
/// nothing is lost, however many pooled connections were ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_connection_the_database_dropped_is_retried_not_lost() {
    use sea_orm::ConnectionTrait;
    let Some(t) = TestDb::postgres().await else { return };
    let s = Arc::new(setup(&t, Scheme::StandardWebhooks, None).await);
    // Eight deliveries at once leave more idle connections in the pool than
    // the receiver has attempts for transient failures.
    let warm: Vec<_> = (0..8)
        .map(|i| {
            let s = s.clone();
            tokio::spawn(async move {
                let body = created(&format!("r-{i}"));
                deliver(&s, &signed(&s, Scheme::StandardWebhooks, &body, now_s(), &format!("m{i}")), &body).await
            })
        })
        .collect();
    for w in warm {
        assert!(matches!(w.await.unwrap(), Outcome::Applied { .. }));
    }
    // From another connection, end every backend serving the receiver's pool
    // (what a database restart does to it).
    let killer = sea_orm::Database::connect(t.url.as_str()).await.unwrap();
    let killed = killer
        .query_one_raw(sea_orm::Statement::from_string(
            sea_orm::DbBackend::Postgres,
            "SELECT count(pg_terminate_backend(pid)) AS n FROM pg_stat_activity \
             WHERE datname = current_database() AND pid <> pg_backend_pid()",
        ))
        .await
        .unwrap()
        .unwrap()
        .try_get::<i64>("", "n")
        .unwrap();
    assert!(killed > 3, "expected more dropped connections than transient attempts, found {killed}");
    killer.close().await.ok();
    // A receiver with an empty key cache (as every 5 s): gate 1 reads the
    // database too, so both it and the claim meet ended connections.
    let s = Arc::try_unwrap(s).ok().expect("warm-up tasks have ended");
    let s = Setup {
        r: Arc::new(Receiver::new(t.db.clone(), t.vault.clone(), domain::receiver::faults::Faults::default())),
        ..s
    };
    let body = created("r-after");
    let o = deliver(&s, &signed(&s, Scheme::StandardWebhooks, &body, now_s(), "m-after"), &body).await;
    assert_eq!(o, Outcome::Applied { event_id: "m-after".into() });
    assert_eq!(reminder::Entity::find().count(&t.db).await.unwrap(), 9);
    t.close().await;
}

// The database may end a connection just after COMMIT, before its answer
// arrives. The retry then finds this very message's replay record; the
// provider must hear "duplicate" (200, nothing repeated), not "replay" (409).
db_test!(a_commit_whose_answer_was_lost_answers_duplicate, async |t: &TestDb| {
    let s = setup(t, Scheme::StandardWebhooks, None).await;
    let faults = Faults { lost_commit_answers: Arc::new(std::sync::atomic::AtomicU32::new(1)), ..Faults::default() };
    let s = Setup { r: Arc::new(Receiver::new(t.db.clone(), t.vault.clone(), faults)), ..s };
    let body = created("r-1");
    let o = deliver(&s, &signed(&s, Scheme::StandardWebhooks, &body, now_s(), "m1"), &body).await;
    assert_eq!(o, Outcome::Duplicate { event_id: "m1".into(), original: ClaimOutcome::Applied });
    assert_eq!(reminder::Entity::find().count(&t.db).await.unwrap(), 1);
    assert_eq!(inbox_claim::Entity::find().count(&t.db).await.unwrap(), 1);
});

/// A receiver whose claim transactions stall before commit, so deliveries
/// that arrive meanwhile queue up and share the next transaction.
fn stalling(t: &TestDb, s: Setup, stall_ms: u64) -> Arc<Setup> {
    let faults = Faults { stall_effect: Some(std::time::Duration::from_millis(stall_ms)), ..Faults::default() };
    Arc::new(Setup { r: Arc::new(Receiver::new(t.db.clone(), t.vault.clone(), faults)), ..s })
}

fn spawn_delivery(s: &Arc<Setup>, body: Vec<u8>, headers: Vec<(String, String)>) -> tokio::task::JoinHandle<Outcome> {
    let s = s.clone();
    tokio::spawn(async move { deliver(&s, &headers, &body).await })
}

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

async fn set_tolerance(t: &TestDb, secs: i64) {
    let patch = endpoints::EndpointPatch { tolerance_secs: Some(secs), ..Default::default() };
    endpoints::update(&t.db, &admin(), "clinic-a", "hooks", patch).await.unwrap();
}

db_test!(raising_the_tolerance_keeps_replay_records_for_the_wider_window, async |t: &TestDb| {
    let s = setup(t, Scheme::StandardWebhooks, None).await;
    let body = created("r-1");
    let h = signed(&s, Scheme::StandardWebhooks, &body, now_s() - 250, "m1");
    assert!(matches!(deliver(&s, &h, &body).await, Outcome::Applied { .. }));
    set_tolerance(t, 900).await;
    // 700 s on, the record a 300 s window needed (600 s) would be purged; the
    // message is still inside the new 900 s window, so the record must not be.
    domain::retention::purge::run(&t.db, clock::now_ms() + 700_000, 100).await.unwrap();
    let s = Setup {
        r: Arc::new(Receiver::new(t.db.clone(), t.vault.clone(), domain::receiver::faults::Faults::default())),
        ..s
    };
    assert_eq!(deliver(&s, &h, &body).await, Outcome::Refused(Refusal::Replay));
});

db_test!(a_message_that_left_the_old_window_stays_out_after_a_raise, async |t: &TestDb| {
    let s = setup(t, Scheme::StandardWebhooks, None).await;
    set_tolerance(t, 5).await;
    let s = Setup {
        r: Arc::new(Receiver::new(t.db.clone(), t.vault.clone(), domain::receiver::faults::Faults::default())),
        ..s
    };
    let body = created("r-1");
    let h = signed(&s, Scheme::StandardWebhooks, &body, now_s() - 3, "m1");
    assert!(matches!(deliver(&s, &h, &body).await, Outcome::Applied { .. }));
    // Its record expires (10 s) and is purged; the message leaves the window.
    domain::retention::purge::run(&t.db, clock::now_ms() + 20_000, 100).await.unwrap();
    assert_eq!(domain::entity::replay_record::Entity::find().count(&t.db).await.unwrap(), 0);
    tokio::time::sleep(std::time::Duration::from_millis(3100)).await;
    set_tolerance(t, 300).await;
    let s = Setup {
        r: Arc::new(Receiver::new(t.db.clone(), t.vault.clone(), domain::receiver::faults::Faults::default())),
        ..s
    };
    assert_eq!(deliver(&s, &h, &body).await, Outcome::Refused(Refusal::TimestampStale));
    // A message signed since is inside the new window.
    let fresh = signed(&s, Scheme::StandardWebhooks, &body, now_s(), "m2");
    assert!(matches!(deliver(&s, &fresh, &body).await, Outcome::Applied { .. } | Outcome::Quarantined { .. }));
});

db_test!(unknown_paths_never_evict_a_known_endpoint, async |t: &TestDb| {
    setup(t, Scheme::StandardWebhooks, None).await;
    // A TTL longer than the test: ten thousand lookups can outlast the
    // receiver's 5 s, and an expiry is not an eviction.
    let cache = &domain::receiver::cache::EndpointCache::new(std::time::Duration::from_secs(3600));
    assert!(cache.get(&t.db, &t.vault, "clinic-a", "hooks").await.unwrap().is_some());
    let loads = cache.loads();
    // Paths that cannot be slugs cost nothing at all.
    for probe in ["UPPER", "../etc", "a b", "%0a", "x\ny", &"a".repeat(64), "_other"] {
        assert!(cache.get(&t.db, &t.vault, probe, "hooks").await.unwrap().is_none());
        assert!(cache.get(&t.db, &t.vault, "clinic-a", probe).await.unwrap().is_none());
    }
    assert_eq!(cache.loads(), loads);
    // More unknown slugs than the unknown map holds: one lookup each, and the
    // known endpoint stays cached throughout.
    for i in 0..10_050 {
        assert!(cache.get(&t.db, &t.vault, &format!("probe-{i}"), "hooks").await.unwrap().is_none());
    }
    assert_eq!(cache.loads(), loads + 10_050);
    assert!(cache.get(&t.db, &t.vault, "clinic-a", "hooks").await.unwrap().is_some());
    assert_eq!(cache.loads(), loads + 10_050, "the known endpoint was not evicted");
    // An unknown path asked again within the TTL is answered from memory.
    assert!(cache.get(&t.db, &t.vault, "probe-10049", "hooks").await.unwrap().is_none());
    assert_eq!(cache.loads(), loads + 10_050);
});

db_test!(a_key_activated_a_moment_ago_verifies_at_once, async |t: &TestDb| {
    let s = setup(t, Scheme::StandardWebhooks, None).await;
    let body = created("r-1");
    // The receiver has the endpoint cached with the first key only.
    assert!(matches!(
        deliver(&s, &signed(&s, Scheme::StandardWebhooks, &body, now_s(), "m1"), &body).await,
        Outcome::Applied { .. }
    ));
    let rotated = keys::rotate(
        &t.db,
        &t.vault,
        &admin(),
        &s.key_id,
        None,
        Approval::ApproveAs { reviewer: "rev".into(), comment: String::new() },
    )
    .await
    .unwrap();
    let fresh = Setup { r: s.r.clone(), secret: rotated.secret.unwrap(), key_id: rotated.key.key_id };
    let b2 = created("r-2");
    let o = deliver(&fresh, &signed(&fresh, Scheme::StandardWebhooks, &b2, now_s(), "m2"), &b2).await;
    assert!(matches!(o, Outcome::Applied { .. }), "the new secret works at once: {o:?}");
    // Bad signatures reload the keys at most once a second.
    let loads = s.r.cache.loads();
    let wrong = SigningSecret::generate();
    let forger = Setup { r: s.r.clone(), secret: wrong, key_id: String::new() };
    for i in 0..20 {
        let b = created(&format!("x-{i}"));
        let o = deliver(&forger, &signed(&forger, Scheme::StandardWebhooks, &b, now_s(), &format!("f{i}")), &b).await;
        assert_eq!(o, Outcome::Refused(Refusal::SignatureMismatch));
    }
    assert!(s.r.cache.loads() - loads <= 1, "{} reloads", s.r.cache.loads() - loads);
});

fn reminder_event(kind: &str, id: &str, occurred: &str) -> Vec<u8> {
    json!({"type": kind, "occurred_at": occurred, "data": {"reminder_id": id}}).to_string().into_bytes()
}

async fn reminder_status(t: &TestDb, id: &str) -> String {
    let a = domain::registry::tenants::get(&t.db, &admin(), "clinic-a").await.unwrap();
    reminder::Entity::find_by_id((a.id, id.to_owned())).one(&t.db).await.unwrap().unwrap().status
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
        .filter(|c| c.outcome == "stale_transition")
        .count();
    assert_eq!(stale, 3);
    // Visible to on-call: the events list filters by that outcome.
    let listed =
        domain::events::list_events(&t.db, &oncall(), "clinic-a", Some("stale_transition"), 100).await.unwrap();
    let mut ids: Vec<&str> = listed.iter().map(|e| e.event_id.as_str()).collect();
    ids.sort();
    assert_eq!(ids, ["e3", "e5", "e6"]);
    assert!(listed.iter().all(|e| e.outcome == "stale_transition"));
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
    assert!(matches!(&o, Outcome::Quarantined { reason, .. } if reason == "missing_event_id"), "{o:?}");
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
        "clinic-a",
        "hooks",
        Some(fields.clone()),
        "the sender documents these as unique",
    )
    .await
    .unwrap();
    assert_eq!(key.fields.as_ref(), Some(&fields));
    assert_eq!(key.history.len(), 1);
    assert!(matches!(
        domain::registry::event_key::set(&t.db, &admin(), "clinic-a", "hooks", Some(fields.clone()), "again").await,
        Err(DomainError::Invalid { code: "nothing_to_change", .. })
    ));
    assert!(matches!(
        domain::registry::event_key::set(&t.db, &admin(), "clinic-a", "hooks", None, "").await,
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
    let removed = domain::registry::event_key::set(&t.db, &admin(), "clinic-a", "hooks", None, "sender now sends ids")
        .await
        .unwrap();
    assert_eq!(removed.fields, None);
    assert_eq!(removed.history.iter().map(|v| v.version).collect::<Vec<_>>(), vec![2, 1]);
    assert_eq!(audit_entries(t, "endpoint.event_key").await.len(), 2);
    // Only those who manage the endpoint change it.
    assert!(matches!(
        domain::registry::event_key::set(&t.db, &reviewer(), "clinic-a", "hooks", Some(fields), "x").await,
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
        let a = domain::registry::tenants::get(&t.db, &admin(), "clinic-a").await.unwrap();
        let row = reminder::Entity::find_by_id((a.id, id.clone())).one(&t.db).await.unwrap().unwrap();
        let newest = clock::parse_rfc3339("2027-01-01T10:08:00Z").unwrap();
        if with_cancel {
            assert_eq!(row.status, "canceled", "round {round}: a `scheduled` applied over the cancellation");
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
