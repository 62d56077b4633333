//! `POST /hooks/{tenant}/{endpoint}` against the real binary: the gate table
//! for each scheme, races, two processes, a crash before commit, a lost
//! acknowledgment, transient failures and the retry policy, `signet send`,
//! metrics and secrecy.

use std::{sync::Arc, time::Duration};

use domain::{
    crypto::{SigningSecret, signature},
    registry::Scheme,
};
use reqwest::StatusCode;
use sea_orm::{ConnectionTrait, DatabaseConnection, Statement};
use serde_json::{Value, json};

use crate::{
    both_engines,
    support::{Engine, Install, Server},
};

struct Hook {
    secret: SigningSecret,
    key_id: String,
    scheme: Scheme,
    url: String,
}

/// clinic-a/hooks with the scheme, types reminder.created + otp.requested +
/// reminder.canceled, a 2 KiB body limit, and an approved key. Retries stay
/// off ([`enable_retries`]).
fn setup(i: &Install, scheme: Scheme) -> (String, SigningSecret, String) {
    i.cli_json(&["tenant", "create", "clinic-a"]);
    i.cli_json(&[
        "endpoint",
        "create",
        "clinic-a",
        "hooks",
        "--scheme",
        scheme.as_str(),
        "--event-types",
        "reminder.created,reminder.canceled,otp.requested",
        "--max-body-bytes",
        "2048",
    ]);
    let k = i.cli_json(&[
        "key",
        "provision",
        "clinic-a",
        "hooks",
        "--approve-as",
        "rita",
        "--event-types",
        "reminder.created,reminder.canceled",
    ]);
    (
        k["key_id"].as_str().unwrap().to_owned(),
        SigningSecret::parse(k["secret"].as_str().unwrap()).unwrap(),
        scheme.as_str().to_owned(),
    )
}

/// Puts clinic-a in the enabled cohort, so a transient failure answers 503
/// (new tenants start with retries off, where it would be quarantined):
/// drills and an approved bundle first, as the rollout order requires.
fn enable_retries(i: &Install) {
    i.meet_rollout_order();
    i.cli_json(&["retry-policy", "set", "clinic-a", "--policy", "enabled", "--reason", "in the enabled cohort"]);
}

fn now() -> i64 {
    domain::clock::now_ms() / 1000
}

fn created(id: &str) -> Vec<u8> {
    let data = json!({"reminder_id": id, "send_at": "2027-01-05T09:00:00Z"});
    json!({"id": format!("evt_{id}"), "type": "reminder.created", "data": data}).to_string().into_bytes()
}

impl Hook {
    fn headers(&self, body: &[u8], ts: i64, id: &str) -> Vec<(String, String)> {
        signature::sign(self.scheme, &self.secret, body, ts, id).unwrap()
    }

    async fn post(&self, c: &reqwest::Client, headers: &[(String, String)], body: Vec<u8>) -> (StatusCode, Value) {
        let mut r = c.post(&self.url).body(body);
        for (k, v) in headers {
            r = r.header(k.as_str(), v.as_str());
        }
        let res = r.send().await.unwrap();
        let status = res.status();
        (status, res.json().await.unwrap_or(Value::Null))
    }

    /// A correctly signed delivery with a fresh timestamp.
    async fn deliver(&self, c: &reqwest::Client, body: Vec<u8>, id: &str) -> (StatusCode, Value) {
        let h = self.headers(&body, now(), id);
        self.post(c, &h, body).await
    }
}

async fn db(i: &Install) -> DatabaseConnection {
    domain::db::connect(&i.database_url).await.unwrap()
}

async fn count(db: &DatabaseConnection, table: &str) -> i64 {
    let row = db
        .query_one_raw(Statement::from_string(db.get_database_backend(), format!("SELECT COUNT(*) AS n FROM {table}")))
        .await
        .unwrap()
        .unwrap();
    row.try_get::<i64>("", "n").unwrap()
}

fn hook(i: &Install, s: &Server, scheme: Scheme) -> Hook {
    let (key_id, secret, _) = setup(i, scheme);
    let _ = i;
    Hook { secret, key_id, scheme, url: s.url("/hooks/clinic-a/hooks") }
}

