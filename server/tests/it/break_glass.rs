//! Break-glass for the rollout order through the real binary (issue 23
//! item 3): a refused enabling with `override_reason` answers 202 with a
//! pending request; only a second person who may set the policy approves
//! it (403 `self_approval` for the requester, 404 for a clinic admin of
//! another tenant); approval enables retries; a request is decided once.
//! The CLI: `--override-reason` exits 0 with the request,
//! `approve-override` needs another reviewer.

use serde_json::{Value, json};

use crate::{both_engines, support::Install};

fn token(i: &Install, name: &str, role: &str, tenant: Option<&str>) -> String {
    let mut args = vec!["token", "create", "--name", name, "--role", role];
    if let Some(t) = tenant {
        args.extend(["--tenant", t]);
    }
    i.cli_json(&args)["token"].as_str().unwrap().to_owned()
}

fn registry(i: &Install) {
    for t in ["clinic-a", "clinic-b"] {
        i.cli_json(&["tenant", "create", t]);
    }
    i.cli_json(&["endpoint", "create", "clinic-a", "hooks", "--scheme", "standard-webhooks"]);
    i.cli_json(&["key", "provision", "clinic-a", "hooks", "--approve-as", "rita"]);
}

both_engines!(an_override_over_the_api_needs_a_second_person, async |i: &Install| {
    registry(i);
    let ops = token(i, "ops", "admin", None);
    let ops2 = token(i, "ops2", "admin", None);
    let rev = token(i, "rev", "reviewer", None);
    let other = token(i, "b-admin", "clinic-admin", Some("clinic-b"));
    let s = i.serve();
    let c = reqwest::Client::new();
    let url = s.url("/api/v1/tenants/clinic-a/retry-policy");
    let put = |who: &str, body: Value| c.put(&url).bearer_auth(who).json(&body).send();
    let status_and_error = async |r: reqwest::Response| {
        let status = r.status().as_u16();
        let body: Value = r.json().await.unwrap();
        (status, body["error"].as_str().unwrap_or_default().to_owned())
    };

    let asked = put(&ops, json!({"policy": "enabled", "reason": "cohort 1", "override_reason": "providers give up"}))
        .await
        .unwrap();
    assert_eq!(asked.status(), 202);
    let req: Value = asked.json().await.unwrap();
    assert_eq!((req["status"].as_str(), req["requested_by"].as_str()), (Some("pending_approval"), Some("ops")));
    let missing = req["missing"].as_array().unwrap();
    assert!(missing.iter().any(|m| m.as_str().unwrap().contains("no drill run passed")), "{req}");
    let id = req["id"].as_str().unwrap().to_owned();

    let again = put(&ops2, json!({"policy": "enabled", "reason": "r", "override_reason": "again"})).await.unwrap();
    assert_eq!(status_and_error(again).await, (409, "override_pending".into()));
    let blank = put(&ops, json!({"policy": "enabled", "reason": "r", "override_reason": " "})).await.unwrap();
    assert_eq!(status_and_error(blank).await, (422, "invalid_override_reason".into()));
    // Disabling is never gated: an override reason with it changes nothing of the answer.
    let off = put(&ops, json!({"policy": "disabled", "reason": "r", "override_reason": "x"})).await.unwrap();
    assert_eq!(off.status(), 200);

    let listed: Value = c
        .get(s.url("/api/v1/tenants/clinic-a/retry-policy/overrides"))
        .bearer_auth(&rev)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed[0]["id"], id.as_str(), "{listed}");

    let decide = |who: &str, verb: &str, id: &str, body: Value| {
        c.post(s.url(&format!("/api/v1/tenants/clinic-a/retry-policy/overrides/{id}/{verb}")))
            .bearer_auth(who)
            .json(&body)
            .send()
    };
    let own = decide(&ops, "approve", &id, json!({})).await.unwrap();
    assert_eq!(status_and_error(own).await, (403, "self_approval".into()));
    let elsewhere = decide(&other, "approve", &id, json!({})).await.unwrap();
    assert_eq!(elsewhere.status(), 404, "a clinic admin of another tenant sees nothing");
    let reviewer = decide(&rev, "approve", &id, json!({})).await.unwrap();
    assert_eq!(reviewer.status(), 403);
    let unknown = decide(&ops2, "approve", "0190a0a0-0000-7000-8000-000000000000", json!({})).await.unwrap();
    assert_eq!(unknown.status(), 404);
    let no_comment = decide(&ops2, "reject", &id, json!({"comment": ""})).await.unwrap();
    assert_eq!(no_comment.status(), 422);
    let policy: Value = c.get(&url).bearer_auth(&ops).send().await.unwrap().json().await.unwrap();
    assert_eq!(policy["policy"], "disabled");

    let ok = decide(&ops2, "approve", &id, json!({"comment": "on call agrees"})).await.unwrap();
    assert_eq!(ok.status(), 200);
    let ok: Value = ok.json().await.unwrap();
    assert_eq!((ok["status"].as_str(), ok["decided_by"].as_str()), (Some("approved"), Some("ops2")), "{ok}");
    let policy: Value = c.get(&url).bearer_auth(&ops).send().await.unwrap().json().await.unwrap();
    assert_eq!(
        (policy["policy"].as_str(), policy["version"].as_i64()),
        (Some("enabled"), ok["policy_version"].as_i64())
    );
    let twice = decide(&ops2, "reject", &id, json!({"comment": "too late"})).await.unwrap();
    assert_eq!(status_and_error(twice).await, (409, "override_decided".into()));
});

