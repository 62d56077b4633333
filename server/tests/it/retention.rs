//! Retention through the real binary: the CLI refuses decisions below the
//! redelivery horizon with a clear message, and the purge task in
//! `signet serve` deletes an expired claim (and only that), reports it in
//! /metrics and the audit log.

use std::time::Duration;

use sea_orm::{ConnectionTrait, Statement};
use serde_json::{Value, json};

use crate::{both_engines, support::Install};

/// Sends a reminder.created and returns the receiver's answer body.
fn send(i: &Install, url: &str, secret: &str, event_id: &str) -> String {
    let body = i.data_dir().join(format!("{event_id}.json"));
    std::fs::write(
        &body,
        format!(
            r#"{{"type":"reminder.created","data":{{"reminder_id":"{event_id}","send_at":"2027-01-05T09:00:00Z"}}}}"#
        ),
    )
    .unwrap();
    let args = [
        "send",
        url,
        "--scheme",
        "standard-webhooks",
        "--secret",
        secret,
        "--file",
        body.to_str().unwrap(),
        "--event-id",
        event_id,
    ];
    let report: Value = i.cli_json(&args);
    report["attempts"][0]["response"].as_str().unwrap_or_default().to_owned()
}

both_engines!(retention_decisions_and_the_purge_task, async |i: &Install| {
    i.cli_json(&["tenant", "create", "clinic-a"]);
    i.cli_json(&["endpoint", "create", "clinic-a", "hooks", "--scheme", "standard-webhooks"]);
    let key = i.cli_json(&["key", "provision", "clinic-a", "hooks", "--approve-as", "rita"]);
    let secret = key["secret"].as_str().unwrap().to_owned();

    let overview = i.cli_json(&["retention", "show"]);
    assert_eq!(overview["horizons"].as_array().unwrap().len(), 4, "one per scheme, hmac included");
    assert_eq!(overview["endpoints"][0]["current"]["dedup_secs"], 90 * 86_400, "the manual resend window");

    let below = i.cli(&["retention", "set", "clinic-a", "hooks", "--dedup", "12h", "--reason", "shorter"], "");
    assert!(!below.status.success());
    let err = String::from_utf8_lossy(&below.stderr);
    assert!(err.contains("below the standard-webhooks redelivery horizon of 2 d"), "{err}");
    let bad = i.cli(&["retention", "set", "clinic-a", "hooks", "--dedup", "soon", "--reason", "x"], "");
    assert!(String::from_utf8_lossy(&bad.stderr).contains("expected a duration"), "bad input gets a clear error");

    let v = i.cli_json(&[
        "retention",
        "set",
        "clinic-a",
        "hooks",
        "--dedup",
        "2d",
        "--body",
        "1d",
        "--reason",
        "data minimisation",
        "--accept-risk",
    ]);
    assert_eq!((v["current"]["version"].as_i64(), v["current"]["actor"].as_str()), (Some(2), Some("cli")));
    let refused = i.cli(&["retention", "horizon", "standard-webhooks", "3d", "--reason", "longer retries"], "");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("clinic-a/hooks"), "names the endpoint to raise first");

    let s = i.serve_with(&[("SIGNET_PURGE_INTERVAL_SECS", "1")]);
    let url = s.url("/hooks/clinic-a/hooks");
    assert!(send(i, &url, &secret, "msg_old").contains("applied"));
    assert!(send(i, &url, &secret, "msg_new").contains("applied"));
    // Age one claim past its 2-day dedup retention.
    let db = domain::db::connect(&i.database_url).await.unwrap();
    let old = domain::clock::now_ms() - 3 * 86_400_000;
    db.execute_raw(Statement::from_string(
        db.get_database_backend(),
        format!("UPDATE inbox_claims SET received_at = {old} WHERE event_id = 'msg_old'"),
    ))
    .await
    .unwrap();
    let claims = |db: sea_orm::DatabaseConnection| async move {
        let rows = db
            .query_all_raw(Statement::from_string(
                db.get_database_backend(),
                "SELECT event_id FROM inbox_claims ORDER BY event_id",
            ))
            .await
            .unwrap();
        rows.iter().map(|r| r.try_get::<String>("", "event_id").unwrap()).collect::<Vec<_>>()
    };
    let mut left = claims(db.clone()).await;
    for _ in 0..100 {
        if left.len() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        left = claims(db.clone()).await;
    }
    assert_eq!(left, vec!["msg_new".to_owned()], "the expired claim is purged, the fresh one kept");

    // The run finishes (bodies, replay records, audit) after the claim is gone.
    let want = "signet_retention_purged_total{kind=\"claims\"} 1";
    let mut metrics = String::new();
    for _ in 0..50 {
        metrics = reqwest::get(&s.metrics).await.unwrap().text().await.unwrap();
        if metrics.contains(want) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(metrics.contains(want), "{metrics}");
    let audited = db
        .query_one_raw(Statement::from_string(
            db.get_database_backend(),
            "SELECT COUNT(*) AS n FROM audit_log WHERE action = 'retention.purge'",
        ))
        .await
        .unwrap()
        .unwrap()
        .try_get::<i64>("", "n")
        .unwrap();
    assert!(audited >= 1);
    // The kept claim still makes its redelivery a duplicate (a second
    // later, so it is a new signed message rather than a replay).
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert!(send(i, &url, &secret, "msg_new").contains("duplicate"));
});