async fn gate_table(i: &Install, scheme: Scheme) {
    let s = i.serve();
    let h = hook(i, &s, scheme);
    let c = reqwest::Client::new();
    let db = db(i).await;
    #[track_caller]
    fn expect(got: (StatusCode, Value), status: u16, field: &str, value: &str) {
        assert_eq!(got.0.as_u16(), status, "{got:?}");
        assert_eq!(got.1[field], value, "{got:?}");
    }
    let body = created("r-1");
    let good = h.headers(&body, now(), "d-1");

    // Gate 1.
    for path in ["/hooks/nobody/hooks", "/hooks/clinic-a/nope"] {
        let mut r = c.post(s.url(path)).body(body.clone());
        for (k, v) in &good {
            r = r.header(k.as_str(), v.as_str());
        }
        let res = r.send().await.unwrap();
        assert_eq!(res.status(), 404);
        assert_eq!(res.json::<Value>().await.unwrap()["error"], "unknown_endpoint");
    }
    // Gate 2: declared and streamed (chunked) bodies over the limit.
    let big = vec![b'x'; 4096];
    let big_h = h.headers(&big, now(), "d-big");
    expect(h.post(&c, &big_h, big.clone()).await, 413, "error", "body_too_large");
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> = big.chunks(512).map(|c| Ok(c.to_vec())).collect();
    let stream = reqwest::Body::wrap_stream(futures_util::stream::iter(chunks));
    let mut r = c.post(&h.url).body(stream);
    for (k, v) in &big_h {
        r = r.header(k.as_str(), v.as_str());
    }
    let res = r.send().await.unwrap();
    assert_eq!(res.status(), 413, "chunked body over the limit");
    // Gate 3.
    expect(h.post(&c, &[], body.clone()).await, 401, "error", "signature_missing");
    let mut malformed = good.clone();
    let sig = malformed.iter_mut().find(|(k, _)| k.to_lowercase().contains("signature")).unwrap();
    sig.1 = match scheme {
        Scheme::StandardWebhooks => "v1,@@@not-base64".into(),
        Scheme::Stripe => "t=abc,v1=00".into(),
        Scheme::Github => "sha1=abc".into(),
        Scheme::Hmac => unreachable!("hmac profiles have their own tests (hmac.rs)"),
    };
    expect(h.post(&c, &malformed, body.clone()).await, 401, "error", "signature_malformed");
    // Gate 4.
    let forged = signature::sign(scheme, &SigningSecret::generate(), &body, now(), "d-1").unwrap();
    expect(h.post(&c, &forged, body.clone()).await, 401, "error", "signature_mismatch");
    let mut hinted = good.clone();
    hinted.push(("signet-key-id".into(), "key_not_in_the_set".into()));
    expect(h.post(&c, &hinted, body.clone()).await, 401, "error", "unknown_key");
    // Gate 5 (schemes with a signed timestamp).
    if scheme != Scheme::Github {
        for ts in [now() - 310, now() + 310] {
            expect(
                h.post(&c, &h.headers(&body, ts, "d-1"), body.clone()).await,
                401,
                "error",
                "timestamp_outside_window",
            );
        }
    }
    // Gate 8 (before anything is applied): type not permitted by the key's
    // scope, and a tenant named in the payload that is not the path's.
    let otp = json!({"id": "evt_otp", "type": "otp.requested", "data": {"otp_request_id": "o1", "channel": "sms"}})
        .to_string()
        .into_bytes();
    expect(h.deliver(&c, otp, "d-otp").await, 403, "error", "event_type_not_permitted");
    let data = json!({"reminder_id": "f", "send_at": "2027-01-05T09:00:00Z"});
    let foreign =
        json!({"id": "evt_f", "type": "reminder.created", "tenant": "clinic-b", "data": data}).to_string().into_bytes();
    expect(h.deliver(&c, foreign, "d-f").await, 403, "error", "tenant_mismatch");
    assert_eq!(count(&db, "inbox_claims").await, 0, "refusals store nothing");
    assert_eq!(count(&db, "replay_records").await, 0, "refusals store nothing");

    // Gate 9: applied, then a re-signed retry is a duplicate.
    expect(h.post(&c, &good, body.clone()).await, 200, "status", "applied");
    // (Re-signed one second later, as a provider's retry would be.)
    let dup = h.post(&c, &h.headers(&body, now() + 1, "d-1"), body.clone()).await;
    expect(dup.clone(), 200, "status", "duplicate");
    assert_eq!(dup.1["original"], "applied");
    // Gate 6: the very same signed message again.
    if scheme != Scheme::Github {
        expect(h.post(&c, &good, body.clone()).await, 409, "error", "replay");
    } else {
        // GitHub signs no timestamp: the same bytes are a duplicate, not a replay.
        expect(h.post(&c, &good, body.clone()).await, 200, "status", "duplicate");
    }
    // Same event id, different body: identity conflict. (Stripe's id is in the body.)
    let mut other: Value = serde_json::from_slice(&created("r-2")).unwrap();
    other["id"] = json!("evt_r-1");
    let other = other.to_string().into_bytes();
    expect(h.deliver(&c, other, "d-1").await, 409, "error", "identity_conflict");
    // Gate 7 and effects that cannot apply: 202 quarantined.
    let junk = b"\xff\xfe not json".to_vec();
    let q = h.deliver(&c, junk.clone(), "d-junk").await;
    expect(q, 202, "status", "quarantined");
    let missing =
        json!({"id": "evt_c", "type": "reminder.canceled", "data": {"reminder_id": "nope"}}).to_string().into_bytes();
    let q = h.deliver(&c, missing.clone(), "d-c").await;
    expect(q.clone(), 202, "status", "quarantined");
    assert_eq!(q.1["reason"], "reminder_not_found");
    expect(h.post(&c, &h.headers(&missing, now() + 1, "d-c"), missing.clone()).await, 200, "status", "duplicate");
    assert_eq!(count(&db, "reminders").await, 1);
    assert_eq!(count(&db, "quarantine").await, 2);

    // Metrics count every refusal with its reason.
    let metrics = reqwest::get(&s.metrics).await.unwrap().text().await.unwrap();
    for reason in [
        "missing",
        "malformed",
        "mismatch",
        "unknown_key",
        "too_large",
        "type_not_permitted",
        "tenant_mismatch",
        "unknown_endpoint",
    ] {
        assert!(metrics.contains(&format!("reason=\"{reason}\"")), "{reason} missing from /metrics");
    }
    // Only there: the public address does not list tenants to anyone.
    assert!(metrics.contains("tenant=\"clinic-a\""));
    let public = reqwest::get(s.url("/metrics")).await.unwrap();
    assert_eq!(public.status(), 404);
    assert!(!public.text().await.unwrap().contains("clinic-a"));
    if scheme != Scheme::Github {
        assert!(metrics.contains("reason=\"stale\"") && metrics.contains("reason=\"future\""));
        assert!(metrics.contains("outcome=\"replay\""));
        // A signature that matched outside the window counts under its key.
        let per_key = format!("key_id=\"{}\"", h.key_id);
        assert!(
            metrics.lines().any(|l| l.starts_with("signet_key_verification_failures_total")
                && l.contains(&per_key)
                && l.contains("reason=\"stale\"")),
            "{metrics}"
        );
    }
    assert!(metrics.contains("signet_claim_retries_total "), "{metrics}");
    assert!(metrics.contains("outcome=\"applied\"") && metrics.contains("outcome=\"duplicate\""));
    assert!(metrics.contains("signet_webhook_duration_seconds_bucket"));
    // Every applied event above was claimed through the shared-transaction
    // queue, so the group-commit counters have moved.
    let counter =
        |name: &str| metrics.lines().find_map(|l| l.strip_prefix(name)?.trim().parse::<u64>().ok()).unwrap_or(0);
    assert!(counter("signet_claim_batches_total ") >= 1, "{metrics}");
    assert!(counter("signet_claim_batched_events_total ") >= counter("signet_claim_batches_total "));
    // Nothing secret or from a body in the log.
    let log = s.output();
    assert!(!log.contains(h.secret.expose()));
    assert!(!log.contains("reminder_id") && !log.contains("r-1\""), "a body reached the log");
    let _ = &h.key_id;
}