both_engines!(the_cli_asks_for_an_override_and_another_reviewer_approves_it, async |i: &Install| {
    registry(i);
    let set = |tenants: &[&str], why: Option<&str>| {
        let mut args = vec!["--json", "retry-policy", "set"];
        args.extend_from_slice(tenants);
        args.extend(["--policy", "enabled", "--reason", "cohort 1"]);
        if let Some(w) = why {
            args.extend(["--override-reason", w]);
        }
        i.cli(&args, "")
    };
    let refused = set(&["clinic-a"], None);
    assert_eq!(refused.status.code(), Some(1));
    let both = set(&["clinic-a", "clinic-b"], Some("outage"));
    assert_eq!(both.status.code(), Some(1));
    let e: Value = serde_json::from_slice(both.stderr.trim_ascii()).unwrap();
    assert_eq!(e["error"], "override_per_tenant");

    let asked = set(&["clinic-a"], Some("outage"));
    assert_eq!(asked.status.code(), Some(0), "{}", String::from_utf8_lossy(&asked.stderr));
    let req: Value = serde_json::from_slice(&asked.stdout).unwrap();
    assert_eq!((req["status"].as_str(), req["requested_by"].as_str()), (Some("pending_approval"), Some("cli")));
    let id = req["id"].as_str().unwrap();
    // The list shows it.
    let listed = i.cli(&["retry-policy", "overrides", "clinic-a"], "");
    assert!(String::from_utf8_lossy(&listed.stdout).contains(id));

    let own = i.cli(&["--json", "retry-policy", "approve-override", "clinic-a", id, "--reviewer", "cli"], "");
    assert_eq!(own.status.code(), Some(1));
    let e: Value = serde_json::from_slice(own.stderr.trim_ascii()).unwrap();
    assert_eq!(e["error"], "self_approval");
    assert_eq!(i.cli_json(&["retry-policy", "show", "clinic-a"])["policy"], "disabled");

    let ok = i.cli_json(&["retry-policy", "approve-override", "clinic-a", id, "--reviewer", "rita"]);
    assert_eq!((ok["status"].as_str(), ok["decided_by"].as_str()), (Some("approved"), Some("rita")));
    assert_eq!(i.cli_json(&["retry-policy", "show", "clinic-a"])["policy"], "enabled");
    let late = i.cli(
        &["--json", "retry-policy", "reject-override", "clinic-a", id, "--reviewer", "rita", "--comment", "no"],
        "",
    );
    assert_eq!(late.status.code(), Some(1));
    let e: Value = serde_json::from_slice(late.stderr.trim_ascii()).unwrap();
    assert_eq!(e["error"], "override_decided");
});

// The console: the enabling form's break-glass field records a request, the
// panel lists it, and a second administrator's approve form enables retries.
both_engines!(the_console_asks_for_an_override_and_a_second_admin_approves_it, async |i: &Install| {
    const PASSWORD: &str = "a long enough password";
    registry(i);
    for name in ["ann", "bob"] {
        i.cli_json_stdin(&["user", "create", name, "--role", "admin"], PASSWORD);
    }
    let s = i.serve();
    let (ann, bob) = (s.logged_in("ann", PASSWORD).await, s.logged_in("bob", PASSWORD).await);
    let post = async |c: &reqwest::Client, path: &str, form: &[(&str, &str)]| {
        let res = c.post(s.url(path)).header("Origin", &s.base).form(form).send().await.unwrap();
        (res.status().as_u16(), res.text().await.unwrap())
    };
    let ask = [("tenant", "clinic-a"), ("policy", "enabled"), ("reason", "cohort 1"), ("override_reason", "outage")];
    let (status, body) = post(&ann, "/fn/set_retry_policy", &ask).await;
    assert!(status < 400, "{status} {body}");
    let listed: Value =
        ann.get(s.url("/fn/retry_overrides?tenant=clinic-a")).send().await.unwrap().json().await.unwrap();
    assert_eq!(
        (listed[0]["status"].as_str(), listed[0]["requested_by"].as_str()),
        (Some("pending_approval"), Some("ann"))
    );
    let id = listed[0]["id"].as_str().unwrap();
    let page = ann.get(s.url("/tenants/clinic-a")).send().await.unwrap().text().await.unwrap();
    assert!(page.contains("Break-glass overrides") && page.contains("Approve (second person)"), "{page}");

    let decide = [("tenant", "clinic-a"), ("id", id), ("decision", "approve"), ("comment", "")];
    let (status, body) = post(&ann, "/fn/decide_override", &decide).await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("second person"), "{body}");
    let (status, body) = post(&bob, "/fn/decide_override", &decide).await;
    assert!(status < 400, "{status} {body}");
    assert_eq!(i.cli_json(&["retry-policy", "show", "clinic-a"])["policy"], "enabled");
    // A blank break-glass field is no override: the gate's refusal stands.
    i.cli_json(&["retry-policy", "set", "clinic-a", "--policy", "disabled", "--reason", "incident"]);
    let plain = [("tenant", "clinic-a"), ("policy", "enabled"), ("reason", "again"), ("override_reason", " ")];
    let (status, body) = post(&ann, "/fn/set_retry_policy", &plain).await;
    assert_eq!(status, 409, "{body}");
    assert!(body.contains("rollout_order"), "{body}");
});
