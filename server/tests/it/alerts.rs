//! Alerting against the real tools: the metrics the rules in
//! `deploy/prometheus/alerts.yml` read, each rule's runbook section, and a
//! real Prometheus that loads those rules, scrapes a real `signet serve` and
//! fires an alert.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use domain::crypto::{SigningSecret, signature};
use sea_orm::EntityTrait;
use serde_json::{Value, json};
use views::scheme::Scheme;

use crate::{
    both_engines,
    support::{Install, Server, created, now},
};

fn repo_file(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

/// The value of the sample of `name` whose labels include `labels`.
fn value(metrics: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    metrics.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        let (series, v) = l.rsplit_once(' ')?;
        let (n, rest) = series.split_once('{').unwrap_or((series, ""));
        let matches = n == name && labels.iter().all(|(k, want)| rest.contains(&format!("{k}=\"{want}\"")));
        if matches { v.parse().ok() } else { None }
    })
}

async fn scrape(s: &Server) -> String {
    reqwest::get(&s.metrics).await.unwrap().text().await.unwrap()
}

/// clinic-a/hooks (Standard Webhooks, types reminder.created and
/// otp.requested) with an approved key for reminder.created only.
fn setup(i: &Install) -> (String, SigningSecret) {
    i.clinic_a_hooks("standard-webhooks", "reminder.created,otp.requested", &[]);
    i.clinic_a_hooks_key("reminder.created")
}

/// Posts `body` signed with `secret` (Standard Webhooks); `tamper` changes a
/// byte after signing, so verification fails with `mismatch`.
async fn post(url: &str, secret: &SigningSecret, body: &[u8], id: &str, tamper: bool) -> (u16, Value) {
    let headers = signature::sign(Scheme::StandardWebhooks, secret, body, now(), id).unwrap();
    let mut body = body.to_vec();
    if tamper {
        body[0] = b' ';
    }
    let mut r = reqwest::Client::new().post(url).body(body);
    for (k, v) in &headers {
        r = r.header(k.as_str(), v.as_str());
    }
    let res = r.send().await.unwrap();
    (res.status().as_u16(), res.json().await.unwrap_or(Value::Null))
}

fn seed_drill_run(id: &str, version: &str, passed: bool, at_ms: i64) -> domain::entity::drill_run::ActiveModel {
    domain::entity::drill_run::ActiveModel::from(domain::entity::drill_run::Model {
        id: id.into(),
        actor: "rita".into(),
        actor_kind: "token".into(),
        tenant_id: None,
        status: views::evidence::DrillStatus::Finished,
        passed: Some(passed),
        engine: "seeded".into(),
        version: version.into(),
        schema_version: "seeded".into(),
        build_commit: String::new(),
        binary_sha256: String::new(),
        results: "[]".into(),
        error: None,
        started_at: at_ms - 1000,
        updated_at: at_ms,
        finished_at: Some(at_ms),
        schemes: None,
    })
}

