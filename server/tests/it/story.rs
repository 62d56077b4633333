//! `GET …/events/{event_id}` and `signet event show` against the real
//! binary: the seven keys, the deliveries the receiver answered (a duplicate
//! and a bad signature included), the same 404 body for a foreign clinic
//! admin, an unknown tenant and an unknown event, 422 for an id a path
//! cannot carry, and the CLI's `--json` equal to the API's object.

use std::time::Duration;

use serde_json::Value;

use crate::{
    both_engines,
    support::{Install, Server},
};

async fn get(s: &Server, token: &str, path: &str) -> (u16, Value) {
    let res = reqwest::Client::new().get(s.url(path)).bearer_auth(token).send().await.unwrap();
    (res.status().as_u16(), res.json().await.unwrap_or(Value::Null))
}

/// The story once the delivery log holds `n` answers (it is written off the
/// hot path, in batches).
async fn story(s: &Server, token: &str, event_id: &str, n: usize) -> Value {
    let path = format!("/api/v1/tenants/clinic-a/endpoints/hooks/events/{event_id}");
    for _ in 0..100 {
        let (status, body) = get(s, token, &path).await;
        if status == 200 && body["deliveries"].as_array().is_some_and(|d| d.len() >= n) {
            return body;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{event_id}: fewer than {n} deliveries: {:?}", get(s, token, &path).await);
}

fn token(i: &Install, name: &str, role: &str, tenant: Option<&str>) -> String {
    let mut args = vec!["token", "create", "--name", name, "--role", role];
    args.extend(tenant.map(|t| ["--tenant", t]).into_iter().flatten());
    i.cli_json(&args)["token"].as_str().unwrap().to_owned()
}

both_engines!(one_events_whole_story_over_the_api_and_the_cli, async |i: &Install| {
    for t in ["clinic-a", "clinic-b"] {
        i.cli_json(&["tenant", "create", t]);
        i.cli_json(&["endpoint", "create", t, "hooks", "--scheme", "standard-webhooks"]);
    }
    let key = i.cli_json(&["key", "provision", "clinic-a", "hooks", "--approve-as", "rita"]);
    let (key_id, secret) = (key["key_id"].as_str().unwrap(), key["secret"].as_str().unwrap());
    let other = i.cli_json(&["key", "provision", "clinic-b", "hooks", "--approve-as", "rita"]);
    let admin = token(i, "root", "admin", None);
    let oncall = token(i, "otto", "oncall", None);
    let bob = token(i, "bob", "clinic-admin", Some("clinic-b"));
    let s = i.serve();
    let url = s.url("/hooks/clinic-a/hooks");
    let body = r#"{"type":"reminder.created","data":{"reminder_id":"r-1","send_at":"2027-01-05T09:00:00Z"}}"#;
    i.send_event(&url, secret, "evt-1", body);
    // Re-signed a second later (the same signed message again would be a replay).
    tokio::time::sleep(Duration::from_millis(1100)).await;
    i.send_event(&url, secret, "evt-1", body);
    // Signed with clinic-b's secret: 401, logged under the id it names.
    let file = i.data_dir().join("bad.json");
    std::fs::write(&file, body).unwrap();
    let bad = i.cli(
        &[
            "send",
            &url,
            "--scheme",
            "standard-webhooks",
            "--secret",
            other["secret"].as_str().unwrap(),
            "--file",
            file.to_str().unwrap(),
            "--event-id",
            "evt-bad",
            "--max-attempts",
            "1",
        ],
        "",
    );
    assert!(!bad.status.success());

    let st = story(&s, &oncall, "evt-1", 2).await;
    let keys: Vec<&String> = st.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["audit", "claim", "deliveries", "outbox", "quarantine", "reminder", "replay"]);
    let answers: Vec<(u64, &str, &str, &str)> = st["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let f = |k: &str| d[k].as_str().unwrap();
            (d["status"].as_u64().unwrap(), f("answer"), f("key_id"), f("scheme"))
        })
        .collect();
    assert_eq!(
        answers,
        [(200, "applied", key_id, "standard-webhooks"), (200, "duplicate", key_id, "standard-webhooks")]
    );
    assert_eq!(st["claim"]["outcome"], "applied");
    assert_eq!(st["reminder"]["reminder_id"], "r-1");
    assert_eq!(st["replay"].as_array().unwrap().len(), 2);
    let bad = story(&s, &admin, "evt-bad", 1).await;
    assert_eq!(
        (bad["deliveries"][0]["status"].as_u64(), &bad["deliveries"][0]["answer"]),
        (Some(401), &Value::from("signature_mismatch"))
    );
    assert_eq!(bad["claim"], Value::Null);

    // The CLI prints the very object the API answers.
    let cli = i.cli_json(&["event", "show", "clinic-a", "hooks", "evt-1"]);
    assert_eq!(cli, story(&s, &admin, "evt-1", 2).await);

    // Not found alike: another clinic's admin, an unknown event, an unknown tenant.
    let foreign = get(&s, &bob, "/api/v1/tenants/clinic-a/endpoints/hooks/events/evt-1").await;
    let unknown_event = get(&s, &admin, "/api/v1/tenants/clinic-a/endpoints/hooks/events/evt-none").await;
    let unknown_tenant = get(&s, &admin, "/api/v1/tenants/clinic-zz/endpoints/hooks/events/evt-1").await;
    assert_eq!(foreign.0, 404);
    assert_eq!(foreign, unknown_event);
    assert_eq!(foreign, unknown_tenant);
    // An id a path segment cannot carry.
    for id in ["a%2Fb", "tab%09x", &"x".repeat(256)] {
        let (status, body) = get(&s, &admin, &format!("/api/v1/tenants/clinic-zz/endpoints/hooks/events/{id}")).await;
        assert_eq!((status, &body["error"]), (422, &Value::from("invalid_event_id")), "{id}");
    }
    let cli = i.cli(&["event", "show", "clinic-a", "hooks", "evt-none"], "");
    assert!(!cli.status.success());

    // The console: the page renders the story on the server; the dashboard's
    // search form is a plain GET that `/events` redirects to the page.
    i.cli_json_stdin(&["user", "create", "olga", "--role", "oncall"], PASSWORD);
    let c = s.client();
    let login = c
        .post(s.url("/fn/login"))
        .header("Origin", &s.base)
        .form(&[("username", "olga"), ("password", PASSWORD)])
        .send()
        .await
        .unwrap();
    assert_eq!(login.status(), 200);
    let dashboard = c.get(s.url("/dashboard")).send().await.unwrap().text().await.unwrap();
    assert!(dashboard.contains(r#"action="/events""#), "the search form");
    let search = s.url("/events?tenant=clinic-a&endpoint=hooks&event_id=evt-1");
    let found = c.get(search).header("Accept", "text/html").send().await.unwrap();
    let status = found.status();
    assert!(status.is_redirection(), "{status} {:?}", found.text().await.unwrap());
    assert_eq!(found.headers()["location"], "/events/clinic-a/hooks/evt-1");
    let page = c.get(s.url("/events/clinic-a/hooks/evt-1")).send().await.unwrap().text().await.unwrap();
    assert!(page.contains("event-deliveries") && page.contains("duplicate") && page.contains(key_id), "{page}");
});

const PASSWORD: &str = "a long enough password";