both_engines!(gate_table_standard_webhooks, async |i: &Install| gate_table(i, Scheme::StandardWebhooks).await);
both_engines!(gate_table_stripe, async |i: &Install| gate_table(i, Scheme::Stripe).await);
both_engines!(gate_table_github, async |i: &Install| gate_table(i, Scheme::Github).await);

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

both_engines!(transient_failures_follow_the_tenant_retry_policy, async |i: &Install| {
    let (_, secret, _) = setup(i, Scheme::Github);
    enable_retries(i);
    let db = db(i).await;
    // The drill run before the enabling left the drill tenant's claims.
    let drill_claims = count(&db, "inbox_claims").await;
    let s = i.serve_with(&[("SIGNET_FAULTS", "transient=1")]);
    let h = Hook { secret, key_id: String::new(), scheme: Scheme::Github, url: s.url("/hooks/clinic-a/hooks") };
    let c = reqwest::Client::new();
    let body = created("r-t");
    let res = {
        let mut r = c.post(&h.url).body(body.clone());
        for (k, v) in &h.headers(&body, 0, "d-t") {
            r = r.header(k.as_str(), v.as_str());
        }
        r.send().await.unwrap()
    };
    assert_eq!(res.status(), 503);
    assert_eq!(res.headers()["retry-after"], "5");
    assert_eq!(res.json::<Value>().await.unwrap()["error"], "unavailable");
    assert_eq!(count(&db, "inbox_claims").await, drill_claims, "nothing claimed on 503");
    // The attempts repeated before giving up are counted.
    let metrics = reqwest::get(&s.metrics).await.unwrap().text().await.unwrap();
    let retries: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("signet_claim_retries_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    assert!(retries >= 2, "three attempts, two of them repeats: {metrics}");
    // An administrator switches retries off through the API (a new version)...
    let token =
        i.cli_json(&["token", "create", "--name", "ops", "--role", "admin"])["token"].as_str().unwrap().to_owned();
    let policy_url = s.url("/api/v1/tenants/clinic-a/retry-policy");
    let put = c
        .put(&policy_url)
        .bearer_auth(&token)
        .json(&json!({"policy": "disabled", "reason": "incident"}))
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 200);
    assert_eq!(put.json::<Value>().await.unwrap()["version"], 3);
    tokio::time::sleep(Duration::from_millis(5200)).await; // the endpoint cache's staleness bound
    let (status, v) = h.post(&c, &h.headers(&body, 0, "d-t"), body.clone()).await;
    assert_eq!(
        (status.as_u16(), v["status"].as_str(), v["reason"].as_str()),
        (202, Some("quarantined"), Some("transient"))
    );
    // ...and the rollback restores the 503 for the next event.
    let back = c
        .post(s.url("/api/v1/tenants/clinic-a/retry-policy/rollback"))
        .bearer_auth(&token)
        .json(&json!({"reason": "over"}))
        .send()
        .await
        .unwrap();
    assert_eq!(back.status(), 200);
    let v: Value = back.json().await.unwrap();
    assert_eq!((v["policy"].as_str(), v["version"].as_i64()), (Some("enabled"), Some(4)));
    assert_eq!(v["history"].as_array().unwrap().len(), 4);
    tokio::time::sleep(Duration::from_millis(5200)).await;
    let other = created("r-t2");
    let (status, _) = h.post(&c, &h.headers(&other, 0, "d-t2"), other.clone()).await;
    assert_eq!(status.as_u16(), 503);
});