// Every metric the rules read that Signet did not have before, with the
// value the rules rely on.
both_engines!(the_metrics_the_alert_rules_read_are_exported, async |i: &Install| {
    let (old_key, old_secret) = setup(i);
    // A passed run on this version; a failed one on another version, which
    // says nothing about this build.
    let ran_at = domain::clock::now_ms() - 60_000;
    let db = domain::db::connect(&i.database_url).await.unwrap();
    for run in [
        seed_drill_run("this-build", env!("CARGO_PKG_VERSION"), true, ran_at),
        seed_drill_run("other-build", "0.0.1-old", false, ran_at + 1000),
    ] {
        domain::entity::drill_run::Entity::insert(run).exec_without_returning(&db).await.unwrap();
    }
    db.close().await.ok();
    let s = i.serve();
    let url = s.url("/hooks/clinic-a/hooks");

    // Before anything happens: every series exists, at zero.
    let m = scrape(&s).await;
    let build = [("version", env!("CARGO_PKG_VERSION")), ("commit", domain::evidence::identity::COMMIT)];
    assert_eq!(value(&m, "signet_build_info", &build), Some(1.0), "{m}");
    for reason in ["replay", "refused", "quarantine", "error"] {
        assert_eq!(value(&m, "signet_claim_rollbacks_total", &[("reason", reason)]), Some(0.0), "{m}");
    }
    assert_eq!(value(&m, "signet_hooks_overloaded_total", &[]), Some(0.0), "{m}");
    assert_eq!(value(&m, "signet_hooks_in_flight", &[]), Some(0.0), "{m}");
    assert_eq!(value(&m, "signet_retention_purge_interval_seconds", &[]), Some(3600.0), "{m}");
    assert_eq!(value(&m, "signet_audit_checkpoint_interval_seconds", &[]), Some(300.0), "{m}");

    // Rotate: the old key is in its overlap (a day by default) and a
    // provider still signs with it.
    let rotated = i.cli_json(&["key", "rotate", &old_key, "--approve-as", "rita"]);
    assert_eq!(rotated["status"], "active", "{rotated}");
    let (status, v) = post(&url, &old_secret, &created("r-1"), "m-1", false).await;
    assert_eq!((status, v["status"].as_str()), (200, Some("applied")), "{v}");
    // Gate 8 refuses a type outside the key's scope: its claim transaction
    // rolls back.
    let otp = json!({"id": "evt_otp", "type": "otp.requested", "data": {"otp_request_id": "o-1", "channel": "sms"}});
    let (status, v) = post(&url, &old_secret, otp.to_string().as_bytes(), "m-2", false).await;
    assert_eq!((status, v["error"].as_str()), (403, Some("event_type_not_permitted")), "{v}");
    // An event that cannot apply waits in quarantine.
    let junk = json!({"id": "evt_junk", "type": "reminder.created", "data": {}}).to_string().into_bytes();
    let (status, v) = post(&url, &old_secret, &junk, "m-3", false).await;
    assert_eq!((status, v["status"].as_str()), (202, Some("quarantined")), "{v}");
    // A reviewer approves an exported bundle.
    let reviewer =
        i.cli_json(&["token", "create", "--name", "rita", "--role", "reviewer"])["token"].as_str().unwrap().to_owned();
    let api = reqwest::Client::new();
    let bundle: Value =
        api.post(s.url("/api/v1/evidence/exports")).bearer_auth(&reviewer).send().await.unwrap().json().await.unwrap();
    let signed_at = now();
    // The seeded failed run is a critical finding: acknowledged by id.
    let acknowledge: Vec<Value> = bundle["evidence"]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["severity"] == "critical")
        .filter_map(|f| f["id"].as_str().map(str::to_owned))
        .collect::<std::collections::BTreeSet<String>>()
        .into_iter()
        .map(|id| json!({"finding": id, "comment": "seeded for the metrics"}))
        .collect();
    let ok = api
        .post(s.url("/api/v1/evidence/signoffs"))
        .bearer_auth(&reviewer)
        .json(&json!({"digest": bundle["digest"], "decision": "approved", "comment": "reviewed",
            "acknowledge": acknowledge}))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 201);

    // The database-read gauges refresh every 15 s.
    let key = [("tenant", "clinic-a"), ("endpoint", "hooks"), ("key_id", old_key.as_str())];
    let deadline = Instant::now() + Duration::from_secs(40);
    let m = loop {
        let m = scrape(&s).await;
        let ready = value(&m, "signet_quarantine_oldest_open_age_seconds", &[]).is_some_and(|v| v > 0.0)
            && value(&m, "signet_key_overlap_last_verified_timestamp_seconds", &key).is_some_and(|v| v > 0.0)
            && value(&m, "signet_evidence_last_signoff_timestamp_seconds", &[("decision", "approved")])
                .is_some_and(|v| v > 0.0);
        if ready {
            break m;
        }
        assert!(Instant::now() < deadline, "the gauges never refreshed: {m}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let overlap_end = value(&m, "signet_key_overlap_end_timestamp_seconds", &key).expect("the old key's overlap");
    let expected_end = (now() + 86_400) as f64;
    assert!((overlap_end - expected_end).abs() < 120.0, "overlap ends {overlap_end}, expected ~{expected_end}");
    let new_key = [("key_id", rotated["key_id"].as_str().unwrap())];
    assert_eq!(value(&m, "signet_key_overlap_end_timestamp_seconds", &new_key), None, "the new key is not in overlap");
    let last_verified = value(&m, "signet_key_overlap_last_verified_timestamp_seconds", &key).unwrap();
    assert!((last_verified - now() as f64).abs() < 60.0, "{last_verified}");
    assert!(value(&m, "signet_claim_rollbacks_total", &[("reason", "refused")]).unwrap() >= 1.0, "{m}");
    let drill = |result| value(&m, "signet_drills_last_run_timestamp_seconds", &[("result", result)]);
    assert_eq!(drill("passed"), Some((ran_at / 1000) as f64), "{m}");
    assert_eq!(drill("failed"), Some(0.0), "another version's run says nothing about this build: {m}");
    assert_eq!(drill("interrupted"), Some(0.0), "{m}");
    let approved = value(&m, "signet_evidence_last_signoff_timestamp_seconds", &[("decision", "approved")]).unwrap();
    assert!((approved - signed_at as f64).abs() < 5.0, "{approved} vs {signed_at}");
    assert_eq!(value(&m, "signet_evidence_last_signoff_timestamp_seconds", &[("decision", "rejected")]), Some(0.0));
    // Written at start, then at least every interval.
    let checkpoint = value(&m, "signet_audit_checkpoint_timestamp_seconds", &[]).unwrap();
    assert!(checkpoint > 0.0 && checkpoint <= now() as f64, "{m}");
    assert_eq!(value(&m, "signet_hooks_in_flight", &[]), Some(0.0), "nothing in flight once answered");
});

