//! A provisioned secret is shown once and appears nowhere else: not in the
//! raw database, not in logs, not in any later response. A quarantined body
//! is decrypted only by an Origin-checked POST, never by a GET.

use serde_json::Value;

use crate::{
    both_engines,
    support::{Engine, Install},
};

/// Every stored byte: the SQLite files themselves, or a PostgreSQL data dump.
pub(crate) fn raw_database(i: &Install) -> Vec<u8> {
    match i.engine {
        Engine::Sqlite => {
            let mut all = Vec::new();
            for entry in std::fs::read_dir(i.data_dir()).unwrap() {
                let path = entry.unwrap().path();
                if path.file_name().unwrap().to_string_lossy().starts_with("signet.db") {
                    all.extend(std::fs::read(path).unwrap());
                }
            }
            assert!(!all.is_empty());
            all
        }
        Engine::Postgres => {
            let out =
                std::process::Command::new("pg_dump").args(["--data-only", &i.database_url]).output().expect("pg_dump");
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            out.stdout
        }
    }
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle.as_bytes())
}

both_engines!(a_secret_is_shown_once_and_stored_nowhere, async |i: &Install| {
    i.cli_json(&["tenant", "create", "clinic-a"]);
    i.cli_json(&["endpoint", "create", "clinic-a", "hooks", "--scheme", "standard-webhooks"]);
    let token =
        i.cli_json(&["token", "create", "--name", "t", "--role", "admin"])["token"].as_str().unwrap().to_owned();
    let cli_key = i.cli(&["--json", "key", "provision", "clinic-a", "hooks", "--approve-as", "rita"], "");
    assert!(cli_key.status.success());
    let cli_value: Value = serde_json::from_slice(&cli_key.stdout).unwrap();
    let cli_secret = cli_value["secret"].as_str().unwrap().to_owned();
    assert!(!contains(&cli_key.stderr, &cli_secret), "the CLI never logs the secret");

    let s = i.serve();
    let c = reqwest::Client::new();
    let created: Value = c
        .post(s.url("/api/v1/tenants/clinic-a/endpoints/hooks/keys"))
        .bearer_auth(&token)
        .json(&serde_json::json!({"approve": true, "reviewer": "rita"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let api_secret = created["secret"].as_str().unwrap().to_owned();
    let key_id = created["key_id"].as_str().unwrap().to_owned();
    let rotated: Value = c
        .post(s.url(&format!("/api/v1/keys/{key_id}/rotate")))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let rotated_secret = rotated["secret"].as_str().unwrap().to_owned();
    let secrets = [cli_secret, api_secret, rotated_secret];

    let mut later = String::new();
    for path in [
        "/api/v1/keys".to_owned(),
        format!("/api/v1/keys/{key_id}"),
        "/api/v1/tenants/clinic-a/endpoints/hooks/keys".to_owned(),
        "/api/v1/audit?limit=500".to_owned(),
        "/api/v1/tenants/clinic-a".to_owned(),
    ] {
        let res = c.get(s.url(&path)).bearer_auth(&token).send().await.unwrap();
        assert_eq!(res.status(), 200, "{path}");
        later.push_str(&res.text().await.unwrap());
    }
    later.push_str(&String::from_utf8_lossy(&i.cli(&["--json", "key", "list"], "").stdout));
    let logs = s.output();
    drop(s);
    let db = raw_database(i);
    for secret in &secrets {
        assert!(!later.contains(secret.as_str()), "secret in a later response");
        assert!(!logs.contains(secret.as_str()), "secret in the server log");
        assert!(!contains(&db, secret), "secret in the raw database");
        // The base64 body alone must not leak either.
        let body = secret.trim_start_matches("whsec_");
        assert!(!contains(&db, body), "secret bytes in the raw database");
    }
});

// Four eyes: an admin token that provisions a key can neither approve it
// later nor provision-and-approve it under its own name; another reviewer can.
both_engines!(nobody_approves_a_key_they_created, async |i: &Install| {
    i.cli_json(&["tenant", "create", "clinic-a"]);
    i.cli_json(&["endpoint", "create", "clinic-a", "hooks", "--scheme", "standard-webhooks"]);
    let admin =
        i.cli_json(&["token", "create", "--name", "ada", "--role", "admin"])["token"].as_str().unwrap().to_owned();
    let reviewer =
        i.cli_json(&["token", "create", "--name", "rita", "--role", "reviewer"])["token"].as_str().unwrap().to_owned();
    let s = i.serve();
    let c = reqwest::Client::new();
    let provision = |body: Value| {
        c.post(s.url("/api/v1/tenants/clinic-a/endpoints/hooks/keys")).bearer_auth(&admin).json(&body).send()
    };

    for body in [serde_json::json!({"approve": true}), serde_json::json!({"approve": true, "reviewer": "ada"})] {
        let res = provision(body.clone()).await.unwrap();
        assert_eq!(res.status(), 403, "{body}");
        let err: Value = res.json().await.unwrap();
        assert_eq!(err["error"], "self_approval", "{err}");
    }
    let pending: Value = provision(serde_json::json!({})).await.unwrap().json().await.unwrap();
    let key_id = pending["key_id"].as_str().unwrap().to_owned();
    let approve = |token: &str| {
        c.post(s.url(&format!("/api/v1/keys/{key_id}/approve")))
            .bearer_auth(token.to_owned())
            .json(&serde_json::json!({"comment": "scope ok"}))
            .send()
    };
    let own = approve(&admin).await.unwrap();
    assert_eq!(own.status(), 403);
    assert_eq!(own.json::<Value>().await.unwrap()["error"], "self_approval");
    let other = approve(&reviewer).await.unwrap();
    assert_eq!(other.status(), 200);
    assert_eq!(other.json::<Value>().await.unwrap()["status"], "active");

    // Naming another reviewer at provisioning activates at once.
    let named: Value =
        provision(serde_json::json!({"approve": true, "reviewer": "rita"})).await.unwrap().json().await.unwrap();
    assert_eq!(named["status"], "active", "{named}");
    // Two keys: the one rita approved and the one provisioned under her name; the refused attempts left nothing.
    let keys: Value =
        c.get(s.url("/api/v1/keys?tenant=clinic-a")).bearer_auth(&admin).send().await.unwrap().json().await.unwrap();
    assert_eq!(keys.as_array().unwrap().len(), 2, "{keys}");
});

both_engines!(a_body_is_decrypted_only_by_an_origin_checked_post, async |i: &Install| {
    i.cli_json(&["tenant", "create", "clinic-a"]);
    i.cli_json(&["endpoint", "create", "clinic-a", "hooks", "--scheme", "standard-webhooks"]);
    let secret = i.cli_json(&["key", "provision", "clinic-a", "hooks", "--approve-as", "rita"])["secret"]
        .as_str()
        .unwrap()
        .to_owned();
    let admin =
        i.cli_json(&["token", "create", "--name", "t", "--role", "admin"])["token"].as_str().unwrap().to_owned();
    i.cli_json_stdin(&["user", "create", "otto", "--role", "oncall"], "a long enough password");
    let s = i.serve();
    let body = r#"{"type":"reminder.scheduled","data":{"reminder_id":"r-late","phone":"+41 79 555 01 23"}}"#;
    i.send_event(&s.url("/hooks/clinic-a/hooks"), &secret, "msg_early", body);
    let api = reqwest::Client::new();
    let list: Value = api
        .get(s.url("/api/v1/quarantine?tenant=clinic-a"))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = list["items"][0]["id"].as_str().unwrap().to_owned();
    let reveals = async || {
        let entries: Vec<Value> = api
            .get(s.url("/api/v1/audit?action=quarantine.reveal_body"))
            .bearer_auth(&admin)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        entries.iter().filter(|e| e["action"] == "quarantine.reveal_body").count()
    };

    let otto = s.client();
    let login = otto
        .post(s.url("/fn/login"))
        .header("Origin", &s.base)
        .form(&[("username", "otto"), ("password", "a long enough password")])
        .send()
        .await
        .unwrap();
    assert_eq!(login.status(), 200);
    let page = async |path: &str| {
        let res = otto.get(s.url(path)).header("Accept", "text/html").send().await.unwrap();
        (res.status(), res.text().await.unwrap())
    };
    // GETs, however they are spelled, decrypt nothing and record nothing.
    for path in [
        format!("/quarantine/{id}?body=show"),
        format!("/quarantine/{id}?view=guessed"),
        format!("/quarantine/{id}"),
        format!("/fn/reveal_quarantine_body?id={id}"),
    ] {
        let (status, html) = page(&path).await;
        assert!(!html.contains("r-late") && !html.contains("event-body\""), "{path} showed the body: {html}");
        assert!(status == 200 || path.starts_with("/fn/"), "{path}: {status}");
        assert_eq!(reveals().await, 0, "{path} was recorded as a reveal");
    }
    // The POST without our Origin is refused before it runs.
    for origin in [None, Some("http://evil.test")] {
        let mut r = otto.post(s.url("/fn/reveal_quarantine_body")).form(&[("id", id.as_str())]);
        if let Some(o) = origin {
            r = r.header("Origin", o);
        }
        assert_eq!(r.send().await.unwrap().status(), 403, "{origin:?}");
    }
    assert_eq!(reveals().await, 0);
    // The form post (JavaScript off) decrypts once, records it, and sends the
    // browser to the page that shows it, once.
    let posted = otto
        .post(s.url("/fn/reveal_quarantine_body"))
        .header("Origin", &s.base)
        .header("Accept", "text/html")
        .form(&[("id", id.as_str())])
        .send()
        .await
        .unwrap();
    assert!(posted.status().is_redirection(), "{}", posted.status());
    let location = posted.headers()["location"].to_str().unwrap().to_owned();
    assert!(location.starts_with(&format!("/quarantine/{id}?view=")), "{location}");
    assert_eq!(reveals().await, 1);
    let (_, shown) = page(&location).await;
    assert!(shown.contains("r-late") && shown.contains("[redacted]") && !shown.contains("555 01 23"), "{shown}");
    let (_, again) = page(&location).await;
    assert!(!again.contains("r-late") && again.contains("shown already"), "a view is shown once: {again}");
    assert_eq!(reveals().await, 1, "showing decrypted nothing more");
});
