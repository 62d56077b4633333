//! Drills and sign-off evidence against the real binary: the CLI's drill
//! run kills a real child process; drills run over HTTP while the server
//! takes traffic, and real tenants' figures do not move; bundles export,
//! verify, and refuse bad input with one clear line.

use std::{
    path::Path,
    time::{Duration, Instant},
};

use serde_json::{Value, json};

use crate::{both_engines, support::Install};

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

both_engines!(drill_run_passes_and_kills_a_real_child_process, async |i: &Install| {
    let run = i.cli_json(&["drill", "run"]);
    assert_eq!(run["passed"], true, "{run:#}");
    let drills = run["drills"].as_array().unwrap();
    assert_eq!(drills.len(), 8);
    // Verification was drilled for every scheme Signet receives.
    assert_eq!(run["schemes"], json!(["standard-webhooks", "stripe", "github", "hmac"]), "{run:#}");
    let schemes = drills.iter().find(|d| d["name"] == "scheme_verification").unwrap();
    for s in ["standard-webhooks", "stripe", "github", "hmac.dvir", "hmac.shopify", "hmac.slack", "hmac.custom"] {
        assert_eq!(schemes["observed"][format!("{s}.answer")], "applied");
        assert_eq!(schemes["observed"][format!("{s}.retry.answer")], "duplicate");
        assert_eq!(schemes["observed"][format!("{s}.wrong_key.answer")], "signature_mismatch");
    }
    for d in drills {
        assert_eq!(d["passed"], true, "{d:#}");
        assert!(d["observed"].is_object() && d["expected"].is_object());
    }
    let interrupted = drills.iter().find(|d| d["name"] == "interrupted_before_commit").unwrap();
    assert_eq!(interrupted["observed"]["killed_before_commit"], true);
    assert_eq!(interrupted["observed"]["after_kill.claims"], 0);
    assert_eq!(interrupted["observed"]["claims"], 1);
    let listed = i.cli_json(&["drill", "list"]);
    assert_eq!(listed[0]["run_id"], run["run_id"]);
    // The drill tenant is nobody's tenant.
    let tenants = i.cli_json(&["tenant", "list"]);
    assert_eq!(tenants.as_array().unwrap().len(), 0, "{tenants}");
    let audit = i.cli(&["audit", "verify"], "");
    assert!(audit.status.success(), "{}", stderr(&audit));
});

