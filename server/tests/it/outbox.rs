//! The outbox worker against the real binary and a local HTTP sink that
//! records every request: one effective delivery per idempotency key, the
//! same key (and payload) after a crash between send and mark, backoff to
//! `dead`, and on-call's manual retry.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use axum::{Router, extract::State, http::HeaderMap, routing::post};
use reqwest::StatusCode;
use serde_json::Value;

use crate::{
    both_engines,
    support::{Engine, Install, Server},
};

/// Records (Idempotency-Key, body) and when each arrived; answers 500 while
/// `failures` > 0.
#[derive(Clone, Default)]
pub(crate) struct Sink {
    seen: Arc<Mutex<Vec<(String, Value)>>>,
    /// Wall-clock milliseconds, comparable with the database's lease times.
    pub(crate) arrived: Arc<Mutex<Vec<i64>>>,
    failures: Arc<AtomicUsize>,
}

impl Sink {
    pub(crate) async fn start(&self) -> String {
        async fn receive(State(s): State<Sink>, headers: HeaderMap, body: String) -> StatusCode {
            let key = headers.get("idempotency-key").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
            // Both under the first lock, so their entries stay in step.
            let mut seen = s.seen.lock().unwrap();
            seen.push((key, serde_json::from_str(&body).unwrap_or(Value::Null)));
            s.arrived.lock().unwrap().push(domain::clock::now_ms());
            drop(seen);
            let failing = s.failures.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok();
            if failing { StatusCode::INTERNAL_SERVER_ERROR } else { StatusCode::OK }
        }
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/notify", listener.local_addr().unwrap());
        let app = Router::new().route("/notify", post(receive)).with_state(self.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        url
    }

    pub(crate) fn seen(&self) -> Vec<(String, Value)> {
        self.seen.lock().unwrap().clone()
    }

    async fn wait_for(&self, n: usize) -> Vec<(String, Value)> {
        for _ in 0..300 {
            if self.seen.lock().unwrap().len() >= n {
                return self.seen();
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the sink saw {} requests, expected {n}", self.seen.lock().unwrap().len());
    }
}

/// `tenant` with endpoint `hooks` (standard-webhooks) and an active key's secret.
pub(crate) fn clinic(i: &Install, tenant: &str, notify_url: Option<&str>) -> String {
    let mut args = vec!["tenant", "create", tenant];
    if let Some(u) = notify_url {
        args.extend(["--notify-url", u]);
    }
    i.cli_json(&args);
    i.cli_json(&["endpoint", "create", tenant, "hooks", "--scheme", "standard-webhooks"]);
    let secret = i.cli_json(&["key", "provision", tenant, "hooks", "--approve-as", "rita"])["secret"]
        .as_str()
        .unwrap()
        .to_owned();
    // Failed sends are retried only for tenants whose retries are enabled
    // (new tenants start with them off), once drills and review came first.
    i.meet_rollout_order();
    i.cli_json(&["retry-policy", "set", tenant, "--policy", "enabled", "--reason", "in the enabled cohort"]);
    secret
}

fn otp(i: &Install, s: &Server, tenant: &str, secret: &str, request: &str, event_id: &str) {
    let body = format!(r#"{{"type":"otp.requested","data":{{"otp_request_id":"{request}","channel":"sms"}}}}"#);
    i.send_event(&s.url(&format!("/hooks/{tenant}/hooks")), secret, event_id, &body);
}

async fn outbox(s: &Server, token: &str, query: &str) -> Vec<Value> {
    let res =
        reqwest::Client::new().get(s.url(&format!("/api/v1/outbox{query}"))).bearer_auth(token).send().await.unwrap();
    assert_eq!(res.status(), 200);
    res.json::<Vec<Value>>().await.unwrap()
}

async fn wait_status(s: &Server, token: &str, status: &str, n: usize) -> Vec<Value> {
    for _ in 0..300 {
        let items = outbox(s, token, &format!("?status={status}")).await;
        if items.len() >= n {
            return items;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("fewer than {n} intents reached {status}");
}

/// The sink listens on loopback, which the relay reaches only when allowed.
const LOOPBACK_ALLOWED: (&str, &str) = ("SIGNET_RELAY_ALLOW", "127.0.0.0/8");
const FAST: [(&str, &str); 2] = [("SIGNET_OUTBOX_POLL_MS", "50"), LOOPBACK_ALLOWED];

both_engines!(each_intent_is_delivered_once_with_its_idempotency_key, async |i: &Install| {
    let sink = Sink::default();
    let url = sink.start().await;
    let a = clinic(i, "clinic-a", Some(&url));
    let b = clinic(i, "clinic-b", None);
    let token =
        i.cli_json(&["token", "create", "--name", "ops", "--role", "admin"])["token"].as_str().unwrap().to_owned();
    let s = i.serve_with(&FAST);
    for n in 1..=3 {
        otp(i, &s, "clinic-a", &a, &format!("otp-{n}"), &format!("evt-{n}"));
    }
    // A second event for an OTP request already seen mints and sends nothing.
    otp(i, &s, "clinic-a", &a, "otp-1", "evt-again");
    otp(i, &s, "clinic-b", &b, "otp-b", "evt-b");
    wait_status(&s, &token, "sent", 4).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let seen = sink.seen();
    assert_eq!(seen.len(), 3, "one request per intent: {seen:?}");
    let mut keys: Vec<&str> = seen.iter().map(|(k, _)| k.as_str()).collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), 3);
    for (key, body) in &seen {
        assert_eq!(body["id"].as_str(), Some(key.as_str()), "Idempotency-Key is the intent id");
        assert_eq!(body["tenant"], "clinic-a");
        assert_eq!(body["kind"], "otp");
        assert!(body["payload"]["code"].as_str().is_some_and(|c| c.len() == 6));
    }
    // clinic-b has no relay URL: its notification went to the file sink.
    let file = std::fs::read_to_string(i.data_dir().join("notifications.jsonl")).unwrap();
    let lines: Vec<Value> = file.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 1);
    assert_eq!(
        (lines[0]["tenant"].as_str(), lines[0]["payload"]["otp_request_id"].as_str()),
        (Some("clinic-b"), Some("otp-b"))
    );
    // The file sink records the intent, never the one-time code.
    let code = &lines[0]["payload"]["code"];
    assert!(code.as_str().is_some_and(|c| c.starts_with("(withheld")), "{code}");
    // The data directory and what Signet creates in it are owner-only.
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&i.data_dir().join("notifications.jsonl")), 0o600);
    assert_eq!(mode(&i.data_dir().join("master.key")), 0o600);
    if i.engine == Engine::Sqlite {
        assert_eq!(mode(&i.data_dir().join("signet.db")), 0o600);
    }
    let sent = outbox(&s, &token, "?status=sent").await;
    assert!(sent.iter().all(|v| v["delivered_at"].is_string() && v.get("payload").is_none()));
});

both_engines!(a_crash_between_send_and_mark_resends_with_the_same_key, async |i: &Install| {
    let sink = Sink::default();
    let url = sink.start().await;
    let a = clinic(i, "clinic-a", Some(&url));
    let token =
        i.cli_json(&["token", "create", "--name", "ops", "--role", "admin"])["token"].as_str().unwrap().to_owned();
    let lease = ("SIGNET_OUTBOX_LEASE_MS", "1500");
    let mut s = i.serve_with(&[FAST[0], FAST[1], lease, ("SIGNET_FAULTS", "stall_after_send_ms=60000")]);
    otp(i, &s, "clinic-a", &a, "otp-crash", "evt-crash");
    let first = sink.wait_for(1).await;
    s.kill9(); // after the send, before the mark
    drop(s);
    let s = i.serve_with(&[FAST[0], FAST[1], lease]);
    let both = sink.wait_for(2).await;
    assert_eq!(both[0].0, first[0].0);
    assert_eq!(both[1].0, first[0].0, "the resend carries the same idempotency key");
    assert_eq!(both[1].1, both[0].1, "and the same payload: the OTP code is never re-minted");
    wait_status(&s, &token, "sent", 1).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(sink.seen().len(), 2);
});

both_engines!(failures_back_off_to_dead_and_on_call_retries_by_hand, async |i: &Install| {
    let sink = Sink::default();
    sink.failures.store(1000, Ordering::SeqCst);
    let url = sink.start().await;
    let a = clinic(i, "clinic-a", Some(&url));
    let admin =
        i.cli_json(&["token", "create", "--name", "ops", "--role", "admin"])["token"].as_str().unwrap().to_owned();
    let oncall =
        i.cli_json(&["token", "create", "--name", "pager", "--role", "oncall"])["token"].as_str().unwrap().to_owned();
    let reviewer =
        i.cli_json(&["token", "create", "--name", "rev", "--role", "reviewer"])["token"].as_str().unwrap().to_owned();
    let s = i.serve_with(&[
        FAST[0],
        FAST[1],
        ("SIGNET_OUTBOX_MAX_ATTEMPTS", "3"),
        ("SIGNET_OUTBOX_BASE_DELAY_MS", "20"),
        ("SIGNET_OUTBOX_MAX_DELAY_MS", "100"),
    ]);
    otp(i, &s, "clinic-a", &a, "otp-dead", "evt-dead");
    let dead = wait_status(&s, &admin, "dead", 1).await;
    assert_eq!(dead[0]["attempts"], 3);
    assert_eq!(dead[0]["last_error"], "relay answered 500 Internal Server Error");
    let seen = sink.seen();
    assert_eq!(seen.len(), 3);
    // Send attempts and dead intents are counted, not only gauged.
    let metrics = reqwest::get(&s.metrics).await.unwrap().text().await.unwrap();
    let value = |prefix: &str| {
        metrics.lines().find(|l| l.starts_with(prefix)).and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
    };
    assert_eq!(value("signet_outbox_send_attempts_total{result=\"failed\"}"), Some(3), "{metrics}");
    assert_eq!(value("signet_outbox_dead_total "), Some(1), "{metrics}");
    assert!(seen.iter().all(|(k, _)| k == dead[0]["id"].as_str().unwrap()));

    sink.failures.store(0, Ordering::SeqCst);
    let id = dead[0]["id"].as_str().unwrap();
    let c = reqwest::Client::new();
    let denied = c.post(s.url(&format!("/api/v1/outbox/{id}/retry"))).bearer_auth(&reviewer).send().await.unwrap();
    assert_eq!(denied.status(), 403);
    let retried = c.post(s.url(&format!("/api/v1/outbox/{id}/retry"))).bearer_auth(&oncall).send().await.unwrap();
    assert_eq!(retried.status(), 200);
    wait_status(&s, &admin, "sent", 1).await;
    assert_eq!(sink.seen().len(), 4);
    assert_eq!(sink.seen()[3].0, id, "the manual retry keeps the key");
    let again = c.post(s.url(&format!("/api/v1/outbox/{id}/retry"))).bearer_auth(&oncall).send().await.unwrap();
    assert_eq!(again.status(), 409);
    let audit: Value =
        c.get(s.url("/api/v1/audit?action=outbox.")).bearer_auth(&admin).send().await.unwrap().json().await.unwrap();
    assert!(audit.to_string().contains("outbox.retry"), "{audit}");
});

both_engines!(relays_reach_internal_addresses_only_when_the_operator_allows_them, async |i: &Install| {
    let sink = Sink::default();
    let url = sink.start().await;
    let port = url.trim_start_matches("http://127.0.0.1:").split('/').next().unwrap().to_owned();
    // `localhost` resolves to 127.0.0.1 (/etc/hosts): the name is checked by
    // what it resolves to, at the moment of the send.
    let by_name = format!("http://localhost:{port}/notify");
    let a = clinic(i, "clinic-a", Some(&by_name));
    let b = clinic(i, "clinic-b", Some(&url));
    let admin =
        i.cli_json(&["token", "create", "--name", "ops", "--role", "admin"])["token"].as_str().unwrap().to_owned();
    let s = i.serve_with(&FAST[..1]);
    otp(i, &s, "clinic-a", &a, "otp-name", "evt-name");
    otp(i, &s, "clinic-b", &b, "otp-literal", "evt-literal");
    let dead = wait_status(&s, &admin, "dead", 2).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(sink.seen().is_empty(), "nothing reached the internal address: {:?}", sink.seen());
    let error_of = |tenant: &str| {
        let v = dead.iter().find(|v| v["tenant"] == tenant).unwrap_or_else(|| panic!("{tenant} in {dead:?}"));
        assert_eq!(v["attempts"], 1, "refused once, not retried: {v}");
        v["last_error"].as_str().unwrap().to_owned()
    };
    assert_eq!(
        error_of("clinic-a"),
        "relay host localhost resolves only to forbidden addresses (127.0.0.1 is loopback); \
         allow its range with SIGNET_RELAY_ALLOW"
    );
    assert_eq!(error_of("clinic-b"), "relay address 127.0.0.1 is loopback and not allowed (SIGNET_RELAY_ALLOW)");
    let metrics = reqwest::get(&s.metrics).await.unwrap().text().await.unwrap();
    assert!(metrics.contains("signet_outbox_send_attempts_total{result=\"refused\"} 2"), "{metrics}");
    let log = s.output();
    assert!(log.contains("notification not delivered") && log.contains("127.0.0.1 is loopback"), "{log}");
    drop(s);

    // With the loopback range allowed, the same intents go through once retried.
    let s = i.serve_with(&FAST);
    let c = reqwest::Client::new();
    for v in &dead {
        let id = v["id"].as_str().unwrap();
        let res = c.post(s.url(&format!("/api/v1/outbox/{id}/retry"))).bearer_auth(&admin).send().await.unwrap();
        assert_eq!(res.status(), 200);
    }
    let seen = sink.wait_for(2).await;
    let mut tenants: Vec<&str> = seen.iter().map(|(_, b)| b["tenant"].as_str().unwrap()).collect();
    tenants.sort();
    assert_eq!(tenants, ["clinic-a", "clinic-b"]);
    wait_status(&s, &admin, "sent", 2).await;
});