both_engines!(send_signs_retries_and_stops_correctly, async |i: &Install| {
    let (_, secret, _) = setup(i, Scheme::StandardWebhooks);
    enable_retries(i);
    let s = i.serve();
    let url = s.url("/hooks/clinic-a/hooks");
    let file = i.data_dir().join("body.json");
    std::fs::write(&file, created("r-send")).unwrap();
    let f = file.to_str().unwrap();
    let ok = i.cli(
        &[
            "--json",
            "send",
            &url,
            "--scheme",
            "standard-webhooks",
            "--secret",
            secret.expose(),
            "--file",
            f,
            "--event-id",
            "msg_send",
        ],
        "",
    );
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    let report: Value = serde_json::from_slice(&ok.stdout).unwrap();
    assert_eq!(report["delivered"], true);
    assert_eq!(report["attempts"].as_array().unwrap().len(), 1);
    // Sending again (a second later) re-signs with a fresh timestamp: a
    // duplicate, still 2xx. (Within the same second it would be the same
    // signed message: a replay.)
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let again = i.cli(
        &[
            "--json",
            "send",
            &url,
            "--scheme",
            "standard-webhooks",
            "--secret",
            secret.expose(),
            "--file",
            f,
            "--event-id",
            "msg_send",
        ],
        "",
    );
    let report: Value = serde_json::from_slice(&again.stdout).unwrap();
    assert!(report["attempts"][0]["response"].as_str().unwrap().contains("duplicate"));
    // A wrong secret is a non-retryable 401: one attempt, non-zero exit.
    let wrong = i.cli(
        &[
            "--json",
            "send",
            &url,
            "--scheme",
            "standard-webhooks",
            "--secret",
            SigningSecret::generate().expose(),
            "--file",
            f,
        ],
        "",
    );
    assert!(!wrong.status.success());
    let report: Value = serde_json::from_slice(&wrong.stdout).unwrap();
    assert_eq!(report["attempts"].as_array().unwrap().len(), 1);
    assert_eq!(report["attempts"][0]["status"], 401);
    // A 503 is retried, honouring Retry-After (5 s), up to --max-attempts.
    drop(s);
    let s = i.serve_with(&[("SIGNET_FAULTS", "transient=1")]);
    let url = s.url("/hooks/clinic-a/hooks");
    let started = std::time::Instant::now();
    let busy = i.cli(
        &[
            "--json",
            "send",
            &url,
            "--scheme",
            "standard-webhooks",
            "--secret",
            secret.expose(),
            "--file",
            f,
            "--max-attempts",
            "2",
            "--base-delay-ms",
            "10",
        ],
        "",
    );
    assert!(!busy.status.success());
    let report: Value = serde_json::from_slice(&busy.stdout).unwrap();
    let attempts = report["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 2);
    assert_eq!(attempts[0]["status"], 503);
    assert!(attempts[0]["wait_ms"].as_u64().unwrap() >= 5000, "Retry-After honoured");
    assert!(started.elapsed() >= Duration::from_secs(5));
    let progress = String::from_utf8_lossy(&busy.stderr);
    assert!(progress.contains("attempt 1: 503") && progress.contains("attempt 2: 503"), "{progress}");
    // Connection refused (nothing listening) is retried too.
    drop(s);
    let refused = i.cli(
        &[
            "--json",
            "send",
            &url,
            "--scheme",
            "standard-webhooks",
            "--secret",
            secret.expose(),
            "--file",
            f,
            "--max-attempts",
            "3",
            "--base-delay-ms",
            "10",
            "--max-delay-ms",
            "50",
        ],
        "",
    );
    let report: Value = serde_json::from_slice(&refused.stdout).unwrap();
    assert_eq!(report["attempts"].as_array().unwrap().len(), 3);
    assert!(report["attempts"][0]["status"].is_null());
});

both_engines!(bodies_and_secrets_never_reach_the_database_in_plaintext_or_the_log, async |i: &Install| {
    let s = i.serve();
    let h = hook(i, &s, Scheme::StandardWebhooks);
    let c = reqwest::Client::new();
    let marker = "opaque-marker-5f1e9c";
    for (n, body) in [
        created(marker),
        json!({"type": "reminder.canceled", "data": {"reminder_id": marker}}).to_string().into_bytes(),
        format!("not json {marker}").into_bytes(),
    ]
    .into_iter()
    .enumerate()
    {
        let (status, _) = h.deliver(&c, body, &format!("m{n}")).await;
        assert!(status.is_success(), "{status}");
    }
    let log = s.output();
    assert!(!log.contains(marker), "a body reached the log");
    assert!(!log.contains(h.secret.expose()));
    // The claim rows hold the body only sealed.
    let db = db(i).await;
    let rows = db
        .query_all_raw(Statement::from_string(db.get_database_backend(), "SELECT body_ciphertext FROM inbox_claims"))
        .await
        .unwrap();
    assert_eq!(rows.len(), 3);
    for r in rows {
        let sealed: Vec<u8> = r.try_get("", "body_ciphertext").unwrap();
        assert!(!String::from_utf8_lossy(&sealed).contains(marker));
        assert_eq!(sealed[0], 1, "format 1 ciphertext");
    }
});

both_engines!(rollups_and_key_usage_are_written_in_batches, async |i: &Install| {
    let s = i.serve();
    let h = hook(i, &s, Scheme::Github);
    let c = reqwest::Client::new();
    for n in 0..3 {
        let (status, _) = h.deliver(&c, created(&format!("r-{n}")), &format!("d-{n}")).await;
        assert_eq!(status, 200);
    }
    for n in 0..2 {
        let forged = signature::sign(Scheme::Github, &SigningSecret::generate(), b"{}", 0, &format!("x-{n}")).unwrap();
        assert_eq!(h.post(&c, &forged, b"{}".to_vec()).await.0, 401);
    }
    let db = db(i).await;
    let sum = |outcome: &'static str, reason: &'static str| {
        let db = db.clone();
        async move {
            let row = db
                .query_one_raw(Statement::from_string(
                    db.get_database_backend(),
                    format!(
                        "SELECT CAST(COALESCE(SUM(count), 0) AS BIGINT) AS n FROM event_rollups \
                         WHERE outcome = '{outcome}' AND reason = '{reason}'"
                    ),
                ))
                .await
                .unwrap()
                .unwrap();
            row.try_get::<i64>("", "n").unwrap()
        }
    };
    // Nothing is written per request; the flusher runs every 5 s.
    let mut waited = 0;
    while sum("applied", "").await < 3 && waited < 80 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        waited += 1;
    }
    assert_eq!(sum("applied", "").await, 3);
    assert_eq!(sum("verification_failed", "mismatch").await, 2);
    let row = db
        .query_one_raw(Statement::from_string(
            db.get_database_backend(),
            format!("SELECT verified_count, last_verified_at FROM signing_keys WHERE id = '{}'", h.key_id),
        ))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.try_get::<i64>("", "verified_count").unwrap(), 3);
    assert!(row.try_get::<Option<i64>>("", "last_verified_at").unwrap().is_some());
    // The dashboard API reads the same rollups, hourly ones included, with
    // latency rolled up beside them.
    let token =
        i.cli_json(&["token", "create", "--name", "dash", "--role", "oncall"])["token"].as_str().unwrap().to_owned();
    for window in ["1h", "24h", "7d"] {
        let v: Value = c
            .get(s.url(&format!("/api/v1/stats?tenant=clinic-a&window={window}")))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let total = |o: &str| {
            v["series"].as_array().unwrap().iter().find(|x| x["outcome"] == o).unwrap()["total"].as_i64().unwrap()
        };
        assert_eq!((total("applied"), total("verification_failed")), (3, 2), "{window}: {v}");
        assert_eq!(v["latency"]["samples"], 5, "{window}");
        assert!(v["latency"]["p99_ms"].as_f64().is_some());
    }
    let bad = c.get(s.url("/api/v1/stats?window=1y")).bearer_auth(&token).send().await.unwrap();
    assert_eq!(bad.status(), 422);
});