// Issue 13: a horizon raised under an endpoint's decision (as migration
// 000012 can) is flagged by `retention show` and in the evidence, never
// changed silently; and the compound event key from the shell.
both_engines!(short_decisions_are_flagged_and_event_keys_are_set_from_the_shell, async |i: &Install| {
    i.cli_json(&["tenant", "create", "clinic-a"]);
    i.cli_json(&["endpoint", "create", "clinic-a", "hooks", "--scheme", "standard-webhooks"]);
    i.cli_json(&[
        "retention",
        "set",
        "clinic-a",
        "hooks",
        "--dedup",
        "2d",
        "--body",
        "1d",
        "--reason",
        "at the horizon",
        "--accept-risk",
    ]);
    let text = |args: &[&str]| String::from_utf8_lossy(&i.cli(args, "").stdout).into_owned();
    assert!(!text(&["retention", "show"]).contains("BELOW HORIZON"));
    assert!(text(&["retention", "show"]).contains("source: Svix"), "each horizon names its source");
    let db = domain::db::connect(&i.database_url).await.unwrap();
    let now = domain::clock::now_ms();
    db.execute_raw(Statement::from_string(
        db.get_database_backend(),
        format!(
            "INSERT INTO redelivery_horizons (scheme, version, horizon_secs, actor, reason, created_at, source) \
             SELECT scheme, MAX(version) + 1, {}, 'system', 'a longer published schedule', {now}, 'test' \
             FROM redelivery_horizons \
             WHERE scheme = 'standard-webhooks' GROUP BY scheme",
            3 * 86_400
        ),
    ))
    .await
    .unwrap();
    let shown = text(&["retention", "show", "clinic-a", "hooks"]);
    assert!(shown.contains("BELOW HORIZON: decided 2 d"), "{shown}");
    let v = i.cli_json(&["retention", "show", "clinic-a", "hooks"]);
    assert_eq!(
        (v["below_horizon"].as_bool(), v["current"]["dedup_secs"].as_i64()),
        (Some(true), Some(2 * 86_400)),
        "flagged, not changed"
    );
    let evidence = i.data_dir().join("evidence");
    let out = i.cli(&["--json", "evidence", "export", "--out", evidence.to_str().unwrap()], "");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let bundle: Value =
        serde_json::from_str(&std::fs::read_to_string(evidence.join("evidence.json")).unwrap()).unwrap();
    let findings = bundle["findings"].as_array().unwrap();
    assert!(
        findings.iter().any(|f| f["id"] == "retention_below_horizon" && f["subject"] == "clinic-a/hooks"),
        "{findings:?}"
    );

    // The compound key for events without an id.
    assert!(text(&["endpoint", "event-key", "clinic-a", "hooks"]).contains("quarantined (missing_event_id)"));
    let no_reason = i.cli(&["endpoint", "event-key", "clinic-a", "hooks", "--fields", "type,data.reminder_id"], "");
    assert!(!no_reason.status.success() && String::from_utf8_lossy(&no_reason.stderr).contains("--reason"));
    let type_only = i.cli(&["endpoint", "event-key", "clinic-a", "hooks", "--fields", "type", "--reason", "x"], "");
    assert!(
        String::from_utf8_lossy(&type_only.stderr).contains("at least one data field"),
        "bad input gets a clear error"
    );
    let set = i.cli_json(&[
        "endpoint",
        "event-key",
        "clinic-a",
        "hooks",
        "--fields",
        "type,data.reminder_id,occurred_at",
        "--reason",
        "documented by the sender",
    ]);
    assert_eq!(set["fields"], serde_json::json!(["type", "data.reminder_id", "occurred_at"]));
    assert_eq!(i.cli_json(&["endpoint", "list", "clinic-a"])[0]["event_key"], set["fields"]);
    let removed = i.cli_json(&["endpoint", "event-key", "clinic-a", "hooks", "--none", "--reason", "ids now sent"]);
    assert!(removed["fields"].is_null());
    assert_eq!(removed["history"].as_array().unwrap().len(), 2);
    let audit = i.cli(&["audit", "verify"], "");
    assert!(audit.status.success(), "{}", String::from_utf8_lossy(&audit.stderr));
});

