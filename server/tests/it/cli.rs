//! The operator CLI contract (docs/contract.md §2).

use sea_orm::EntityTrait;

use crate::{both_engines, support::Install};

both_engines!(json_output_and_key_lifecycle, async |i: &Install| {
    let t = i.cli_json(&["tenant", "create", "clinic-a", "--name", "Clinic A"]);
    assert_eq!(t["slug"], "clinic-a");
    let e = i.cli_json(&[
        "endpoint",
        "create",
        "clinic-a",
        "reminders",
        "--scheme",
        "stripe",
        "--event-types",
        "reminder.created,otp.requested",
    ]);
    assert_eq!(e["scheme"], "stripe");
    assert_eq!(e["tolerance_secs"], 300);
    assert_eq!(e["max_body_bytes"], 1048576);

    let pending = i.cli_json(&["key", "provision", "clinic-a", "reminders", "--owner", "ops"]);
    assert_eq!(pending["status"], "pending_approval");
    let secret = pending["secret"].as_str().expect("secret shown once");
    assert!(secret.starts_with("whsec_"));
    let key_id = pending["key_id"].as_str().unwrap().to_owned();

    let approved = i.cli_json(&["key", "approve", &key_id, "--reviewer", "rita", "--comment", "ok"]);
    assert_eq!(approved["status"], "active");
    assert!(approved.get("secret").is_none());

    let active = i.cli_json(&["key", "provision", "clinic-a", "reminders", "--approve-as", "rita"]);
    assert_eq!(active["status"], "active");

    let rotated = i.cli_json(&["key", "rotate", &key_id, "--overlap-secs", "3600", "--approve-as", "rita"]);
    assert_eq!(rotated["status"], "active");
    assert_eq!(rotated["replaces_key_id"], key_id.as_str());
    assert!(rotated["secret"].as_str().unwrap().starts_with("whsec_"));

    let list = i.cli_json(&["key", "list", "--tenant", "clinic-a"]);
    let list = list.as_array().expect("array");
    assert_eq!(list.len(), 3);
    let old = list.iter().find(|k| k["key_id"] == key_id.as_str()).unwrap();
    assert_eq!(old["status"], "retiring");
    assert!(old["expires_at"].is_string());
    for k in list {
        assert!(k.get("secret").is_none());
        for f in ["key_id", "tenant", "endpoint", "status"] {
            assert!(k.get(f).is_some(), "{f} missing");
        }
    }
    let text = serde_json::to_string(list).unwrap();
    assert!(!text.contains(secret));

    let revoked = i.cli_json(&["key", "revoke", &key_id, "--reason", "rotated out early"]);
    assert_eq!(revoked["status"], "revoked");
});

both_engines!(errors_are_one_line_and_non_zero, async |i: &Install| {
    for (args, needle) in [
        (vec!["tenant", "create", "Bad Slug"], "must match"),
        (vec!["endpoint", "create", "nope", "x", "--scheme", "github"], "not found"),
        (vec!["endpoint", "create", "nope", "x", "--scheme", "md5"], "scheme must be"),
        (vec!["key", "approve", "key_missing", "--reviewer", "r"], "not found"),
    ] {
        let out = i.cli(&args, "");
        assert!(!out.status.success(), "{args:?} should fail");
        let err = String::from_utf8_lossy(&out.stderr);
        let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("error")).collect();
        assert_eq!(lines.len(), 1, "{args:?}: {err}");
        assert!(lines[0].contains(needle), "{args:?}: {err}");
        assert!(out.stdout.is_empty());
    }
    i.cli_json(&["tenant", "create", "clinic-a"]);
    let dup = i.cli(&["--json", "tenant", "create", "clinic-a"], "");
    assert!(!dup.status.success());
    assert!(dup.stdout.is_empty(), "nothing on stdout on failure");
    let e: serde_json::Value = serde_json::from_slice(dup.stderr.trim_ascii()).unwrap();
    assert_eq!(e["error"], "tenant_exists");
});

