//! `POST /api/v1/tenants/{t}/endpoints/{e}/test-delivery` against the real
//! binary: a test delivery signed with the endpoint's own key goes through
//! the real receiver and reports every gate in order; it keeps nothing (no
//! claim, so a real event with its id later applies; no replay record,
//! reminder, outbox intent or delivery-log row); it is counted apart from
//! real traffic; it is audited without the body or the secret; and what it
//! cannot sign or may not do is refused with a code.

use std::time::Duration;

use domain::crypto::{SigningSecret, signature};
use sea_orm::{ConnectionTrait, Statement};
use serde_json::{Value, json};
use views::scheme::Scheme;

use crate::{
    both_engines,
    support::{Install, Server},
};

/// A `v1a` public key from an independent implementation (see `v1a.rs`).
const UPLOADED_PUBLIC: &str = "whpk_BXQTWuobKgvQhbcdjfbyHQ2+sNPTDN+JI6A0xBQ/sDg=";

fn token(i: &Install, name: &str, role: &str, tenant: Option<&str>) -> String {
    let mut args = vec!["token", "create", "--name", name, "--role", role];
    args.extend(tenant.map(|t| ["--tenant", t]).into_iter().flatten());
    i.cli_json(&args)["token"].as_str().unwrap().to_owned()
}

async fn test_delivery(s: &Server, token: &str, endpoint: &str, body: Option<Value>) -> (u16, Value) {
    let url = s.url(&format!("/api/v1/tenants/clinic-a/endpoints/{endpoint}/test-delivery"));
    let mut r = reqwest::Client::new().post(url).bearer_auth(token);
    if let Some(b) = body {
        r = r.json(&b);
    }
    let res = r.send().await.unwrap();
    (res.status().as_u16(), res.json().await.unwrap_or(Value::Null))
}

fn results(report: &Value) -> Vec<(String, String)> {
    report["gates"]
        .as_array()
        .unwrap_or_else(|| panic!("no gates: {report}"))
        .iter()
        .map(|g| (g["name"].as_str().unwrap().to_owned(), g["result"].as_str().unwrap().to_owned()))
        .collect()
}

async fn count(db: &sea_orm::DatabaseConnection, table: &str) -> i64 {
    let sql = format!("SELECT COUNT(*) AS n FROM {table}");
    let row = db.query_one_raw(Statement::from_string(db.get_database_backend(), sql)).await.unwrap().unwrap();
    row.try_get::<i64>("", "n").unwrap()
}

/// The sum of a counter's series whose labels contain `labels`.
fn metric(text: &str, name: &str, labels: &str) -> u64 {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && l.contains(labels))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

const NAMES: [&str; 9] =
    ["endpoint", "body_size", "signature_headers", "signature", "timestamp", "replay", "envelope", "scope", "claim"];

