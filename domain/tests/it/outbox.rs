//! Outbox claiming on both engines: concurrent workers never lease the same
//! intent, an expired lease is taken over, and a disabled retry policy makes
//! a failed send dead at once.

use std::collections::HashSet;

use domain::{
    clock,
    crypto::Aad,
    entity::outbox_intent,
    outbox::{self, RetryRule},
    retry_policy,
};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, Set};
use serde_json::json;
use views::{outbox::OutboxStatus, retry_policy::RetryPolicy};

use crate::{db_test, fixtures::*, support::TestDb};

async fn intents(t: &TestDb, tenant_id: &str, n: usize) {
    t.vault.reserve_seals(&t.db, n as u64).await.unwrap();
    for i in 0..n {
        let id = format!("int_{i:04}");
        let (sealed, kek) =
            t.vault.seal(&Aad::outbox_payload(tenant_id, &id), json!({"n": i}).to_string().as_bytes()).unwrap();
        outbox_intent::Entity::insert(outbox_intent::ActiveModel {
            id: Set(id),
            tenant_id: Set(tenant_id.to_owned()),
            kind: Set("otp".into()),
            idempotency_key: Set(format!("otp:{i}")),
            payload_ciphertext: Set(sealed),
            kek_version: Set(kek as i32),
            status: Set(OutboxStatus::Pending),
            attempts: Set(0),
            next_attempt_at: Set(clock::now_ms()),
            created_at: Set(clock::now_ms()),
            ..Default::default()
        })
        .exec_without_returning(&t.db)
        .await
        .unwrap();
    }
}

const RULE: RetryRule = RetryRule { base_ms: 10, cap_ms: 10, max_attempts: 5 };

db_test!(concurrent_workers_never_lease_the_same_intent, async |t: &TestDb| {
    let tenant = tenant(t, "clinic-a").await;
    intents(t, &tenant.id, 120).await;
    let mut workers = Vec::new();
    for _ in 0..4 {
        let (db, vault) = (t.db.clone(), t.vault.clone());
        workers.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            loop {
                let batch = outbox::claim_batch(&db, &vault, 7, 60_000).await.unwrap();
                if batch.is_empty() {
                    break mine;
                }
                for d in batch {
                    assert_eq!(
                        d.payload["n"].as_u64().map(|n| format!("int_{n:04}")),
                        Some(d.id.clone()),
                        "payload opens with its own AAD"
                    );
                    outbox::mark_sent(&db, &d.id).await.unwrap();
                    mine.push(d.id);
                }
            }
        }));
    }
    let mut all = Vec::new();
    for w in workers {
        all.extend(w.await.unwrap());
    }
    let unique: HashSet<&String> = all.iter().collect();
    assert_eq!(all.len(), 120, "every intent sent once");
    assert_eq!(unique.len(), 120, "no intent leased twice");
});