both_engines!(revoke_requires_a_reason, async |i: &Install| {
    i.cli_json(&["tenant", "create", "clinic-a"]);
    i.cli_json(&["endpoint", "create", "clinic-a", "hooks", "--scheme", "github"]);
    let k = i.cli_json(&["key", "provision", "clinic-a", "hooks", "--approve-as", "rita"]);
    let out = i.cli(&["key", "revoke", k["key_id"].as_str().unwrap()], "");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("reason"));
});

both_engines!(users_and_tokens, async |i: &Install| {
    i.cli_json(&["tenant", "create", "clinic-a"]);
    let given = i.cli_json_stdin(
        &["user", "create", "alice", "--role", "clinic-admin", "--tenant", "clinic-a"],
        "a long enough password\n",
    );
    assert_eq!(given["user"]["role"], "clinic-admin");
    assert!(given["password"].is_null(), "a given password is never echoed");
    let generated = i.cli_json(&["user", "create", "root", "--role", "admin"]);
    assert_eq!(generated["password"].as_str().unwrap().len(), 24);
    let weak = i.cli(&["user", "create", "weak", "--role", "oncall"], "short\n");
    assert!(!weak.status.success());
    let tok = i.cli_json(&["token", "create", "--name", "ci", "--role", "reviewer"]);
    assert!(tok["token"].as_str().unwrap().starts_with("sgt_"));
    let listed = i.cli_json(&["token", "list"]);
    assert!(!listed.to_string().contains(tok["token"].as_str().unwrap()));
    let users = i.cli_json(&["user", "list"]);
    assert!(!users.to_string().contains("argon2"));
});

both_engines!(kek_rotate_and_audit_verify, async |i: &Install| {
    i.cli_json(&["tenant", "create", "clinic-a"]);
    i.cli_json(&["endpoint", "create", "clinic-a", "hooks", "--scheme", "standard-webhooks"]);
    for _ in 0..3 {
        i.cli_json(&["key", "provision", "clinic-a", "hooks"]);
    }
    let out = i.cli(&["--json", "kek", "rotate"], "");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["kek_version"], 2);
    assert_eq!(r["added_version"], true);
    assert_eq!(r["rewrap"]["status"], "finished");
    // Three signing keys and the audit chain's own key (a service key).
    assert_eq!(r["rewrap"]["rewrapped"], 4, "{r}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("resealed under v2"), "progress is printed");
    let status = i.cli_json(&["kek", "status"]);
    assert_eq!(status["stale_rows"], 0, "{status}");
    assert_eq!(status["versions"][0]["retirable"], true, "{status}");
    // Retiring: never the newest; not while instances may lack the newest.
    for (version, code) in [("2", "kek_newest"), ("1", "kek_rotated_recently")] {
        let out = i.cli(&["kek", "retire", version], "");
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(code) || err.contains("newest") || err.contains("less than a minute"), "{err}");
    }
    let db = domain::db::connect(&i.database_url).await.unwrap();
    domain::entity::kek_version::Entity::update_many()
        .col_expr(domain::entity::kek_version::Column::CreatedAt, sea_orm::sea_query::Expr::value(0i64))
        .exec(&db)
        .await
        .unwrap();
    let retired = i.cli_json(&["kek", "retire", "1"]);
    assert_eq!(retired["version"], 1);
    // Every secret still opens: a key provisions and the chain verifies.
    i.cli_json(&["key", "provision", "clinic-a", "hooks"]);
    let v = i.cli_json(&["audit", "verify"]);
    assert_eq!(v["ok"], true);
    let audit_actions = i.cli_json(&["audit", "verify"])["entries"].as_i64().unwrap();
    assert!(audit_actions >= 7, "every CLI change is audited");
});

both_engines!(migrate_is_idempotent, async |i: &Install| {
    i.cli_json(&["migrate"]);
    i.cli_json(&["migrate"]);
});

