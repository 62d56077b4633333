//! The pipeline against real databases: gates, exactly-once claims under
//! concurrency, quarantine and outbox intents.

mod cache;
mod group_commit;
mod replay_window;
mod transitions;

use std::sync::Arc;
use views::{events::ClaimOutcome, quarantine::QuarantineReason, scheme::Scheme};

use domain::{
    clock,
    crypto::{SigningSecret, signature},
    entity::{inbox_claim, outbox_intent, quarantine_entry, reminder, replay_record},
    receiver::{self, Outcome, Receiver, Refusal, faults::Faults},
    registry::{
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

impl Setup {
    /// The same endpoint and key behind a fresh receiver, which reads the
    /// endpoint afresh (its cache would keep the settings it loaded).
    pub(crate) fn reloaded(self, t: &TestDb) -> Setup {
        Setup { r: Arc::new(Receiver::new(t.db.clone(), t.vault.clone(), Faults::default())), ..self }
    }
}

pub(crate) async fn setup(t: &TestDb, scheme: Scheme, types: Option<Vec<&str>>) -> Setup {
    tenant(t, "clinic-a").await;
    endpoints::create(
        &t.db,
        &admin(),
        &"clinic-a".parse().unwrap(),
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
        &"clinic-a".parse().unwrap(),
        &"hooks".parse().unwrap(),
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
        key_id: k.key.key_id.into_string(),
    }
}

pub(crate) fn signed(s: &Setup, scheme: Scheme, body: &[u8], ts: i64, id: &str) -> Vec<(String, String)> {
    signature::sign(scheme, &s.secret, body, ts, id).unwrap()
}

pub(crate) async fn deliver(s: &Setup, headers: &[(String, String)], body: &[u8]) -> Outcome {
    let h: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let delivery = receiver::Buffered { headers: &h[..], body: bytes::Bytes::copy_from_slice(body) };
    receiver::receive(&s.r, &"clinic-a".parse().unwrap(), &"hooks".parse().unwrap(), delivery).await.outcome
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
        let receipt = receiver::receive(&s.r, &"clinic-a".parse().unwrap(), &"hooks".parse().unwrap(), delivery).await;
        (receipt.outcome, receipt.key_id)
    };
    let (o, _) = receive(naming("key_other")).await;
    assert_eq!(o, Outcome::Refused(Refusal::UnknownKey));
    let (o, key) = receive(naming(&s.key_id)).await;
    assert!(matches!(o, Outcome::Applied { .. }), "{o:?}");
    assert_eq!(key.as_deref(), Some(s.key_id.as_str()));
    // Unknown endpoint.
    assert!(matches!(
        s.r.resolve(&"clinic-a".parse().unwrap(), &"nope".parse().unwrap()).await,
        Err(Outcome::Refused(Refusal::UnknownEndpoint))
    ));
    assert!(matches!(
        s.r.resolve(&"nobody".parse().unwrap(), &"hooks".parse().unwrap()).await,
        Err(Outcome::Refused(Refusal::UnknownEndpoint))
    ));
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
        assert_eq!(
            o,
            Outcome::Quarantined {
                event_id: id.into(),
                reason: QuarantineReason::parse(reason).expect("a quarantine reason")
            }
        );
        let again = deliver(&s, &signed(&s, Scheme::StandardWebhooks, &body, now_s() + 1, id), &body).await;
        assert_eq!(again, Outcome::Duplicate { event_id: id.into(), original: ClaimOutcome::Quarantined });
    }
    assert_eq!(quarantine_entry::Entity::find().count(&t.db).await.unwrap(), 4);
    assert_eq!(reminder::Entity::find().count(&t.db).await.unwrap(), 0, "rolled back");
    // The stored body is sealed.
    let claims = inbox_claim::Entity::find().all(&t.db).await.unwrap();
    let bodies = domain::entity::event_body::Entity::find().all(&t.db).await.unwrap();
    assert_eq!(bodies.len(), claims.len(), "one body per claim");
    for b in bodies {
        assert!(!String::from_utf8_lossy(&b.body_ciphertext).contains("reminder"));
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
    keys::revoke(&t.db, &admin(), &s.key_id.parse().unwrap(), "leaked").await.unwrap();
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
