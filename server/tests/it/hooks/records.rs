//! What deliveries leave behind: no plaintext body or secret in the
//! database or the log, rollups and key usage written in batches, and a
//! delivery log that unknown paths cannot flood or forge.

use std::time::Duration;

use domain::crypto::{SigningSecret, signature};
use sea_orm::{ConnectionTrait, Statement};
use serde_json::{Value, json};
use views::scheme::Scheme;

use super::{db, hook, setup};
use crate::{
    both_engines,
    support::{Install, created},
};

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
    // The body rows hold the body only sealed.
    let db = db(i).await;
    let rows = db
        .query_all_raw(Statement::from_string(db.get_database_backend(), "SELECT body_ciphertext FROM event_bodies"))
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
    // The endpoint's rows, or with `*` the total rows beside them.
    let sum_of = |tenant: &'static str, outcome: &'static str, reason: &'static str| {
        let db = db.clone();
        async move {
            let rows = if tenant == "*" { "tenant_id = '*'" } else { "tenant_id <> '*'" };
            let row = db
                .query_one_raw(Statement::from_string(
                    db.get_database_backend(),
                    format!(
                        "SELECT CAST(COALESCE(SUM(count), 0) AS BIGINT) AS n FROM event_rollups \
                         WHERE outcome = '{outcome}' AND reason = '{reason}' AND {rows}"
                    ),
                ))
                .await
                .unwrap()
                .unwrap();
            row.try_get::<i64>("", "n").unwrap()
        }
    };
    let sum = |outcome: &'static str, reason: &'static str| sum_of("", outcome, reason);
    let key_row = || {
        let db = db.clone();
        let sql = format!("SELECT verified_count, last_verified_at FROM signing_keys WHERE id = '{}'", h.key_id);
        async move { db.query_one_raw(Statement::from_string(db.get_database_backend(), sql)).await.unwrap().unwrap() }
    };
    // Nothing is written per request; the flusher runs every 5 s, and
    // updates the key's count just after the rollups commit.
    let mut waited = 0;
    while (sum("applied", "").await < 3 || key_row().await.try_get::<i64>("", "verified_count").unwrap() < 3)
        && waited < 80
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
        waited += 1;
    }
    assert_eq!(sum("applied", "").await, 3);
    assert_eq!(sum("verification_failed", "mismatch").await, 2);
    assert_eq!((sum_of("*", "applied", "").await, sum_of("*", "verification_failed", "mismatch").await), (3, 2));
    let row = key_row().await;
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
