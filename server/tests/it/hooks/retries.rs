//! Transient failures follow the tenant's retry policy.

use std::time::Duration;

use serde_json::{Value, json};
use views::scheme::Scheme;

use super::{Hook, count, db, enable_retries, setup};
use crate::{
    both_engines,
    support::{Install, created},
};

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
