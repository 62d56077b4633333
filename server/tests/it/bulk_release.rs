//! Bulk release through the real binary: progress is visible while it runs,
//! and when the process running it is killed (SIGKILL) midway, the job reads
//! as interrupted after a restart (unless the restarted process resumed it
//! first), resumes once, and every event applies exactly once.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{
    both_engines,
    support::{Install, Server},
};

async fn get(s: &Server, token: &str, path: &str) -> Value {
    let res = s.client().get(s.url(path)).bearer_auth(token).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK, "{path}");
    res.json().await.unwrap()
}

/// Polls the job until `done` says so (at most 30 s).
async fn wait_job(s: &Server, token: &str, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    let mut last = Value::Null;
    for _ in 0..600 {
        last = get(s, token, &format!("/api/v1/quarantine/bulk-releases/{id}")).await;
        if done(&last) {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("bulk release never got there: {last}");
}

const EVENTS: u64 = 8;

both_engines!(a_killed_bulk_release_resumes_and_applies_each_event_once, async |i: &Install| {
    i.cli_json(&["tenant", "create", "clinic-a"]);
    i.cli_json(&["endpoint", "create", "clinic-a", "hooks", "--scheme", "standard-webhooks"]);
    let key = i.cli_json(&["key", "provision", "clinic-a", "hooks", "--approve-as", "rita"]);
    let secret = key["secret"].as_str().unwrap().to_owned();
    let token =
        i.cli_json(&["token", "create", "--name", "pager", "--role", "oncall"])["token"].as_str().unwrap().to_owned();
    let stale = ("SIGNET_BULK_STALE_SECS", "2");

    let mut s = i.serve_with(&[stale, ("SIGNET_FAULTS", "stall_bulk_entry_ms=400")]);
    let url = s.url("/hooks/clinic-a/hooks");
    i.send_releasable(&url, &secret, EVENTS);
    let res = s
        .client()
        .post(s.url("/api/v1/quarantine/bulk-releases"))
        .bearer_auth(&token)
        .json(&json!({
            "filter": {"tenant": "clinic-a", "reason": "reminder_not_found"},
            "reason": "reminders backfilled",
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::ACCEPTED);
    let job: Value = res.json().await.unwrap();
    let id = job["id"].as_str().unwrap().to_owned();
    assert_eq!((job["status"].as_str(), job["total"].as_u64()), (Some("running"), Some(EVENTS)));

    // Progress shows while it runs.
    let midway = wait_job(&s, &token, &id, |j| j["processed"].as_u64() >= Some(2)).await;
    assert_eq!(midway["status"], "running");
    s.kill9();
    drop(s);

    let s = i.serve_with(&[stale]);
    // The restarted process resumes a stale job on its own too (every 2 s,
    // `jobs::resume`), and under load it can do so before the job is ever
    // seen interrupted: then a person's resume is not needed. Either way the
    // job is resumed once.
    let seen = wait_job(&s, &token, &id, |j| j["status"] == "interrupted" || j["status"] == "finished").await;
    if seen["status"] == "interrupted" {
        let before = seen["processed"].as_u64().unwrap();
        assert!((2..EVENTS).contains(&before), "killed midway: {seen}");
        let res = s
            .client()
            .post(s.url(&format!("/api/v1/quarantine/bulk-releases/{id}/resume")))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        // The automatic resume may still win between the read and this.
        assert!([StatusCode::ACCEPTED, StatusCode::CONFLICT].contains(&res.status()), "{}", res.status());
    }
    let done = wait_job(&s, &token, &id, |j| j["status"] == "finished").await;
    assert_eq!(done["processed"].as_u64(), Some(EVENTS));
    // Each entry's outcome commits with its release: nothing the killed
    // runner released is released again or miscounted.
    assert_eq!((done["released"].as_u64(), done["already_resolved"].as_u64()), (Some(EVENTS), Some(0)));
    assert_eq!(done["still_failing"], 0);

    let released = get(&s, &token, "/api/v1/quarantine?tenant=clinic-a&status=released").await;
    assert_eq!(released["total"].as_u64(), Some(EVENTS));
    // Exactly one effect per event: one reminder notice each.
    let outbox = get(&s, &token, "/api/v1/outbox?tenant=clinic-a").await;
    let notices = outbox.as_array().unwrap().iter().filter(|o| o["kind"] == "reminder_notice").count() as u64;
    assert_eq!(notices, EVENTS, "{outbox}");
    let audit = get(&s, &token, "/api/v1/audit?action=quarantine.bulk_release.&limit=200").await;
    let actions: Vec<&str> = audit.as_array().unwrap().iter().filter_map(|e| e["action"].as_str()).collect();
    for action in ["quarantine.bulk_release.start", "quarantine.bulk_release.resume", "quarantine.bulk_release.finish"]
    {
        assert_eq!(actions.iter().filter(|a| **a == action).count(), 1, "{action} in {actions:?}");
    }
});