// A claim transaction that fails on the database is counted although the
// tenant's retries mean the provider is asked to come back.
both_engines!(claim_rollbacks_count_database_errors, async |i: &Install| {
    let (_, secret) = setup(i);
    i.meet_rollout_order();
    i.cli_json(&["retry-policy", "set", "clinic-a", "--policy", "enabled", "--reason", "in the enabled cohort"]);
    let s = i.serve_with(&[("SIGNET_FAULTS", "transient=1")]);
    let (status, _) = post(&s.url("/hooks/clinic-a/hooks"), &secret, &created("r-t"), "m-t", false).await;
    assert_eq!(status, 503);
    let m = scrape(&s).await;
    let errors = value(&m, "signet_claim_rollbacks_total", &[("reason", "error")]).unwrap();
    let retries = value(&m, "signet_claim_retries_total", &[]).unwrap();
    assert!(errors >= 3.0, "three attempts failed, each counted: {m}");
    assert!(errors >= retries, "every repeated attempt followed a failed one: {m}");
});

/// Each rule's name, and the lines of its definition.
fn rules() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(repo_file("deploy/prometheus/alerts.yml")).unwrap();
    let mut rules: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim_start();
        if let Some(name) = trimmed.strip_prefix("- alert: ") {
            rules.push((name.trim().to_owned(), String::new()));
        } else if trimmed.starts_with("- record: ") || trimmed.starts_with("- name: ") {
            rules.push((String::new(), String::new()));
        } else if let Some((_, body)) = rules.last_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    rules.into_iter().filter(|(name, _)| !name.is_empty()).collect()
}

/// A markdown heading's GitHub anchor.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

