//! Sign-off through the API and the console's downloads, and the
//! integrity rules a sign-off follows.

use serde_json::{Value, json};

use crate::{both_engines, support::Install};

both_engines!(sign_off_through_the_api_and_console_downloads, async |i: &Install| {
    i.cli_json(&["tenant", "create", "clinic-a"]);
    let reviewer =
        i.cli_json(&["token", "create", "--name", "rita", "--role", "reviewer"])["token"].as_str().unwrap().to_owned();
    let s = i.serve();
    let api = reqwest::Client::new();
    let none = api.get(s.url("/api/v1/evidence")).bearer_auth(&reviewer).send().await.unwrap();
    assert_eq!(none.status(), 404, "nothing exported yet, and a GET never exports");
    let created = api.post(s.url("/api/v1/evidence/exports")).bearer_auth(&reviewer).send().await.unwrap();
    assert_eq!(created.status(), 201);
    let b: Value = created.json().await.unwrap();
    let digest = b["digest"].as_str().unwrap();
    assert_eq!(digest.len(), 64);
    let latest: Value =
        api.get(s.url("/api/v1/evidence")).bearer_auth(&reviewer).send().await.unwrap().json().await.unwrap();
    assert_eq!(latest, b, "the GET reads the stored bundle");
    let by_digest: Value = api
        .get(s.url(&format!("/api/v1/evidence/exports/{digest}")))
        .bearer_auth(&reviewer)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(by_digest, b);
    let bad = api
        .post(s.url("/api/v1/evidence/signoffs"))
        .bearer_auth(&reviewer)
        .json(&json!({"digest": "cd".repeat(32), "decision": "approved", "comment": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 422);
    assert_eq!(bad.json::<Value>().await.unwrap()["error"], "unknown_digest");
    let unknown_field = api
        .post(s.url("/api/v1/evidence/signoffs"))
        .bearer_auth(&reviewer)
        .json(&json!({"digest": digest, "decision": "approved", "comment": "x", "extra": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown_field.status(), 422);
    let ok = api
        .post(s.url("/api/v1/evidence/signoffs"))
        .bearer_auth(&reviewer)
        .json(&json!({"digest": digest, "decision": "approved", "comment": "reviewed"}))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 201);
    let history: Value =
        api.get(s.url("/api/v1/evidence/signoffs")).bearer_auth(&reviewer).send().await.unwrap().json().await.unwrap();
    assert_eq!(history[0]["digest"], digest);
    // The printable page: its own policy lets its one style block in, no script.
    let html = api.get(s.url("/api/v1/evidence.html")).bearer_auth(&reviewer).send().await.unwrap();
    let csp = html.headers()["content-security-policy"].to_str().unwrap().to_owned();
    assert!(csp.contains("style-src 'sha256-") && csp.contains("default-src 'none'"), "{csp}");
    // Console downloads need a session; the API token is not one.
    let anon = api.get(s.url(&format!("/evidence/files/{digest}/manifest.json"))).send().await.unwrap();
    assert_eq!(anon.status(), 401);
});

// Sign-off integrity over the API: an older digest is 409 `stale_bundle`;
// approving a bundle with a critical finding needs it acknowledged by id
// with a comment (422 names what is missing, an unknown id, a blank
// comment); the acknowledgements are listed with the sign-off; a second
// sign-off by the same reviewer is 409 `already_signed`.
both_engines!(sign_off_integrity_through_the_api, async |i: &Install| {
    i.cli_json(&["tenant", "create", "clinic-a"]);
    let token = |name: &str| {
        i.cli_json(&["token", "create", "--name", name, "--role", "reviewer"])["token"].as_str().unwrap().to_owned()
    };
    let (rita, ross) = (token("rita"), token("ross"));
    // The audit log's append-only triggers gone: a critical
    // `constraint_missing` in every bundle.
    let db = domain::db::connect(&i.database_url).await.unwrap();
    use sea_orm::ConnectionTrait;
    let drop_triggers = if i.database_url.starts_with("postgres") {
        "ALTER TABLE audit_log DISABLE TRIGGER USER"
    } else {
        "DROP TRIGGER audit_log_no_update; DROP TRIGGER audit_log_no_delete"
    };
    db.execute_unprepared(drop_triggers).await.unwrap();
    db.close().await.ok();
    let s = i.serve();
    let api = reqwest::Client::new();
    let export = || async {
        let res = api.post(s.url("/api/v1/evidence/exports")).bearer_auth(&rita).send().await.unwrap();
        assert_eq!(res.status(), 201);
        res.json::<Value>().await.unwrap()
    };
    let sign = |token: &str, body: Value| {
        api.post(s.url("/api/v1/evidence/signoffs")).bearer_auth(token.to_owned()).json(&body).send()
    };
    let old = export().await;
    let new = export().await;
    let digest = new["digest"].as_str().unwrap();
    assert!(
        new["evidence"]["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["id"] == "constraint_missing" && f["severity"] == "critical"),
        "{}",
        new["evidence"]["findings"]
    );
    let ack = json!([{"finding": "constraint_missing", "comment": "triggers restored after this review"}]);

    let stale =
        sign(&rita, json!({"digest": old["digest"], "decision": "approved", "comment": "ok", "acknowledge": ack}))
            .await
            .unwrap();
    assert_eq!(stale.status(), 409);
    assert_eq!(stale.json::<Value>().await.unwrap()["error"], "stale_bundle");
    let missing = sign(&rita, json!({"digest": digest, "decision": "approved", "comment": "ok"})).await.unwrap();
    assert_eq!(missing.status(), 422);
    let body: Value = missing.json().await.unwrap();
    assert_eq!(body["error"], "unacknowledged_findings");
    assert!(body["message"].as_str().unwrap().contains("constraint_missing"), "{body}");
    let unknown =
        json!([{"finding": "constraint_missing", "comment": "fixed"}, {"finding": "made_up", "comment": "x"}]);
    let res = sign(&rita, json!({"digest": digest, "decision": "approved", "comment": "ok", "acknowledge": unknown}))
        .await
        .unwrap();
    assert_eq!(res.status(), 422);
    assert_eq!(res.json::<Value>().await.unwrap()["error"], "unknown_finding");
    let blank = json!([{"finding": "constraint_missing", "comment": " "}]);
    let res = sign(&rita, json!({"digest": digest, "decision": "approved", "comment": "ok", "acknowledge": blank}))
        .await
        .unwrap();
    assert_eq!(res.status(), 422);
    assert_eq!(res.json::<Value>().await.unwrap()["error"], "acknowledgement_comment_required");
    let extra = json!([{"finding": "constraint_missing", "comment": "x", "by": "me"}]);
    let res = sign(&rita, json!({"digest": digest, "decision": "approved", "comment": "ok", "acknowledge": extra}))
        .await
        .unwrap();
    assert_eq!(res.status(), 422, "unknown fields in an acknowledgement are refused");

    let ok = sign(&rita, json!({"digest": digest, "decision": "approved", "comment": "ok", "acknowledge": ack}))
        .await
        .unwrap();
    assert_eq!(ok.status(), 201);
    assert_eq!(ok.json::<Value>().await.unwrap()["acknowledged"], ack);
    let again =
        sign(&rita, json!({"digest": digest, "decision": "rejected", "comment": "second thoughts"})).await.unwrap();
    assert_eq!(again.status(), 409);
    assert_eq!(again.json::<Value>().await.unwrap()["error"], "already_signed");
    let other = sign(&ross, json!({"digest": digest, "decision": "rejected", "comment": "not yet"})).await.unwrap();
    assert_eq!(other.status(), 201, "another reviewer signs the same bundle");
    let history: Value =
        api.get(s.url("/api/v1/evidence/signoffs")).bearer_auth(&rita).send().await.unwrap().json().await.unwrap();
    let approval = history.as_array().unwrap().iter().find(|h| h["decision"] == "approved").unwrap();
    assert_eq!(approval["acknowledged"], ack);
    assert_eq!(approval["actor"], "rita");
});
