//! Retention through the real binary: the CLI refuses decisions below the
//! redelivery horizon with a clear message, and the purge task in
//! `signet serve` deletes an expired claim (and only that), reports it in
//! /metrics and the audit log.

use std::time::Duration;

use sea_orm::{ConnectionTrait, Statement};
use serde_json::Value;

use crate::{both_engines, support::Install};

/// Sends a reminder.created and returns the receiver's answer body.
fn send(i: &Install, url: &str, secret: &str, event_id: &str) -> String {
    let body = i.data_dir().join(format!("{event_id}.json"));
    std::fs::write(&body, format!(r#"{{"type":"reminder.created","data":{{"reminder_id":"{event_id}","send_at":"2027-01-05T09:00:00Z"}}}}"#)).unwrap();
    let args = ["send", url, "--scheme", "standard-webhooks", "--secret", secret, "--file", body.to_str().unwrap(), "--event-id", event_id];
    let report: Value = i.cli_json(&args);
    report["attempts"][0]["response"].as_str().unwrap_or_default().to_owned()
}

both_engines!(retention_decisions_and_the_purge_task, async |i: &Install| {
    i.cli_json(&["tenant", "create", "clinic-a"]);
    i.cli_json(&["endpoint", "create", "clinic-a", "hooks", "--scheme", "standard-webhooks"]);
    let key = i.cli_json(&["key", "provision", "clinic-a", "hooks", "--approve-as", "rita"]);
    let secret = key["secret"].as_str().unwrap().to_owned();

    let overview = i.cli_json(&["retention", "show"]);
    assert_eq!(overview["horizons"].as_array().unwrap().len(), 3);
    assert_eq!(overview["endpoints"][0]["current"]["dedup_secs"], 30 * 86_400);

    let below = i.cli(&["retention", "set", "clinic-a", "hooks", "--dedup", "12h", "--reason", "shorter"], "");
    assert!(!below.status.success());
    let err = String::from_utf8_lossy(&below.stderr);
    assert!(err.contains("below the standard-webhooks redelivery horizon of 1 d"), "{err}");
    let bad = i.cli(&["retention", "set", "clinic-a", "hooks", "--dedup", "soon", "--reason", "x"], "");
    assert!(String::from_utf8_lossy(&bad.stderr).contains("expected a duration"), "bad input gets a clear error");

    let v = i.cli_json(&["retention", "set", "clinic-a", "hooks", "--dedup", "2d", "--body", "1d", "--reason", "data minimisation"]);
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
    db.execute_raw(Statement::from_string(db.get_database_backend(), format!("UPDATE inbox_claims SET received_at = {old} WHERE event_id = 'msg_old'")))
        .await
        .unwrap();
    let claims = |db: sea_orm::DatabaseConnection| async move {
        let rows = db
            .query_all_raw(Statement::from_string(db.get_database_backend(), "SELECT event_id FROM inbox_claims ORDER BY event_id"))
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
        .query_one_raw(Statement::from_string(db.get_database_backend(), "SELECT COUNT(*) AS n FROM audit_log WHERE action = 'retention.purge'"))
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