both_engines!(on_call_triage_and_retry_policy_from_the_shell, async |i: &Install| {
    i.cli_json(&["tenant", "create", "clinic-a"]);
    i.cli_json(&["tenant", "create", "clinic-b"]);
    i.cli_json(&["endpoint", "create", "clinic-a", "hooks", "--scheme", "standard-webhooks"]);
    let key = i.cli_json(&["key", "provision", "clinic-a", "hooks", "--approve-as", "rita"]);
    let s = i.serve();
    let send = |body: &str, id: &str| {
        let file = i.data_dir().join(format!("{id}.json"));
        std::fs::write(&file, body).unwrap();
        let out = i.cli(
            &[
                "send",
                &s.url("/hooks/clinic-a/hooks"),
                "--scheme",
                "standard-webhooks",
                "--secret",
                key["secret"].as_str().unwrap(),
                "--file",
                file.to_str().unwrap(),
                "--event-id",
                id,
            ],
            "",
        );
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    };
    send(r#"{"type":"reminder.canceled","data":{"reminder_id":"r-1"}}"#, "e-1");
    send(r#"{"type":"reminder.canceled","data":{"reminder_id":"r-2"}}"#, "e-2");
    let list = i.cli_json(&["quarantine", "list", "--tenant", "clinic-a"]);
    assert_eq!(list["total"], 2);
    assert_eq!(list["by_reason"][0]["reason"], "reminder_not_found");
    let ids: Vec<String> =
        list["items"].as_array().unwrap().iter().map(|q| q["id"].as_str().unwrap().to_owned()).collect();
    // Release still fails (the reminder does not exist): non-zero, one line, entry stays open.
    let out = i.cli(&["--json", "quarantine", "release", &ids[0], "--reason", "try"], "");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("release_failed"));
    let d = i.cli_json(&["quarantine", "discard", &ids[1], "--reason", "provider test event"]);
    assert_eq!((d["status"].as_str(), d["resolved_by"].as_str()), (Some("discarded"), Some("cli")));
    let missing_reason = i.cli(&["quarantine", "discard", &ids[0], "--reason", ""], "");
    assert!(!missing_reason.status.success());
    assert_eq!(i.cli_json(&["quarantine", "list"])["total"], 1);

    // New tenants start with retries off; a cohort turns them on together,
    // once drills and review came first (the rollout order).
    assert_eq!(i.cli_json(&["retry-policy", "show", "clinic-b"])["policy"], "disabled");
    let early =
        i.cli(&["--json", "retry-policy", "set", "clinic-a", "--policy", "enabled", "--reason", "cohort 1"], "");
    assert_eq!(early.status.code(), Some(1));
    let said = String::from_utf8_lossy(&early.stderr);
    assert!(said.contains("rollout_order") && said.contains("no drill run passed on this build"), "{said}");
    i.meet_rollout_order();
    let set =
        i.cli_json(&["retry-policy", "set", "clinic-a", "clinic-b", "--policy", "enabled", "--reason", "cohort 1"]);
    assert_eq!(set.as_array().unwrap().len(), 2);
    assert!(set.as_array().unwrap().iter().all(|v| v["policy"] == "enabled" && v["version"] == 2));
    let back = i.cli_json(&["retry-policy", "rollback", "clinic-b", "--reason", "not yet"]);
    assert_eq!((back["policy"].as_str(), back["version"].as_i64()), (Some("disabled"), Some(3)));
    let bad = i.cli(&["retry-policy", "set", "clinic-a", "--policy", "sometimes", "--reason", "x"], "");
    assert!(!bad.status.success());
    assert_eq!(i.cli_json(&["retry-policy", "show", "clinic-a"])["policy"], "enabled");
    let audit = i.cli(&["audit", "verify"], "");
    assert!(audit.status.success(), "{}", String::from_utf8_lossy(&audit.stderr));
});
