//! Drills and sign-off evidence against the real binary: the CLI's drill
//! run kills a real child process; drills run over HTTP while the server
//! takes traffic, and real tenants' figures do not move; bundles export,
//! verify, and refuse bad input with one clear line.

mod checkpoints;
mod export;
mod signoff;

use std::time::{Duration, Instant};

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
                    let scheme = views::scheme::Scheme::StandardWebhooks;
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