// Retention below a scheme's manual resend window: the CLI exits 1 and the
// API answers 422 `below_manual_resend` unless the risk is accepted
// (`--accept-risk`, `accept_risk: true`); each horizon shows both windows
// with their sources; an accepted risk is a finding in the bundle.
both_engines!(retention_below_a_manual_resend_window_needs_the_risk_accepted, async |i: &Install| {
    i.cli_json(&["tenant", "create", "clinic-a"]);
    i.cli_json(&["endpoint", "create", "clinic-a", "pay", "--scheme", "stripe"]);
    let shown = String::from_utf8_lossy(&i.cli(&["retention", "show"], "").stdout).into_owned();
    assert!(shown.contains("manual resend 30 d (source: Stripe"), "{shown}");
    let overview = i.cli_json(&["retention", "show"]);
    assert_eq!(overview["endpoints"][0]["current"]["dedup_secs"], 30 * 86_400);

    let refused = i.cli(&["retention", "set", "clinic-a", "pay", "--dedup", "7d", "--reason", "shorter"], "");
    assert_eq!(refused.status.code(), Some(1));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("below the stripe manual resend window of 30 d") && err.contains("--accept-risk"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let v = i.cli_json(&["retention", "set", "clinic-a", "pay", "--dedup", "7d", "--reason", "x", "--accept-risk"]);
    assert_eq!(v["below_manual_resend"], true);

    let admin =
        i.cli_json(&["token", "create", "--name", "ops", "--role", "admin"])["token"].as_str().unwrap().to_owned();
    let s = i.serve();
    let api = reqwest::Client::new();
    let url = s.url("/api/v1/tenants/clinic-a/endpoints/pay/retention");
    let put = |body: Value| api.put(url.clone()).bearer_auth(&admin).json(&body).send();
    let res = put(json!({"dedup_secs": 10 * 86_400, "reason": "shorter"})).await.unwrap();
    assert_eq!(res.status(), 422);
    assert_eq!(res.json::<Value>().await.unwrap()["error"], "below_manual_resend");
    let res = put(json!({"dedup_secs": 10 * 86_400, "reason": "agreed", "accept_risk": true})).await.unwrap();
    assert_eq!(res.status(), 200);
    let body: Value = res.json().await.unwrap();
    assert_eq!(
        (body["below_manual_resend"].as_bool(), body["manual_resend_secs"].as_i64()),
        (Some(true), Some(30 * 86_400))
    );
    let export = api.post(s.url("/api/v1/evidence/exports")).bearer_auth(&admin).send().await.unwrap();
    let bundle: Value = export.json().await.unwrap();
    let findings = bundle["evidence"]["findings"].as_array().unwrap();
    assert!(
        findings.iter().any(|f| f["id"] == "retention_below_manual_resend"
            && f["severity"] == "warning"
            && f["subject"] == "clinic-a/pay"),
        "{findings:?}"
    );
    let stripe = bundle["evidence"]["retention"]["horizons"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["scheme"] == "stripe")
        .cloned();
    assert_eq!(stripe.unwrap()["manual_resend_secs"], 30 * 86_400);
});
