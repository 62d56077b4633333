//! The rollout order through the real binary (issue 23 item 3): the API
//! answers 409 `rollout_order` naming what is missing, disabling is never
//! refused, and once a drill run passed on this binary and a reviewer
//! approved a bundle holding the tenant's key, enabling goes through; the
//! bundle then carries the live cohort check.

use serde_json::{Value, json};

use crate::{both_engines, support::Install};

both_engines!(enabling_retries_over_the_api_follows_the_rollout_order, async |i: &Install| {
    i.cli_json(&["tenant", "create", "clinic-a"]);
    i.cli_json(&["endpoint", "create", "clinic-a", "hooks", "--scheme", "standard-webhooks"]);
    let key = i.cli_json(&["key", "provision", "clinic-a", "hooks", "--approve-as", "rita"]);
    let key_id = key["key_id"].as_str().unwrap().to_owned();
    let admin =
        i.cli_json(&["token", "create", "--name", "ops", "--role", "admin"])["token"].as_str().unwrap().to_owned();
    let s = i.serve();
    let c = reqwest::Client::new();
    let url = s.url("/api/v1/tenants/clinic-a/retry-policy");
    let put = |policy: &'static str| {
        c.put(&url).bearer_auth(&admin).json(&json!({"policy": policy, "reason": "cohort 1"})).send()
    };
    let refused = put("enabled").await.unwrap();
    assert_eq!(refused.status(), 409);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"], "rollout_order", "{body}");
    let said = body["message"].as_str().unwrap();
    assert!(said.contains("no drill run passed on this build"), "{said}");
    assert!(said.contains("clinic-a: no approved evidence bundle"), "{said}");
    // Disabling is the rollback switch: never refused.
    assert_eq!(put("disabled").await.unwrap().status(), 200);

    i.meet_rollout_order();
    // A key provisioned after the approval is not covered, and is named.
    let second = i.cli_json(&["key", "provision", "clinic-a", "hooks", "--approve-as", "rita"]);
    let second = second["key_id"].as_str().unwrap().to_owned();
    let refused = put("enabled").await.unwrap();
    assert_eq!(refused.status(), 409);
    let said = refused.json::<Value>().await.unwrap()["message"].as_str().unwrap().to_owned();
    assert!(said.contains(&second) && !said.contains(&key_id), "{said}");
    assert!(!said.contains("no drill run"), "{said}");

    i.meet_rollout_order();
    let ok = put("enabled").await.unwrap();
    assert_eq!(ok.status(), 200);
    let v: Value = ok.json().await.unwrap();
    assert_eq!((v["policy"].as_str(), v["version"].as_i64()), (Some("enabled"), Some(3)), "{v}");

    // After enabling: the bundle's live cohort check counts the events
    // claimed since, on the printable page too.
    use domain::crypto::{SigningSecret, signature};
    use views::scheme::Scheme;
    let secret = SigningSecret::parse(key["secret"].as_str().unwrap()).unwrap();
    let body = json!({"type": "reminder.created", "data": {"reminder_id": "r-1", "send_at": "2027-01-05T09:00:00Z"}})
        .to_string();
    let now = domain::clock::now_ms() / 1000;
    let mut post = c.post(s.url("/hooks/clinic-a/hooks")).body(body.clone());
    for (k, v) in signature::sign(Scheme::StandardWebhooks, &secret, body.as_bytes(), now, "evt-1").unwrap() {
        post = post.header(k, v);
    }
    assert_eq!(post.send().await.unwrap().status(), 200);
    let exported: Value =
        c.post(s.url("/api/v1/evidence/exports")).bearer_auth(&admin).send().await.unwrap().json().await.unwrap();
    let cohort = &exported["evidence"]["cohort_check"];
    assert_eq!(cohort.as_array().map(Vec::len), Some(1), "{cohort}");
    assert_eq!((&cohort[0]["tenant"], &cohort[0]["events_checked"]), (&json!("clinic-a"), &json!(1)), "{cohort}");
    assert_eq!(cohort[0]["breaches_total"], 0, "{cohort}");
    let html = c.get(s.url("/api/v1/evidence.html")).bearer_auth(&admin).send().await.unwrap().text().await.unwrap();
    assert!(html.contains("Live cohort check"), "{html}");
});

// The setting is validated (1–90 days) and the CLI reads it.
both_engines!(the_drill_age_setting_is_validated_and_read_by_the_cli, async |i: &Install| {
    i.cli_json(&["tenant", "create", "clinic-a"]);
    let set = |age: &str| {
        i.command()
            .env("SIGNET_ROLLOUT_DRILL_MAX_AGE_DAYS", age)
            .args(["retry-policy", "set", "clinic-a", "--policy", "enabled", "--reason", "cohort 1"])
            .output()
            .unwrap()
    };
    for bad in ["0", "91", "week"] {
        let out = set(bad);
        assert!(!out.status.success(), "{bad} was accepted");
        assert!(String::from_utf8_lossy(&out.stderr).contains("rollout-drill-max-age-days"), "{bad}");
    }
    let out = set("30");
    assert_eq!(out.status.code(), Some(1));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("in the last 30 days"), "{said}");
});