both_engines!(drills_run_through_the_api_while_the_server_takes_traffic, async |i: &Install| {
    i.cli_json(&["tenant", "create", "clinic-a"]);
    i.cli_json(&["endpoint", "create", "clinic-a", "hooks", "--scheme", "standard-webhooks"]);
    let key = i.cli_json(&["key", "provision", "clinic-a", "hooks", "--approve-as", "rita"]);
    let secret = key["secret"].as_str().unwrap().to_owned();
    let token =
        i.cli_json(&["token", "create", "--name", "rita", "--role", "reviewer"])["token"].as_str().unwrap().to_owned();
    let oncall =
        i.cli_json(&["token", "create", "--name", "otto", "--role", "oncall"])["token"].as_str().unwrap().to_owned();
    let s = i.serve();
    let url = s.url("/hooks/clinic-a/hooks");
    // Real traffic for clinic-a on four connections during the whole run.
    let traffic: Vec<_> = (0..4)
        .map(|w| {
            let (url, secret) = (url.clone(), secret.clone());
            tokio::spawn(async move {
                let client = reqwest::Client::new();
                let mut codes = Vec::new();
                for n in 0..40 {
                    let id = format!("live-{w}-{n}");
                    let data = json!({"reminder_id": id, "send_at": "2027-01-05T09:00:00Z"});
                    let body = json!({"type": "reminder.created", "data": data}).to_string();
                    let ts = domain::clock::now_ms() / 1000;
                    let secret = domain::crypto::SigningSecret::parse(&secret).unwrap();
                    let scheme = domain::registry::Scheme::StandardWebhooks;
                    let headers = domain::crypto::signature::sign(scheme, &secret, body.as_bytes(), ts, &id).unwrap();
                    let mut r = client.post(&url).body(body);
                    for (k, v) in headers {
                        r = r.header(k, v);
                    }
                    codes.push(r.send().await.unwrap().status().as_u16());
                    tokio::time::sleep(Duration::from_millis(15)).await;
                }
                codes
            })
        })
        .collect();
    let api = reqwest::Client::new();
    assert_eq!(
        api.post(s.url("/api/v1/drills")).bearer_auth(&oncall).send().await.unwrap().status(),
        403,
        "on-call cannot run drills"
    );
    let started = api.post(s.url("/api/v1/drills")).bearer_auth(&token).send().await.unwrap();
    assert_eq!(started.status(), 202);
    let run_id = started.json::<Value>().await.unwrap()["run_id"].as_str().unwrap().to_owned();
    let second = api.post(s.url("/api/v1/drills")).bearer_auth(&token).send().await.unwrap();
    assert_eq!(second.status(), 409, "one run at a time");
    let mut seen_running = false;
    let run = loop {
        let r: Value = api
            .get(s.url(&format!("/api/v1/drills/{run_id}")))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if r["passed"].is_null() {
            seen_running = true;
            assert!(r["done"].as_u64().unwrap() <= 8);
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        }
        break r;
    };
    assert!(seen_running, "the run reports progress while it runs");
    assert_eq!(run["passed"], true, "{run:#}");
    for t in traffic {
        assert!(t.await.unwrap().iter().all(|c| *c == 200), "live traffic was disturbed");
    }
    // Real tenants' figures: every live event applied once; the drills are
    // counted apart.
    tokio::time::sleep(Duration::from_millis(5500)).await;
    let events: Value = api
        .get(s.url("/api/v1/tenants/clinic-a/events?limit=500"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(events.as_array().unwrap().len(), 160);
    let metrics = reqwest::get(&s.metrics).await.unwrap().text().await.unwrap();
    assert!(!metrics.contains("tenant=\"_drill"), "drill traffic must not appear as a tenant");
    assert!(metrics.contains("signet_drill_webhooks_total"), "drill traffic has its own counter");
    assert!(
        metrics.lines().any(|l| l.starts_with("signet_webhooks_total")
            && l.contains("tenant=\"clinic-a\"")
            && l.contains("outcome=\"applied\"")
            && l.ends_with(" 160")),
        "{metrics}"
    );
    let stats: Value =
        api.get(s.url("/api/v1/stats?window=1h")).bearer_auth(&token).send().await.unwrap().json().await.unwrap();
    let applied = stats["series"].as_array().unwrap().iter().find(|x| x["outcome"] == "applied").unwrap()["total"]
        .as_i64()
        .unwrap();
    assert_eq!(applied, 160, "the dashboard counts only real traffic");

    // The drill tenant's paths from anyone but the runner (here: guessing
    // the runner's header) are counted apart and logged, and still refused.
    let drill_count = |metrics: &str| -> u64 {
        metrics
            .lines()
            .filter(|l| l.starts_with("signet_drill_webhooks_total"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    };
    let runner_deliveries = drill_count(&metrics);
    for (path, status) in [("/hooks/_drill/drill", 401), ("/hooks/_drill-probe/x", 404)] {
        let res = api.post(s.url(path)).header("signet-drill-runner", "guess").body("{}").send().await.unwrap();
        assert_eq!(res.status(), status, "{path}");
    }
    let metrics = reqwest::get(&s.metrics).await.unwrap().text().await.unwrap();
    let foreign: u64 = metrics
        .lines()
        .filter(|l| l.starts_with("signet_drill_foreign_requests_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum();
    assert_eq!(foreign, 2, "only the two outside requests: {metrics}");
    assert_eq!(drill_count(&metrics), runner_deliveries, "the runner's counter holds only its own");
    // The log is read from the server's pipe by another thread: wait for it.
    let logged = |log: &str| -> Vec<String> {
        log.lines().filter(|l| l.contains("the drill runner did not send")).map(str::to_owned).collect()
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while logged(&s.output()).len() < 2 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let lines = logged(&s.output());
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[1].contains("_drill-probe"), "{}", lines[1]);
});

fn write_key(dir: &Path, i: &Install) -> std::path::PathBuf {
    let pk = i.cli(&["evidence", "public-key"], "");
    assert!(pk.status.success(), "{}", stderr(&pk));
    let path = dir.join("signet.pub");
    std::fs::write(&path, &pk.stdout).unwrap();
    path
}

both_engines!(evidence_exports_verifies_and_refuses_bad_input, async |i: &Install| {
    // Owner-only, as `signet` makes a data directory it creates (a temporary
    // directory starts 0755, which the bundle would flag).
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(i.data_dir(), std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    i.cli_json(&["tenant", "create", "clinic-a"]);
    i.cli_json(&["endpoint", "create", "clinic-a", "hooks", "--scheme", "github"]);
    i.cli_json(&["key", "provision", "clinic-a", "hooks", "--approve-as", "rita"]);
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("bundle");
    let exported = i.cli_json(&["evidence", "export", "--out", out.to_str().unwrap(), "--run-drills"]);
    assert_eq!(exported["drills_passed"], true, "{exported}");
    let mut names: Vec<String> =
        std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names, ["evidence.html", "evidence.json", "manifest.json", "manifest.sig"]);
    let evidence: Value = serde_json::from_slice(&std::fs::read(out.join("evidence.json")).unwrap()).unwrap();
    for key in [
        "generated_at",
        "deployment",
        "credentials",
        "constraints",
        "drills",
        "retention",
        "retry_policy",
        "metrics",
        "audit",
    ] {
        assert!(evidence.get(key).is_some(), "evidence.json lacks {key}");
    }
    assert_eq!(evidence["credentials"][0]["tenant"], "clinic-a");
    assert!(evidence["credentials"][0].get("secret").is_none());
    assert!(evidence["constraints"].as_array().unwrap().iter().all(|c| c["present"] == true));
    assert_eq!(evidence["drills"]["latest"]["passed"], true);
    assert_eq!(evidence["audit"]["chain_verified"], true);
    // Bound to this binary and this database (issue 23 item 2): the drills
    // ran on the same binary the bundle names.
    let binary = domain::crypto::sha256_hex(&std::fs::read(crate::support::BIN).unwrap());
    assert_eq!(evidence["build"]["binary_sha256"], binary.as_str());
    assert_eq!(evidence["drills"]["latest"]["binary_sha256"], binary.as_str());
    assert_eq!(evidence["build"]["version"], env!("CARGO_PKG_VERSION"));
    let engine = if matches!(i.engine, crate::support::Engine::Postgres) { "postgres" } else { "sqlite" };
    assert_eq!(evidence["database"]["engine"], engine);
    assert!(evidence["database"]["schema_version"].as_str().unwrap().starts_with('m'));
    let setting = if engine == "postgres" { "synchronous_commit" } else { "synchronous" };
    assert!(evidence["database"]["durability"][setting].is_string(), "{}", evidence["database"]);
    let file = |role: &str| {
        evidence["files"].as_array().unwrap().iter().find(|f| f["role"] == role).cloned().unwrap_or_default()
    };
    assert_eq!(file("data_dir")["path"], i.data_dir().display().to_string());
    assert_eq!(file("data_dir")["mode"], "0700");
    assert_eq!(file("master_key_file")["mode"], "0600", "{}", evidence["files"]);
    assert_eq!(file("master_key_file")["owned_by_signet"], true);
    assert_eq!(file("sqlite_file")["mode"].as_str(), (engine == "sqlite").then_some("0600"));
    let ids: Vec<&str> = evidence["findings"].as_array().unwrap().iter().filter_map(|f| f["id"].as_str()).collect();
    for never in ["durability_weak", "master_key_file_exposed", "data_file_exposed", "drills_stale"] {
        assert!(!ids.contains(&never), "{never} in {ids:?}");
    }
    let html = std::fs::read_to_string(out.join("evidence.html")).unwrap();
    assert!(html.contains("Build and database") && html.contains(&binary), "the printable page shows the build");
    assert!(
        html.contains("@media print")
            && !html.contains("<script")
            && !html.contains("http://")
            && !html.contains("https://"),
        "self-contained, printable, no external assets"
    );
    let key = write_key(work.path(), i);
    let ok = i.cli(&["--json", "evidence", "verify", out.to_str().unwrap(), "--public-key", key.to_str().unwrap()], "");
    assert!(ok.status.success(), "{}", stderr(&ok));
    let report: Value = serde_json::from_slice(&ok.stdout).unwrap();
    assert_eq!(report["digest"], exported["digest"]);
    assert_eq!(report["signer"], "given");

    // Tampering: one byte, a missing file, an extra file, a swapped signature.
    let tampered = work.path().join("tampered");
    std::fs::create_dir(&tampered).unwrap();
    for n in ["evidence.json", "evidence.html", "manifest.json", "manifest.sig"] {
        std::fs::copy(out.join(n), tampered.join(n)).unwrap();
    }
    let mut json_bytes = std::fs::read(tampered.join("evidence.json")).unwrap();
    json_bytes[10] ^= 1;
    std::fs::write(tampered.join("evidence.json"), &json_bytes).unwrap();
    let bad = i.cli(&["evidence", "verify", tampered.to_str().unwrap(), "--public-key", key.to_str().unwrap()], "");
    assert!(!bad.status.success());
    assert_eq!(stderr(&bad).lines().count(), 1, "{}", stderr(&bad));
    assert!(stderr(&bad).contains("evidence.json does not match"), "{}", stderr(&bad));
    std::fs::copy(out.join("evidence.json"), tampered.join("evidence.json")).unwrap();
    std::fs::remove_file(tampered.join("evidence.html")).unwrap();
    let missing = i.cli(&["evidence", "verify", tampered.to_str().unwrap()], "");
    assert!(!missing.status.success() && stderr(&missing).contains("evidence.html is missing"), "{}", stderr(&missing));
    std::fs::copy(out.join("evidence.html"), tampered.join("evidence.html")).unwrap();
    std::fs::write(tampered.join("extra.txt"), "x").unwrap();
    let extra = i.cli(&["evidence", "verify", tampered.to_str().unwrap()], "");
    assert!(
        !extra.status.success() && stderr(&extra).contains("extra.txt is not part of the bundle"),
        "{}",
        stderr(&extra)
    );
    std::fs::remove_file(tampered.join("extra.txt")).unwrap();
    let other = work.path().join("other");
    i.cli_json(&["evidence", "export", "--out", other.to_str().unwrap()]);
    std::fs::copy(other.join("manifest.sig"), tampered.join("manifest.sig")).unwrap();
    let swapped = i.cli(&["evidence", "verify", tampered.to_str().unwrap(), "--public-key", key.to_str().unwrap()], "");
    assert!(
        !swapped.status.success() && stderr(&swapped).contains("manifest.sig does not verify"),
        "{}",
        stderr(&swapped)
    );

    // Bad input: a non-empty directory, an unwritable path, a missing bundle.
    let again = i.cli(&["evidence", "export", "--out", out.to_str().unwrap()], "");
    assert!(!again.status.success() && stderr(&again).contains("not empty; pass --force"), "{}", stderr(&again));
    let forced = i.cli(&["evidence", "export", "--out", out.to_str().unwrap(), "--force"], "");
    assert!(forced.status.success(), "{}", stderr(&forced));
    let file = work.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let unwritable = i.cli(&["evidence", "export", "--out", file.join("sub").to_str().unwrap()], "");
    assert!(!unwritable.status.success());
    assert_eq!(stderr(&unwritable).lines().count(), 1, "{}", stderr(&unwritable));
    let nothing = i.cli(&["evidence", "verify", work.path().join("nope").to_str().unwrap()], "");
    assert!(!nothing.status.success() && stderr(&nothing).contains("cannot read"), "{}", stderr(&nothing));
    // Everything is recorded and the chain still verifies, against a signed
    // checkpoint too.
    let cp = work.path().join("checkpoint.json");
    let printed = i.cli(&["audit", "checkpoint"], "");
    assert!(printed.status.success(), "{}", stderr(&printed));
    std::fs::write(&cp, &printed.stdout).unwrap();
    let verified =
        i.cli(&["audit", "verify", "--checkpoint", cp.to_str().unwrap(), "--public-key", key.to_str().unwrap()], "");
    assert!(verified.status.success(), "{}", stderr(&verified));
});

both_engines!(export_never_writes_through_a_planted_symlink, async |i: &Install| {
    use std::os::unix::fs::{PermissionsExt, symlink};
    i.cli_json(&["tenant", "create", "clinic-a"]);
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("bundle");
    std::fs::create_dir(&out).unwrap();
    // Links planted at two of the bundle's names: one at a file someone
    // cares about, one dangling (it would create the file it names).
    let victim = work.path().join("authorized_keys");
    std::fs::write(&victim, "ssh-ed25519 AAAA the owner's key\n").unwrap();
    symlink(&victim, out.join("evidence.json")).unwrap();
    let nowhere = work.path().join("created-elsewhere");
    symlink(&nowhere, out.join("manifest.sig")).unwrap();

    let refused = i.cli(&["evidence", "export", "--out", out.to_str().unwrap()], "");
    assert!(!refused.status.success() && stderr(&refused).contains("not empty"), "{}", stderr(&refused));
    let forced = i.cli(&["--json", "evidence", "export", "--out", out.to_str().unwrap(), "--force"], "");
    assert!(forced.status.success(), "{}", stderr(&forced));

    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "ssh-ed25519 AAAA the owner's key\n", "target untouched");
    assert!(!nowhere.exists(), "nothing created through a dangling link");
    let mut names: Vec<String> =
        std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names, ["evidence.html", "evidence.json", "manifest.json", "manifest.sig"], "no temporary files left");
    for name in &names {
        let meta = std::fs::symlink_metadata(out.join(name)).unwrap();
        assert!(meta.file_type().is_file(), "{name} is a regular file now");
        assert_eq!(meta.permissions().mode() & 0o777, 0o600, "{name}");
    }
    let ok = i.cli(&["evidence", "verify", out.to_str().unwrap()], "");
    assert!(ok.status.success(), "{}", stderr(&ok));

    // A directory the export creates is owner-only too.
    let fresh = work.path().join("fresh");
    i.cli_json(&["evidence", "export", "--out", fresh.to_str().unwrap()]);
    assert_eq!(std::fs::metadata(&fresh).unwrap().permissions().mode() & 0o777, 0o700);
});

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

// Exports are POSTs: eight at once all answer (201, or 200 with the stored
// identical bundle; never a 500), GETs read what was stored and write
// nothing, and one caller's exports are budgeted (429 with Retry-After).
both_engines!(exports_are_idempotent_posts_and_gets_never_write, async |i: &Install| {
    i.cli_json(&["tenant", "create", "clinic-a"]);
    let token = |name: &str| {
        i.cli_json(&["token", "create", "--name", name, "--role", "reviewer"])["token"].as_str().unwrap().to_owned()
    };
    let (rita, ross) = (token("rita"), token("ross"));
    let s = i.serve();
    let api = reqwest::Client::new();
    let post = || api.post(s.url("/api/v1/evidence/exports")).bearer_auth(&rita).json(&json!({})).send();
    let answers = futures_util::future::join_all((0..8).map(|_| post())).await;
    let mut bodies = Vec::new();
    for res in answers {
        let res = res.unwrap();
        let status = res.status().as_u16();
        assert!(matches!(status, 200 | 201), "a concurrent export answered {status}: {}", res.text().await.unwrap());
        bodies.push((status, res.json::<Value>().await.unwrap()));
    }
    for (status, body) in &bodies {
        let first = bodies.iter().find(|(_, b)| b["digest"] == body["digest"]).unwrap();
        assert_eq!(&first.1, body, "one digest, one bundle");
        if *status == 200 {
            assert!(bodies.iter().any(|(st, b)| *st == 201 && b["digest"] == body["digest"]), "200 repeats a 201");
        }
    }
    let listed = |api: reqwest::Client, url: String, t: String| async move {
        api.get(url).bearer_auth(t).send().await.unwrap().json::<Value>().await.unwrap()
    };
    let exports_before = listed(api.clone(), s.url("/api/v1/evidence/exports"), rita.clone()).await;
    let audit_before = listed(api.clone(), s.url("/api/v1/audit?limit=200"), ross.clone()).await;
    for path in ["/api/v1/evidence", "/api/v1/evidence.html", "/api/v1/evidence/exports"] {
        let res = api.get(s.url(path)).bearer_auth(&rita).send().await.unwrap();
        assert_eq!(res.status(), 200, "{path}");
    }
    assert_eq!(listed(api.clone(), s.url("/api/v1/evidence/exports"), rita.clone()).await, exports_before);
    assert_eq!(listed(api.clone(), s.url("/api/v1/audit?limit=200"), ross.clone()).await, audit_before);
    // Rita spent 8 of her burst of 10: within a few more she is refused.
    let mut refused = None;
    for _ in 0..6 {
        let res = post().await.unwrap();
        if res.status() == 429 {
            refused = Some(res);
            break;
        }
        assert!(res.status().is_success(), "{}", res.status());
    }
    let refused = refused.expect("an export budget");
    let wait: u64 = refused.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=11).contains(&wait), "Retry-After {wait}");
    assert_eq!(refused.json::<Value>().await.unwrap()["error"], "export_rate_limited");
    // Another caller is not affected.
    let other = api.post(s.url("/api/v1/evidence/exports")).bearer_auth(&ross).send().await.unwrap();
    assert!(other.status().is_success(), "{}", other.status());
});

/// The last line of the checkpoint file, once it records `seq` or later.
fn anchored_at_least(path: &Path, seq: i64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if let Some(last) = text.lines().last().map(|l| serde_json::from_str::<Value>(l).unwrap())
            && last["seq"].as_i64().unwrap() >= seq
        {
            return last;
        }
        assert!(Instant::now() < deadline, "no checkpoint of entry {seq} in {}: {text}", path.display());
        std::thread::sleep(Duration::from_millis(200));
    }
}

// Issue 23 item 1: someone with write access to the database drops the
// append-only triggers, deletes the newest entries, points the head at the
// new end and removes the verification mark. The chain that remains
// verifies; the checkpoints kept outside it (the file `serve` appends to,
// and the one in an exported bundle) do not, and say which entries are gone.
both_engines!(a_tail_cut_by_hand_is_caught_by_the_checkpoints_kept_outside, async |i: &Install| {
    i.cli_json(&["tenant", "create", "clinic-a"]);
    i.cli_json(&["endpoint", "create", "clinic-a", "hooks", "--scheme", "standard-webhooks"]);
    let file = i.dir.path().join("audit-checkpoints.jsonl");
    let s = i.serve();
    let head = || i.cli_json(&["audit", "verify"])["head_seq"].as_i64().unwrap();
    // A sensitive action is anchored within a second or two.
    i.cli_json(&["key", "provision", "clinic-a", "hooks"]);
    let first = anchored_at_least(&file, head());
    assert!(first["signature"].is_string() && first["public_key"].is_string(), "{first}");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
    let bundle = i.dir.path().join("bundle");
    i.cli_json(&["evidence", "export", "--out", bundle.to_str().unwrap()]);
    let exported: Value = serde_json::from_slice(&std::fs::read(bundle.join("evidence.json")).unwrap()).unwrap();
    let bundle_seq = exported["audit"]["checkpoint"]["seq"].as_i64().unwrap();
    // More changes, the last one sensitive, and anchored too.
    for t in ["clinic-b", "clinic-c"] {
        i.cli_json(&["tenant", "create", t]);
    }
    i.cli_json(&["token", "create", "--name", "rita", "--role", "reviewer"]);
    let newest = anchored_at_least(&file, head())["seq"].as_i64().unwrap();
    drop(s);
    let intact = i.cli(&["audit", "verify", "--checkpoints", file.to_str().unwrap()], "");
    assert!(intact.status.success(), "{}", stderr(&intact));

    let db = domain::db::connect(&i.database_url).await.unwrap();
    use sea_orm::ConnectionTrait;
    let keep = bundle_seq - 1;
    let drop_triggers = if i.database_url.starts_with("postgres") {
        "ALTER TABLE audit_log DISABLE TRIGGER USER"
    } else {
        "DROP TRIGGER audit_log_no_update; DROP TRIGGER audit_log_no_delete"
    };
    db.execute_unprepared(drop_triggers).await.unwrap();
    db.execute_unprepared(&format!("DELETE FROM audit_log WHERE seq > {keep}")).await.unwrap();
    db.execute_unprepared(&format!(
        "UPDATE audit_head SET seq = {keep}, hash = (SELECT hash FROM audit_log WHERE seq = {keep})"
    ))
    .await
    .unwrap();
    db.execute_unprepared("DELETE FROM audit_verified").await.unwrap();
    db.close().await.ok();

    // Inside the database nothing shows it.
    let alone = i.cli(&["audit", "verify"], "");
    assert!(alone.status.success(), "the cut chain verifies on its own: {}", stderr(&alone));
    let against_file = i.cli(&["audit", "verify", "--checkpoints", file.to_str().unwrap()], "");
    assert_eq!(against_file.status.code(), Some(1));
    let why = stderr(&against_file);
    assert!(why.contains(&format!("entries {}–{newest} are missing", keep + 1)), "{why}");
    assert_eq!(why.lines().count(), 1, "{why}");
    let against_bundle = i.cli(&["evidence", "verify", bundle.to_str().unwrap()], "");
    assert_eq!(against_bundle.status.code(), Some(1));
    let why = stderr(&against_bundle);
    assert!(why.contains(&format!("recorded entry {bundle_seq}")) && why.contains("missing"), "{why}");

    // Bad input: one line naming the file, or the line.
    let gone = i.cli(&["audit", "verify", "--checkpoints", "/nonexistent/anchors.jsonl"], "");
    assert_eq!(gone.status.code(), Some(1));
    assert!(stderr(&gone).contains("cannot read /nonexistent/anchors.jsonl"), "{}", stderr(&gone));
    let garbled = i.dir.path().join("garbled.jsonl");
    let first_line = std::fs::read_to_string(&file).unwrap().lines().next().unwrap().to_owned();
    std::fs::write(&garbled, format!("{first_line}\nnot json\n")).unwrap();
    let bad = i.cli(&["audit", "verify", "--checkpoints", garbled.to_str().unwrap()], "");
    assert_eq!(bad.status.code(), Some(1));
    assert!(stderr(&bad).contains("line 2: not a signed checkpoint"), "{}", stderr(&bad));
    assert_eq!(stderr(&bad).lines().count(), 1);
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