db_test!(expired_leases_are_taken_over_with_the_same_id, async |t: &TestDb| {
    let tenant = tenant(t, "clinic-a").await;
    enable_retries(t, "clinic-a").await;
    intents(t, &tenant.id, 1).await;
    let first = outbox::claim_batch(&t.db, &t.vault, 10, 200).await.unwrap();
    assert_eq!(first.len(), 1);
    assert!(outbox::claim_batch(&t.db, &t.vault, 10, 200).await.unwrap().is_empty(), "leased");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let again = outbox::claim_batch(&t.db, &t.vault, 10, 200).await.unwrap();
    assert_eq!((again.len(), again[0].id.as_str(), again[0].attempts), (1, first[0].id.as_str(), 2));
    assert_eq!(again[0].payload, first[0].payload);
    // Failures back off, then die after the last attempt.
    assert_eq!(
        outbox::mark_failed(&t.db, &again[0], "boom", false, &RetryRule { max_attempts: 3, ..RULE }).await.unwrap(),
        Some(OutboxStatus::Pending)
    );
    tokio::time::sleep(std::time::Duration::from_millis(30)).await;
    let third = outbox::claim_batch(&t.db, &t.vault, 10, 200).await.unwrap();
    assert_eq!(third[0].attempts, 3);
    assert_eq!(
        outbox::mark_failed(&t.db, &third[0], "boom", false, &RetryRule { max_attempts: 3, ..RULE }).await.unwrap(),
        Some(OutboxStatus::Dead)
    );
    assert!(outbox::claim_batch(&t.db, &t.vault, 10, 200).await.unwrap().is_empty());
    // A late mark from the crashed first worker changes nothing.
    outbox::mark_sent(&t.db, &first[0].id).await.unwrap();
    let late = outbox::mark_failed(&t.db, &first[0], "late", false, &RULE).await.unwrap();
    assert_eq!(late, None, "the lease was lost: no status recorded");
    let row = outbox_intent::Entity::find()
        .filter(outbox_intent::Column::Id.eq(&first[0].id))
        .one(&t.db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((row.status.as_str(), row.last_error.as_deref()), ("dead", Some("boom")));
});

db_test!(disabled_retry_policy_makes_a_failed_send_dead_at_once, async |t: &TestDb| {
    let tenant = tenant(t, "clinic-a").await;
    retry_policy::set(&t.db, &gate(t), &admin(), &"clinic-a".parse().unwrap(), RetryPolicy::Disabled, "incident")
        .await
        .unwrap();
    intents(t, &tenant.id, 1).await;
    let d = outbox::claim_batch(&t.db, &t.vault, 10, 60_000).await.unwrap();
    assert!(!d[0].retries_enabled);
    assert_eq!(outbox::mark_failed(&t.db, &d[0], "relay down", false, &RULE).await.unwrap(), Some(OutboxStatus::Dead));
});

db_test!(an_intent_that_cannot_be_opened_goes_dead_without_blocking_others, async |t: &TestDb| {
    let tenant = tenant(t, "clinic-a").await;
    intents(t, &tenant.id, 2).await;
    // Damage one sealed payload (as a lost KEK version or a bad restore would).
    outbox_intent::Entity::update_many()
        .col_expr(outbox_intent::Column::PayloadCiphertext, sea_orm::sea_query::Expr::value(vec![0u8; 40]))
        .filter(outbox_intent::Column::Id.eq("int_0000"))
        .exec(&t.db)
        .await
        .unwrap();
    let batch = outbox::claim_batch(&t.db, &t.vault, 10, 60_000).await.expect("the batch still succeeds");
    assert_eq!(batch.iter().map(|d| d.id.as_str()).collect::<Vec<_>>(), vec!["int_0001"]);
    let bad = outbox_intent::Entity::find()
        .filter(outbox_intent::Column::Id.eq("int_0000"))
        .one(&t.db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(bad.status, OutboxStatus::Dead, "dead at once, visible to on-call");
    assert!(bad.last_error.as_deref().is_some_and(|e| e.contains("cannot be decrypted")), "{:?}", bad.last_error);
    assert!(outbox::claim_batch(&t.db, &t.vault, 10, 60_000).await.unwrap().is_empty(), "never re-leased");
});

/// A delivery as the server hands it over while traces are exported: with
/// the receiving span's `traceparent`.
struct Traced<'a> {
    inner: domain::receiver::Buffered<'a, [(&'a str, &'a str)]>,
    traceparent: &'static str,
}

impl<'a> domain::receiver::Delivery for Traced<'a> {
    type Headers = [(&'a str, &'a str)];
    fn headers(&self) -> &Self::Headers {
        self.inner.headers
    }
    async fn body(&mut self, limit: usize) -> Result<bytes::Bytes, domain::receiver::Refusal> {
        domain::receiver::Delivery::body(&mut self.inner, limit).await
    }
    fn trace_context(&self) -> Option<String> {
        Some(self.traceparent.to_owned())
    }
}

db_test!(the_trace_context_is_stored_with_each_intent_and_leased_with_it, async |t: &TestDb| {
    use crate::receiver::{now_s, setup, signed};
    let s = setup(t, views::scheme::Scheme::StandardWebhooks, None).await;
    let otp = |request: &str| {
        json!({"type": "otp.requested", "data": {"otp_request_id": request, "channel": "sms"}}).to_string().into_bytes()
    };
    let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    for (request, traced) in [("traced", true), ("untraced", false)] {
        let body = otp(request);
        let headers = signed(&s, views::scheme::Scheme::StandardWebhooks, &body, now_s(), &format!("evt-{request}"));
        let h: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let inner = domain::receiver::Buffered { headers: &h[..], body: bytes::Bytes::from(body) };
        let outcome = if traced {
            domain::receiver::receive(
                &s.r,
                &"clinic-a".parse().unwrap(),
                &"hooks".parse().unwrap(),
                Traced { inner, traceparent: tp },
            )
            .await
            .outcome
        } else {
            domain::receiver::receive(&s.r, &"clinic-a".parse().unwrap(), &"hooks".parse().unwrap(), inner)
                .await
                .outcome
        };
        assert!(matches!(outcome, domain::receiver::Outcome::Applied { .. }), "{outcome:?}");
    }
    let rows = outbox_intent::Entity::find().all(&t.db).await.unwrap();
    let stored = |key: &str| rows.iter().find(|r| r.idempotency_key == key).unwrap().trace_context.clone();
    assert_eq!(stored("otp:traced").as_deref(), Some(tp));
    assert_eq!(stored("otp:untraced"), None, "no trace context while traces are off");
    let leased = outbox::claim_batch(&t.db, &t.vault, 10, 60_000).await.unwrap();
    let leased = |key: &str| leased.iter().find(|d| d.idempotency_key == key).unwrap().trace_context.clone();
    assert_eq!(leased("otp:traced").as_deref(), Some(tp));
    assert_eq!(leased("otp:untraced"), None);
});

db_test!(the_status_filter_takes_the_stored_words_and_refuses_any_other, async |t: &TestDb| {
    let tenant = tenant(t, "clinic-a").await;
    intents(t, &tenant.id, 2).await;
    let leased = outbox::claim_batch(&t.db, &t.vault, 1, 60_000).await.unwrap();
    let listed = async |status: &str| outbox::list(&t.db, &admin(), None, Some(status), 100).await;
    let sending = listed("sending").await.unwrap();
    assert_eq!(sending.iter().map(|o| o.id.as_str()).collect::<Vec<_>>(), [leased[0].id.as_str()]);
    assert_eq!(serde_json::to_value(&sending[0]).unwrap()["status"], "sending", "the stored word on the wire");
    assert_eq!(listed("pending").await.unwrap().iter().map(|o| o.status).collect::<Vec<_>>(), [OutboxStatus::Pending]);
    assert_eq!(listed("").await.unwrap().len(), 2, "empty: any status");
    let err = listed("Sending").await.unwrap_err();
    assert!(matches!(err, domain::DomainError::Invalid { code: "invalid_status", .. }), "{err:?}");
});