both_engines!(a_test_delivery_passes_every_gate_and_keeps_nothing, async |i: &Install| {
    i.cli_json(&["tenant", "create", "clinic-a"]);
    for (slug, scheme) in [("hooks", "standard-webhooks"), ("pay", "stripe"), ("gh", "github")] {
        i.cli_json(&["endpoint", "create", "clinic-a", slug, "--scheme", scheme]);
    }
    let key = i.cli_json(&["key", "provision", "clinic-a", "hooks", "--approve-as", "rita"]);
    let (key_id, secret) = (key["key_id"].as_str().unwrap().to_owned(), key["secret"].as_str().unwrap().to_owned());
    for slug in ["pay", "gh"] {
        i.cli_json(&["key", "provision", "clinic-a", slug, "--approve-as", "rita"]);
    }
    let carla = token(i, "carla", "clinic-admin", Some("clinic-a"));
    let admin = token(i, "root", "admin", None);
    let s = i.serve();

    let (status, report) = test_delivery(&s, &carla, "hooks", None).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["test"], true);
    assert_eq!(report["kept"], false);
    assert_eq!(report["key_id"], key_id.as_str());
    assert_eq!(report["event_type"], "reminder.created");
    assert_eq!((report["status"].as_u64(), report["outcome"].as_str()), (Some(200), Some("applied")), "{report}");
    assert_eq!(report["answer"]["status"], "applied");
    let expected: Vec<(String, String)> = NAMES.iter().map(|n| ((*n).to_owned(), "passed".to_owned())).collect();
    assert_eq!(results(&report), expected);
    assert_eq!(report["gates"][8]["code"], "applied");
    let event_id = report["event_id"].as_str().unwrap().to_owned();
    assert!(event_id.starts_with("test_"), "{event_id}");

    // Every scheme signs with its own key and passes the same gates.
    for slug in ["pay", "gh"] {
        let (status, report) = test_delivery(&s, &admin, slug, Some(json!({}))).await;
        assert_eq!(status, 200, "{slug}: {report}");
        assert_eq!(results(&report), expected, "{slug}: {report}");
    }

    // Effects that write an outbox intent or a quarantine entry run, and
    // are rolled back with the rest.
    let (status, report) = test_delivery(&s, &carla, "hooks", Some(json!({"event_type": "otp.requested"}))).await;
    assert_eq!((status, report["outcome"].as_str()), (200, Some("applied")), "{report}");
    let (status, report) = test_delivery(&s, &carla, "hooks", Some(json!({"event_type": "reminder.scheduled"}))).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!((report["status"].as_u64(), report["outcome"].as_str()), (Some(202), Some("quarantined")));
    assert_eq!(report["gates"][8]["result"], "failed", "{report}");
    assert_eq!(report["gates"][8]["code"], "reminder_not_found");
    assert_eq!(report["gates"][7]["result"], "passed");

    // Nothing was kept: no claim, replay record, reminder, outbox intent,
    // quarantine entry or delivery-log row.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let db = domain::db::connect(&i.database_url).await.unwrap();
    for table in ["inbox_claims", "replay_records", "reminders", "outbox_intents", "quarantine", "delivery_log"] {
        assert_eq!(count(&db, table).await, 0, "{table} holds a row of a test delivery");
    }

    // A real event with the test's id is new, not a duplicate.
    let body = json!({"type": "reminder.created", "data": {"reminder_id": "r-1", "send_at": "2027-01-05T09:00:00Z"}})
        .to_string();
    let now = domain::clock::now_ms() / 1000;
    let headers = signature::sign(
        Scheme::StandardWebhooks,
        &SigningSecret::parse(&secret).unwrap(),
        body.as_bytes(),
        now,
        &event_id,
    )
    .unwrap();
    let mut r = reqwest::Client::new().post(s.url("/hooks/clinic-a/hooks")).body(body);
    for (k, v) in &headers {
        r = r.header(k.as_str(), v.as_str());
    }
    let res = r.send().await.unwrap();
    assert_eq!(res.status().as_u16(), 200);
    let answer: Value = res.json().await.unwrap();
    assert_eq!(answer["status"], "applied", "{answer}");

    // Counted apart: five tests, one real delivery.
    let metrics = reqwest::get(&s.metrics).await.unwrap().text().await.unwrap();
    assert_eq!(metric(&metrics, "signet_test_deliveries_total", "outcome=\"applied\""), 4, "{metrics}");
    assert_eq!(metric(&metrics, "signet_test_deliveries_total", "outcome=\"quarantined\""), 1, "{metrics}");
    assert_eq!(metric(&metrics, "signet_webhooks_total", "outcome=\"applied\""), 1, "{metrics}");
    assert_eq!(metric(&metrics, "signet_webhooks_total", ""), 1, "{metrics}");

    // Audited as carla's action, naming ids and codes, never the secret or body.
    let res = reqwest::Client::new()
        .get(s.url("/api/v1/audit?action=endpoint.test_delivery"))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap();
    let audit: Value = res.json().await.unwrap();
    let entries = audit.as_array().unwrap_or_else(|| panic!("{audit}"));
    assert_eq!(entries.len(), 5, "{audit}");
    let mine = entries.iter().find(|e| e["actor"] == "carla").unwrap_or_else(|| panic!("{audit}"));
    assert_eq!(mine["target_id"], "clinic-a/hooks");
    let text = audit.to_string();
    assert!(text.contains(&event_id), "{text}");
    assert!(!text.contains(&secret), "the secret is in the audit log");
    for field in ["reminder_id", "send_at", "otp_request_id"] {
        assert!(!text.contains(field), "the body is in the audit log: {text}");
    }
    assert!(!s.output().contains(&secret), "the secret was logged");
});