// Every alert has a severity, a summary, a description and a runbook link to
// its own section, which says what it means, what to look at and the fix;
// and the runbook has no section for an alert that does not exist.
#[test]
fn every_alert_has_its_own_runbook_section() {
    let runbook = std::fs::read_to_string(repo_file("docs/runbook.md")).unwrap();
    let sections: Vec<(String, &str)> = runbook
        .split("\n## ")
        .skip(1)
        .map(|s| {
            let (heading, body) = s.split_once('\n').unwrap_or((s, ""));
            (heading.trim().to_owned(), body)
        })
        .collect();
    let rules = rules();
    assert!(rules.len() >= 16, "{} alerts", rules.len());
    for (name, body) in &rules {
        for field in ["severity: ", "summary: ", "description: ", "runbook_url: "] {
            assert!(body.contains(field), "{name} has no {field}");
        }
        let url = body.lines().find_map(|l| l.trim().strip_prefix("runbook_url: ")).unwrap();
        assert_eq!(url, format!("docs/runbook.md#{}", anchor(name)), "{name}'s runbook_url");
        let (_, text) = sections
            .iter()
            .find(|(heading, _)| anchor(heading) == anchor(name))
            .unwrap_or_else(|| panic!("docs/runbook.md has no section for {name}"));
        for part in ["**Meaning.**", "**Look at.**\n1. ", "\n2. ", "\n3. ", "**Fix.**"] {
            assert!(text.contains(part), "{name}'s section lacks {part:?}");
        }
    }
    for (heading, _) in &sections {
        assert!(rules.iter().any(|(name, _)| name == heading), "the runbook's section {heading} names no alert");
    }
    // The runbook's links to its own sections resolve.
    for link in runbook.split("](#").skip(1) {
        let target = link.split(')').next().unwrap();
        assert!(sections.iter().any(|(h, _)| anchor(h) == target), "dangling link #{target}");
    }
}

/// A running `prometheus`, killed (and its storage removed) when dropped.
pub(crate) struct Prometheus {
    child: Child,
    pub(crate) base: String,
    dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    /// What Prometheus logged (for a failing assertion's message).
    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default()
    }

    /// `GET /api/v1/<path>` with `query`, as JSON.
    pub(crate) async fn api(&self, path: &str, query: &[(&str, &str)]) -> Value {
        let res = reqwest::Client::new().get(format!("{}/api/v1/{path}", self.base)).query(query).send().await;
        match res {
            Ok(r) => r.json().await.unwrap_or(Value::Null),
            Err(_) => Value::Null,
        }
    }
}

