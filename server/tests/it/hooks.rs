//! `POST /hooks/{tenant}/{endpoint}` against the real binary: the gate table
//! for each scheme, races, two processes, a crash before commit, a lost
//! acknowledgment, transient failures and the retry policy, `signet send`,
//! metrics and secrecy.

mod races;
mod records;
mod retries;
mod send;

use domain::crypto::{SigningSecret, signature};
use reqwest::StatusCode;
use sea_orm::{ConnectionTrait, DatabaseConnection, Statement};
use serde_json::{Value, json};
use views::scheme::Scheme;

use crate::{
    both_engines,
    support::{Install, Server, created, expect, now, post},
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
    i.clinic_a_hooks(
        scheme.as_str(),
        "reminder.created,reminder.canceled,otp.requested",
        &["--max-body-bytes", "2048"],
    );
    let (key_id, secret) = i.clinic_a_hooks_key("reminder.created,reminder.canceled");
    (key_id, secret, scheme.as_str().to_owned())
}

/// Puts clinic-a in the enabled cohort, so a transient failure answers 503
/// (new tenants start with retries off, where it would be quarantined):
/// drills and an approved bundle first, as the rollout order requires.
fn enable_retries(i: &Install) {
    i.meet_rollout_order();
    i.cli_json(&["retry-policy", "set", "clinic-a", "--policy", "enabled", "--reason", "in the enabled cohort"]);
}

impl Hook {
    fn headers(&self, body: &[u8], ts: i64, id: &str) -> Vec<(String, String)> {
        signature::sign(self.scheme, &self.secret, body, ts, id).unwrap()
    }

    async fn post(&self, c: &reqwest::Client, headers: &[(String, String)], body: Vec<u8>) -> (StatusCode, Value) {
        post(c, &self.url, headers, body).await
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