both_engines!(unknown_paths_cannot_flood_or_forge_the_log, async |i: &Install| {
    setup(i, Scheme::StandardWebhooks);
    let s = i.serve();
    let c = reqwest::Client::new();
    for n in 0..150 {
        for path in [format!("/hooks/probe-{n}/x"), format!("/hooks/probe-{n}%0AINFO%20signet%3A%20login%20ok/x")] {
            let res = c.post(s.url(&path)).body("{}").send().await.unwrap();
            assert_eq!(res.status(), 404);
        }
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let log = s.output();
    let lines = log.lines().filter(|l| l.contains("webhook to an unknown endpoint")).count();
    // At most 20 per 10 s window; the run may straddle one window boundary.
    assert!((1..=40).contains(&lines), "{lines} lines for 300 unknown paths");
    assert!(!log.lines().any(|l| l.starts_with("INFO signet: login ok")), "a path forged a log line:\n{log}");
});

both_engines!(a_key_rotated_by_the_cli_verifies_at_once, async |i: &Install| {
    let (key_id, secret, _) = setup(i, Scheme::StandardWebhooks);
    let s = i.serve();
    let c = reqwest::Client::new();
    let old =
        Hook { secret, key_id: key_id.clone(), scheme: Scheme::StandardWebhooks, url: s.url("/hooks/clinic-a/hooks") };
    // The server has the endpoint's keys cached.
    assert_eq!(old.deliver(&c, created("r-1"), "m1").await.0, StatusCode::OK);
    let rotated = i.cli_json(&["key", "rotate", &key_id, "--approve-as", "rita"]);
    assert_eq!(rotated["status"], "active", "{rotated}");
    let new = Hook {
        secret: SigningSecret::parse(rotated["secret"].as_str().unwrap()).unwrap(),
        key_id: rotated["key_id"].as_str().unwrap().to_owned(),
        scheme: Scheme::StandardWebhooks,
        url: old.url.clone(),
    };
    // The provider switches to the new secret at once: accepted at once.
    let (status, body) = new.deliver(&c, created("r-2"), "m2").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "applied");
    // Naming the new key is accepted at once too.
    let b = created("r-3");
    let mut h = new.headers(&b, now(), "m3");
    h.push(("signet-key-id".into(), new.key_id.clone()));
    assert_eq!(new.post(&c, &h, b).await.0, StatusCode::OK);
    // The old key keeps working through its overlap.
    assert_eq!(old.deliver(&c, created("r-4"), "m4").await.0, StatusCode::OK);
});