/// The `prometheus` binary on PATH. Without one the test is skipped visibly,
/// except in CI (`CI` or `SIGNET_REQUIRE_PG=1` set), where it fails.
fn prometheus_binary() -> Option<PathBuf> {
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).map(|d| d.join("prometheus")).find(|f| f.is_file()))
        .unwrap_or_default();
    if found.is_none() {
        let ci = std::env::var_os("CI").is_some() || std::env::var("SIGNET_REQUIRE_PG").is_ok_and(|v| v == "1");
        assert!(!ci, "prometheus is required here (CI or SIGNET_REQUIRE_PG=1): apt-get install prometheus");
        eprintln!("SKIPPED: no prometheus binary on PATH (scripts/setup.sh installs Debian's)");
    }
    found
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Starts Prometheus on a free port with its own storage, evaluating the
/// shipped rules every second against `target` (`host:port` of a metrics
/// listener) scraped every second.
async fn start_prometheus(bin: &Path, target: &str) -> Prometheus {
    let dir = tempfile::tempdir().unwrap();
    let rules = repo_file("deploy/prometheus/alerts.yml").canonicalize().unwrap();
    let config = format!(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {}\n\
         scrape_configs:\n  - job_name: signet\n    static_configs:\n      - targets: ['{target}']\n",
        rules.display()
    );
    std::fs::write(dir.path().join("prometheus.yml"), config).unwrap();
    let port = free_port();
    let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
    let child = Command::new(bin)
        .arg(format!("--config.file={}", dir.path().join("prometheus.yml").display()))
        .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("spawn prometheus");
    let p = Prometheus { child, base: format!("http://127.0.0.1:{port}"), dir };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let ready = reqwest::get(format!("{}/-/ready", p.base)).await.is_ok_and(|r| r.status().is_success());
        if ready {
            break;
        }
        assert!(Instant::now() < deadline, "prometheus did not become ready: {}", p.log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The rules loaded (a rule file that does not load leaves none).
    let groups = p.api("rules", &[]).await;
    let loaded = groups["data"]["groups"].as_array().map_or(0, Vec::len);
    assert!(loaded >= 6, "the rules did not load: {groups} {}", p.log());
    p
}

/// Starts `signet serve` with an endpoint whose key was rotated (the secret
/// returned is the old one, in its overlap), and Prometheus, once it has
/// seen the target up. `None` when the test is skipped.
pub(crate) async fn signet_with_prometheus(i: &Install) -> Option<(Server, Prometheus, SigningSecret)> {
    let bin = prometheus_binary()?;
    let (key, secret) = setup(i);
    // The provider keeps the rotated-out key: a key in its overlap, so the
    // overlap series exist from the first gauge refresh, at start.
    i.cli_json(&["key", "rotate", &key, "--approve-as", "rita"]);
    let s = i.serve();
    let target = s.metrics.trim_start_matches("http://").trim_end_matches("/metrics").to_owned();
    let p = start_prometheus(&bin, &target).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let up = p.api("query", &[("query", "up{job=\"signet\"}")]).await;
        if up["data"]["result"][0]["value"][1] == "1" {
            break;
        }
        assert!(Instant::now() < deadline, "prometheus never scraped signet: {up} {}", p.log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Some((s, p, secret))
}

// The shipped rules in a real Prometheus, scraping a real server: bad
// signatures at an endpoint fire the burst alert, labelled with the
// endpoint; then every query of the Grafana dashboard runs there. The rule
// is loaded as shipped: it has no `for`, so nothing is shortened for the
// test; the rules with a `for` are covered by promtool's unit tests
// (alerts.test.yml), where time is simulated.
both_engines!(bad_signatures_fire_the_burst_alert_and_the_dashboard_queries_run, async |i: &Install| {
    let Some((s, p, secret)) = signet_with_prometheus(i).await else { return };
    let url = s.url("/hooks/clinic-a/hooks");
    // One that verifies: the failures after it are counted under its key.
    let (status, v) = post(&url, &secret, &created("good"), "m-good", false).await;
    assert_eq!((status, v["status"].as_str()), (200, Some("applied")), "{v}");
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut sent = 0;
    let firing = loop {
        // A steady stream, so the counter rises between scrapes (a series
        // that first appears at its final value has no increase).
        for _ in 0..10 {
            let (status, v) = post(&url, &secret, &created(&format!("bad-{sent}")), &format!("m-{sent}"), true).await;
            assert_eq!((status, v["error"].as_str()), (401, Some("signature_mismatch")), "{v}");
            sent += 1;
        }
        let alerts = p.api("alerts", &[]).await;
        let found = alerts["data"]["alerts"].as_array().and_then(|all| {
            all.iter()
                .find(|a| a["labels"]["alertname"] == "SignetVerificationFailureBurst" && a["state"] == "firing")
                .cloned()
        });
        if let Some(a) = found {
            break a;
        }
        assert!(Instant::now() < deadline, "not firing after {sent} bad signatures: {alerts} {}", p.log());
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert_eq!(firing["labels"]["tenant"], "clinic-a", "{firing}");
    assert_eq!(firing["labels"]["endpoint"], "hooks", "{firing}");
    assert_eq!(firing["labels"]["severity"], "warning", "{firing}");
    assert_eq!(firing["annotations"]["runbook_url"], "docs/runbook.md#signetverificationfailureburst");
    // Every rule evaluates without an error against the real metrics.
    let groups = p.api("rules", &[]).await;
    for group in groups["data"]["groups"].as_array().unwrap() {
        for rule in group["rules"].as_array().unwrap() {
            assert_eq!(rule["health"], "ok", "{rule}");
        }
    }
    // Item 2: the dashboard's queries against the same Prometheus.
    crate::dashboard::every_query_runs_and_names_exported_metrics(&p, &s).await;
});