both_engines!(a_test_delivery_names_its_failing_gate_and_refuses_what_it_cannot_sign, async |i: &Install| {
    i.cli_json(&["tenant", "create", "clinic-a"]);
    i.cli_json(&["tenant", "create", "clinic-b"]);
    let create = |slug: &str, extra: &[&str]| {
        let mut args = vec!["endpoint", "create", "clinic-a", slug, "--scheme", "standard-webhooks"];
        args.extend(extra);
        i.cli_json(&args);
    };
    create("hooks", &["--event-types", "reminder.created"]);
    create("empty", &[]);
    create("pending", &[]);
    create("public", &[]);
    create("off", &[]);
    create("generated", &[]);
    i.cli_json(&["key", "provision", "clinic-a", "hooks", "--approve-as", "rita"]);
    i.cli_json(&["key", "provision", "clinic-a", "pending"]);
    i.cli_json(&["key", "provision", "clinic-a", "public", "--public-key", UPLOADED_PUBLIC, "--approve-as", "rita"]);
    i.cli_json(&["key", "provision", "clinic-a", "off", "--approve-as", "rita"]);
    let generated =
        i.cli_json(&["key", "provision", "clinic-a", "generated", "--generate-ed25519", "--approve-as", "rita"]);
    let uploaded = i.cli_json(&["key", "list", "--tenant", "clinic-a"]);
    let admin = token(i, "root", "admin", None);
    let s = i.serve();

    // Gate 8: a type outside the key's scope is sent as asked and refused there.
    let (status, report) = test_delivery(&s, &admin, "hooks", Some(json!({"event_type": "otp.requested"}))).await;
    assert_eq!(status, 200, "{report}");
    let got: Vec<String> = results(&report).into_iter().map(|(_, r)| r).collect();
    let want = ["passed", "passed", "passed", "passed", "passed", "passed", "passed", "failed", "not_reached"];
    assert_eq!(got, want, "{report}");
    assert_eq!(report["gates"][7]["code"], "event_type_not_permitted");
    assert_eq!((report["status"].as_u64(), report["outcome"].as_str()), (Some(403), Some("event_type_not_permitted")));

    // Gate 1: a disabled endpoint is unknown to the receiver.
    let res = reqwest::Client::new()
        .patch(s.url("/api/v1/tenants/clinic-a/endpoints/off"))
        .bearer_auth(&admin)
        .json(&json!({"enabled": false}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 200);
    let (status, report) = test_delivery(&s, &admin, "off", None).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["gates"][0]["result"], "failed", "{report}");
    assert_eq!(report["gates"][0]["code"], "unknown_endpoint");
    assert_eq!(report["gates"][1]["result"], "not_reached");
    assert_eq!(report["status"], 404);

    // A v1a pair Signet generated: its sealed private key signs `v1a`.
    let (status, report) = test_delivery(&s, &admin, "generated", None).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["key_id"], generated["key_id"]);
    assert!(results(&report).iter().all(|(_, r)| r == "passed"), "{report}");

    // What cannot be signed, or is asked badly, is refused with a code.
    for (endpoint, body, status, code) in [
        ("empty", None, 409, "no_active_key"),
        ("pending", None, 409, "no_active_key"),
        ("public", None, 409, "key_cannot_sign"),
        ("hooks", Some(json!({"event_type": "*"})), 422, "invalid_event_type"),
        ("hooks", Some(json!({"event_type": "Not A Type"})), 422, "invalid_event_type"),
        ("hooks", Some(json!({"event_type": "x".repeat(101)})), 422, "invalid_event_type"),
        ("hooks", Some(json!({"event_type": "reminder.created", "body": "{}"})), 422, "unknown_field"),
        ("nope", None, 404, "not_found"),
    ] {
        let (got, answer) = test_delivery(&s, &admin, endpoint, body).await;
        assert_eq!((got, answer["error"].as_str()), (status, Some(code)), "{endpoint}: {answer}");
        assert!(answer["message"].as_str().is_some_and(|m| !m.is_empty()), "{answer}");
    }

    // Roles: only the tenant's clinic admins and admins may send one.
    for (name, role, tenant, status) in [
        ("rita", "reviewer", None, 403),
        ("otto", "oncall", None, 403),
        ("bob", "clinic-admin", Some("clinic-b"), 404),
        ("carla", "clinic-admin", Some("clinic-a"), 200),
    ] {
        let t = token(i, name, role, tenant);
        let (got, answer) = test_delivery(&s, &t, "hooks", None).await;
        assert_eq!(got, status, "{name}: {answer}");
    }
    let (got, _) = test_delivery(&s, "sgt_not_a_token", "hooks", None).await;
    assert_eq!(got, 401);
    drop(s);

    // The evidence's credential map is honest about it: the generated key
    // can sign (Signet holds its private key sealed), the uploaded one cannot.
    let public_id = uploaded
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["public_key"] == UPLOADED_PUBLIC)
        .map(|k| k["key_id"].as_str().unwrap().to_owned())
        .unwrap();
    let out = i.data_dir().join("bundle");
    i.cli_json(&["evidence", "export", "--out", out.to_str().unwrap()]);
    let evidence: Value = serde_json::from_str(&std::fs::read_to_string(out.join("evidence.json")).unwrap()).unwrap();
    let creds = evidence["credentials"].as_array().unwrap();
    let can_sign = |id: &str| creds.iter().find(|c| c["key_id"] == id).map(|c| c["can_sign"].clone());
    assert_eq!(can_sign(generated["key_id"].as_str().unwrap()), Some(Value::Bool(true)));
    assert_eq!(can_sign(&public_id), Some(Value::Bool(false)));
    let html = std::fs::read_to_string(out.join("evidence.html")).unwrap();
    assert!(html.contains("private key held · can sign") && html.contains("cannot sign"), "evidence.html");
});

both_engines!(hmac_endpoints_sign_their_test_deliveries_as_their_profile_says, async |i: &Install| {
    i.cli_json(&["tenant", "create", "clinic-a"]);
    for preset in ["dvir", "shopify", "slack"] {
        i.cli_json(&["endpoint", "create", "clinic-a", preset, "--scheme", "hmac", "--preset", preset]);
        i.cli_json(&["key", "provision", "clinic-a", preset, "--approve-as", "rita"]);
    }
    let carla = token(i, "carla", "clinic-admin", Some("clinic-a"));
    let s = i.serve();
    let expected: Vec<(String, String)> = NAMES.iter().map(|n| ((*n).to_owned(), "passed".to_owned())).collect();
    for preset in ["dvir", "shopify", "slack"] {
        let (status, report) = test_delivery(&s, &carla, preset, None).await;
        assert_eq!(status, 200, "{preset}: {report}");
        assert_eq!(results(&report), expected, "{preset}: {report}");
        assert_eq!(report["outcome"], "applied", "{preset}: {report}");
    }
    let db = domain::db::connect(&i.database_url).await.unwrap();
    assert_eq!(count(&db, "inbox_claims").await, 0, "a test delivery keeps no claim");
});
