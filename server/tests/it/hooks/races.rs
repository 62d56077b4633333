//! Races: one event delivered many times at once, many events on many
//! connections, two server processes, a crash before commit and a lost
//! acknowledgment.

use std::{sync::Arc, time::Duration};

use domain::crypto::signature;
use serde_json::Value;
use views::scheme::Scheme;

use super::{Hook, count, db, setup};
use crate::{
    both_engines,
    support::{Engine, Install, Server, created, now},
};

async fn race_one_event(i: &Install, servers: &[&Server]) {
    let (key_id, secret, _) = setup(i, Scheme::StandardWebhooks);
    let _ = key_id;
    let body = created("r-race");
    let mut tasks = Vec::new();
    // One clock reading, so no two attempts can sign the same second.
    let at = now();
    for n in 0..64 {
        // Distinct valid signatures: every attempt carries its own timestamp.
        let headers = signature::sign(Scheme::StandardWebhooks, &secret, &body, at - n, "msg_race").unwrap();
        let url = servers[n as usize % servers.len()].url("/hooks/clinic-a/hooks");
        let body = body.clone();
        tasks.push(tokio::spawn(async move {
            let mut r = reqwest::Client::new().post(url).body(body);
            for (k, v) in &headers {
                r = r.header(k.as_str(), v.as_str());
            }
            let res = r.send().await.unwrap();
            (res.status(), res.json::<Value>().await.unwrap())
        }));
    }
    let (mut applied, mut duplicate) = (0, 0);
    for t in tasks {
        let (status, v) = t.await.unwrap();
        assert_eq!(status, 200, "{v}");
        match v["status"].as_str() {
            Some("applied") => applied += 1,
            Some("duplicate") => duplicate += 1,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!((applied, duplicate), (1, 63));
    let db = db(i).await;
    assert_eq!(count(&db, "reminders").await, 1, "exactly one effect");
    assert_eq!(count(&db, "inbox_claims").await, 1);
}

both_engines!(sixty_four_concurrent_deliveries_apply_once, async |i: &Install| {
    let s = i.serve();
    race_one_event(i, &[&s]).await;
});

both_engines!(two_hundred_events_on_sixteen_connections_all_apply, async |i: &Install| {
    let s = i.serve();
    let (_, secret, _) = setup(i, Scheme::Stripe);
    let secret = Arc::new(secret);
    let url = s.url("/hooks/clinic-a/hooks");
    let mut tasks = Vec::new();
    for w in 0..16u32 {
        let (secret, url) = (secret.clone(), url.clone());
        tasks.push(tokio::spawn(async move {
            // One connection per worker.
            let c = reqwest::Client::builder().pool_max_idle_per_host(1).build().unwrap();
            let mut applied = 0;
            for k in (w..200).step_by(16) {
                let body = created(&format!("r-{k}"));
                let headers = signature::sign(Scheme::Stripe, &secret, &body, now(), "").unwrap();
                let mut r = c.post(&url).body(body);
                for (k, v) in &headers {
                    r = r.header(k.as_str(), v.as_str());
                }
                let v: Value = r.send().await.unwrap().json().await.unwrap();
                assert_eq!(v["status"], "applied", "{v}");
                applied += 1;
            }
            applied
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap();
    }
    assert_eq!(total, 200);
    assert_eq!(count(&db(i).await, "reminders").await, 200);
});

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_server_processes_on_one_postgres_apply_once() {
    let Some(i) = Install::new(Engine::Postgres) else { return };
    let a = i.serve();
    let b = i.serve();
    race_one_event(&i, &[&a, &b]).await;
}

both_engines!(crash_before_commit_leaves_nothing_and_the_retry_applies_once, async |i: &Install| {
    let (_, secret, _) = setup(i, Scheme::StandardWebhooks);
    let mut s = i.serve_with(&[("SIGNET_FAULTS", "stall_effect_ms=60000")]);
    let body = created("r-crash");
    let url = s.url("/hooks/clinic-a/hooks");
    let headers = signature::sign(Scheme::StandardWebhooks, &secret, &body, now(), "msg_crash").unwrap();
    let inflight = {
        let (body, headers, url) = (body.clone(), headers.clone(), url.clone());
        tokio::spawn(async move {
            let mut r = reqwest::Client::new().post(url).body(body);
            for (k, v) in &headers {
                r = r.header(k.as_str(), v.as_str());
            }
            r.send().await
        })
    };
    // Wait until the effect has run and the transaction is stalled before commit.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    s.kill9();
    assert!(inflight.await.unwrap().is_err(), "the provider got no answer");
    let db = db(i).await;
    assert_eq!(count(&db, "inbox_claims").await, 0, "nothing claimed after the crash");
    assert_eq!(count(&db, "reminders").await, 0);
    assert_eq!(count(&db, "replay_records").await, 0);
    drop(s);
    // The provider retries (re-signed) against the restarted server.
    let s = i.serve();
    let h =
        Hook { secret, key_id: String::new(), scheme: Scheme::StandardWebhooks, url: s.url("/hooks/clinic-a/hooks") };
    let c = reqwest::Client::new();
    let (status, v) = h.post(&c, &h.headers(&body, now() + 1, "msg_crash"), body.clone()).await;
    assert_eq!((status.as_u16(), v["status"].as_str()), (200, Some("applied")));
    let (_, v) = h.post(&c, &h.headers(&body, now() + 2, "msg_crash"), body.clone()).await;
    assert_eq!(v["status"], "duplicate");
    assert_eq!(count(&db, "reminders").await, 1);
});

both_engines!(lost_ack_retry_is_a_duplicate_with_one_effect, async |i: &Install| {
    let (_, secret, _) = setup(i, Scheme::StandardWebhooks);
    let s = i.serve_with(&[("SIGNET_FAULTS", "stall_after_commit_ms=3000")]);
    let h =
        Hook { secret, key_id: String::new(), scheme: Scheme::StandardWebhooks, url: s.url("/hooks/clinic-a/hooks") };
    let body = created("r-ack");
    // The client gives up before the answer arrives (the commit already happened).
    let impatient = reqwest::Client::builder().timeout(Duration::from_millis(700)).build().unwrap();
    let mut r = impatient.post(&h.url).body(body.clone());
    for (k, v) in &h.headers(&body, now(), "msg_ack") {
        r = r.header(k.as_str(), v.as_str());
    }
    assert!(r.send().await.is_err(), "the acknowledgment was lost");
    tokio::time::sleep(Duration::from_millis(3000)).await;
    let (status, v) = h.post(&reqwest::Client::new(), &h.headers(&body, now() + 1, "msg_ack"), body.clone()).await;
    assert_eq!(status, 200);
    assert_eq!(v["status"], "duplicate", "{v}");
    assert_eq!(v["original"], "applied");
    assert_eq!(count(&db(i).await, "reminders").await, 1);
});
