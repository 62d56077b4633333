//! Several `signet serve` processes on one PostgreSQL database (issue 28
//! item 3), as real processes with a real SIGKILL: nothing lost, nothing
//! doubled, and each background job in one process at a time, moving to
//! another when its holder dies.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    sync::Arc,
    time::{Duration, Instant},
};

use domain::crypto::{SigningSecret, signature};
use sea_orm::{ConnectionTrait, DatabaseConnection, Statement};
use serde_json::{Value, json};
use views::scheme::Scheme;

use crate::{
    outbox::{Sink, clinic},
    support::{Engine, Install, Server},
};

const TENANT: &str = "clinic-a";
const CLAIMS: &str = "SELECT COUNT(*) AS n FROM inbox_claims WHERE event_id LIKE 'evt-%'";
/// Leases short enough that a killed holder's work moves within seconds.
const SHORT_LEASES: [(&str, &str); 4] = [
    ("SIGNET_JOB_LEASE_MS", "1500"),
    ("SIGNET_OUTBOX_LEASE_MS", "1500"),
    ("SIGNET_OUTBOX_POLL_MS", "50"),
    ("SIGNET_RELAY_ALLOW", "127.0.0.0/8"),
];

async fn scalar(db: &DatabaseConnection, sql: &str) -> i64 {
    let row = db.query_one_raw(Statement::from_string(db.get_database_backend(), sql.to_owned())).await.unwrap();
    row.unwrap().try_get::<i64>("", "n").unwrap()
}

/// Event `k`: even ones create reminder `r-k` (a reminder transition), odd
/// ones request OTP `otp-k` (an outbox intent the relay sends).
fn event(k: usize) -> (String, Vec<u8>) {
    let id = format!("evt-{k}");
    let body = if k.is_multiple_of(2) {
        let reminder = format!("r-{k}");
        json!({"type": "reminder.created", "data": {"reminder_id": reminder, "send_at": "2027-01-05T09:00:00Z"}})
    } else {
        json!({"type": "otp.requested", "data": {"otp_request_id": format!("otp-{k}"), "channel": "sms"}})
    };
    (id, body.to_string().into_bytes())
}

/// Posts event `k` to `base`, signed now; `true` when answered 2xx.
async fn post(c: &reqwest::Client, base: &str, secret: &SigningSecret, k: usize) -> bool {
    let (id, body) = event(k);
    let ts = domain::clock::now_ms() / 1000;
    let mut r = c.post(format!("{base}/hooks/{TENANT}/hooks")).body(body.clone());
    for (h, v) in signature::sign(Scheme::StandardWebhooks, secret, &body, ts, &id).unwrap() {
        r = r.header(h, v);
    }
    match r.timeout(Duration::from_secs(20)).send().await {
        Ok(res) => res.status().is_success(),
        Err(_) => false,
    }
}

/// The log lines (JSON) whose message is `message`, with their fields.
fn lines(s: &Server, message: &str) -> Vec<Value> {
    s.output()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["message"] == message)
        .map(|v| v["fields"].clone())
        .collect()
}

/// Whether `s` has taken `job`'s lease (its latest take is the lease now
/// only if nobody else took it later, which the callers check).
fn took(s: &Server, job: &str) -> Vec<i64> {
    lines(s, "took the job lease").iter().filter(|f| f["job"] == job).filter_map(|f| f["epoch"].as_i64()).collect()
}

fn serve_three(i: &Install, extra: &[(&str, &str)]) -> Vec<Server> {
    let mut env: Vec<(&str, &str)> = SHORT_LEASES.to_vec();
    env.push(("SIGNET_LOG_FORMAT", "json"));
    env.extend_from_slice(extra);
    (0..3).map(|_| i.serve_with(&env)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_receivers_lose_nothing_and_double_nothing_when_one_is_killed() {
    let Some(i) = Install::new(Engine::Postgres) else { return };
    let sink = Sink::default();
    let relay = sink.start().await;
    let secret = SigningSecret::parse(&clinic(&i, TENANT, Some(&relay))).unwrap();
    // The rollout order's drills wrote rows of their own: count from here.
    let db = domain::db::connect(&i.database_url).await.unwrap();
    let before = |table: &'static str| {
        let db = db.clone();
        async move { scalar(&db, &format!("SELECT COUNT(*) AS n FROM {table}")).await }
    };
    let (reminders0, intents0) = (before("reminders").await, before("outbox_intents").await);
    let sent0 = scalar(&db, "SELECT COUNT(*) AS n FROM outbox_intents WHERE status = 'sent'").await;
    let mut servers = serve_three(&i, &[]);
    // The process to kill: the relay's holder, so the relay must move too.
    let deadline = Instant::now() + Duration::from_secs(10);
    let victim = loop {
        if let Some(n) = (0..3).find(|&n| !took(&servers[n], "outbox_relay").is_empty()) {
            break n;
        }
        assert!(Instant::now() < deadline, "no process took the relay's lease");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let bases: Arc<Vec<String>> = Arc::new(servers.iter().map(|s| s.base.clone()).collect());
    const EVENTS: usize = 600;
    const WORKERS: usize = 16;
    let secret = Arc::new(secret);
    let mut tasks = Vec::new();
    for w in 0..WORKERS {
        let (bases, secret) = (bases.clone(), secret.clone());
        tasks.push(tokio::spawn(async move {
            let c = reqwest::Client::new();
            let mut answered = Vec::new();
            // Round-robin across the three receivers.
            for k in (w..EVENTS).step_by(WORKERS) {
                if post(&c, &bases[k % bases.len()], &secret, k).await {
                    answered.push(k);
                }
            }
            answered
        }));
    }
    // Mid-run: a third of the events are in.
    while scalar(&db, CLAIMS).await < (EVENTS / 3) as i64 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let victim_pid = servers[victim].child.id();
    servers[victim].kill9();
    // Only the relay's holder sends, and no survivor can hold it before the
    // victim's lease expires (by the database's clock, as the sink's stamps).
    let lease = domain::job_lease::current(&db, "outbox_relay").await.unwrap().expect("the relay's lease");
    assert!(lease.holder.starts_with(&format!("pid{victim_pid}-")), "the victim held the relay when killed: {lease:?}");
    let relay_free_at = lease.expires_at;
    let mut answered = HashSet::new();
    for t in tasks {
        answered.extend(t.await.unwrap());
    }
    assert!(answered.len() < EVENTS, "the killed process answered nothing after its death: some must be unanswered");
    // Every event answered 2xx was committed before its answer.
    let committed: HashSet<usize> = {
        let sql = "SELECT event_id FROM inbox_claims WHERE event_id LIKE 'evt-%'";
        let rows = db.query_all_raw(Statement::from_string(db.get_database_backend(), sql.to_owned())).await.unwrap();
        rows.iter().map(|r| r.try_get::<String>("", "event_id").unwrap()[4..].parse().unwrap()).collect()
    };
    let lost: Vec<_> = answered.iter().filter(|k| !committed.contains(k)).collect();
    assert!(lost.is_empty(), "answered 2xx but not committed: {lost:?}");
    // The provider retries everything else on the survivors until answered.
    let survivors: Vec<String> = (0..3).filter(|&n| n != victim).map(|n| servers[n].base.clone()).collect();
    let c = reqwest::Client::new();
    for k in (0..EVENTS).filter(|k| !answered.contains(k)) {
        let mut tries = 0;
        while !post(&c, &survivors[k % 2], &secret, k).await {
            tries += 1;
            assert!(tries < 20, "event {k} was never answered 2xx");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    assert_eq!(scalar(&db, CLAIMS).await, EVENTS as i64, "one claim per event");
    let distinct = "SELECT COUNT(DISTINCT event_id) AS n FROM inbox_claims WHERE event_id LIKE 'evt-%'";
    assert_eq!(scalar(&db, distinct).await, EVENTS as i64);
    assert_eq!(before("reminders").await - reminders0, (EVENTS / 2) as i64, "one reminder transition each");
    let intents = (EVENTS / 2) as i64;
    assert_eq!(before("outbox_intents").await - intents0, intents, "one intent each");
    // Every intent is sent, by the relay's new holder for those left behind.
    let deadline = Instant::now() + Duration::from_secs(60);
    while scalar(&db, "SELECT COUNT(*) AS n FROM outbox_intents WHERE status = 'sent'").await - sent0 < intents {
        assert!(Instant::now() < deadline, "not every intent was sent");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let survivor_took: Vec<i64> =
        (0..3).filter(|&n| n != victim).flat_map(|n| took(&servers[n], "outbox_relay")).collect();
    assert!(!survivor_took.is_empty(), "a survivor took the relay over");
    // At most one send per intent: a second request with the same key is
    // only allowed for an intent the killed holder had sent but not yet
    // marked, so its first request must have come before a survivor could
    // send anything. (Stamped when the sink's handler runs, which can be after
    // the kill for a request the victim sent just before it.)
    let (seen, arrived) = (sink.seen(), sink.arrived.lock().unwrap().clone());
    let mut by_key: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
    for ((key, _), at) in seen.iter().zip(&arrived) {
        by_key.entry(key.as_str()).or_default().push(*at);
    }
    assert_eq!(by_key.len() as i64, intents, "every intent reached the relay");
    for (key, times) in &by_key {
        match times.as_slice() {
            [_] => {}
            [first, _] if *first < relay_free_at => {}
            other => panic!(
                "intent {key} was sent {} times, at {other:?} ms; the relay was free from {relay_free_at}",
                other.len()
            ),
        }
    }
}

/// A begin..end interval of one job's step in one process.
#[derive(Debug, Clone, Copy)]
struct Span {
    process: usize,
    epoch: i64,
    begin: i64,
    end: i64,
    /// The holder found its tenure over at the end of the step (it had
    /// not renewed in time) and did nothing more.
    abandoned: bool,
}

/// The steps each process logged per job (`job_step_ms` fault); an open
/// step of a killed process ends at `killed_ms`. A step's end is logged at
/// the instant its tenure was confirmed to cover it, or as abandoned.
fn steps(servers: &[Server], killed: Option<(usize, i64)>) -> HashMap<String, Vec<Span>> {
    let mut all: HashMap<String, Vec<Span>> = HashMap::new();
    for (n, s) in servers.iter().enumerate() {
        let mut open: HashMap<String, (i64, i64)> = HashMap::new();
        for l in s.output().lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()) {
            let f = &l["fields"];
            let (Some(job), Some(epoch), Some(at)) = (f["job"].as_str(), f["epoch"].as_i64(), f["at_ms"].as_i64())
            else {
                continue;
            };
            match l["message"].as_str() {
                Some("job step begin") => {
                    open.insert(job.to_owned(), (epoch, at));
                }
                Some(m @ ("job step end" | "job step abandoned")) => {
                    if let Some((epoch, begin)) = open.remove(job) {
                        let abandoned = m == "job step abandoned";
                        all.entry(job.to_owned()).or_default().push(Span {
                            process: n,
                            epoch,
                            begin,
                            end: at,
                            abandoned,
                        });
                    }
                }
                _ => {}
            }
        }
        if let Some((victim, killed_ms)) = killed.filter(|(v, _)| *v == n) {
            let _ = victim;
            for (job, (epoch, begin)) in open {
                all.entry(job).or_default().push(Span { process: n, epoch, begin, end: killed_ms, abandoned: false });
            }
        }
    }
    all
}

const JOBS: [&str; 4] = ["outbox_relay", "retention_purge", "gauge_samples", "maintenance"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_job_runs_in_one_process_at_a_time_and_moves_when_its_holder_is_killed() {
    let Some(i) = Install::new(Engine::Postgres) else { return };
    // Each step holds its job for 200 ms and logs when it begins and ends.
    let extra = [("SIGNET_FAULTS", "job_step_ms=200"), ("SIGNET_PURGE_INTERVAL_SECS", "1")];
    let mut servers = serve_three(&i, &extra);
    // Every job runs somewhere (gauge samples every 15 s, maintenance 10 s).
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let s = steps(&servers, None);
        if JOBS.iter().all(|j| s.get(*j).is_some_and(|v| !v.is_empty())) {
            break;
        }
        assert!(Instant::now() < deadline, "not every job ran: {:?}", s.keys().collect::<Vec<_>>());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Kill the relay's holder; every job it held must move.
    let s = steps(&servers, None);
    let victim = s["outbox_relay"].last().unwrap().process;
    let held: Vec<&str> =
        JOBS.iter().copied().filter(|j| s[*j].last().is_some_and(|sp| sp.process == victim)).collect();
    servers[victim].kill9();
    let killed_ms = domain::clock::now_ms();
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let s = steps(&servers, Some((victim, killed_ms)));
        let moved =
            held.iter().all(|j| s[*j].iter().any(|sp| sp.process != victim && sp.begin > killed_ms && !sp.abandoned));
        if moved {
            break;
        }
        assert!(Instant::now() < deadline, "jobs {held:?} did not move after their holder was killed");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let s = steps(&servers, Some((victim, killed_ms)));
    for job in JOBS {
        let spans = &s[job];
        for a in spans {
            for b in spans.iter().filter(|b| b.process != a.process) {
                // Only a step its holder abandoned (its tenure ran out while
                // it worked) may overlap another, and only one under a later
                // epoch: the process that took the job over.
                let apart = a.end <= b.begin || b.end <= a.begin;
                let superseded = a.abandoned && b.epoch > a.epoch;
                assert!(apart || superseded, "{job} ran in two processes at once: {a:?} and {b:?}");
            }
        }
        // A new holder works under a later epoch than any before it.
        let mut by_time = spans.clone();
        by_time.sort_by_key(|sp| sp.begin);
        assert!(by_time.windows(2).all(|w| w[0].epoch <= w[1].epoch), "{job}: epochs go back: {by_time:?}");
    }
    for job in &held {
        let after = s[*job].iter().filter(|sp| sp.begin > killed_ms && !sp.abandoned).map(|sp| sp.epoch).min().unwrap();
        let before = s[*job].iter().filter(|sp| sp.process == victim).map(|sp| sp.epoch).max().unwrap();
        assert!(after > before, "{job} resumed under a new epoch ({before} then {after})");
    }
}

/// Posts `body` as event `id` to `base`, signed now; `true` when 2xx.
async fn post_body(c: &reqwest::Client, base: &str, secret: &SigningSecret, id: &str, body: &str) -> bool {
    let ts = domain::clock::now_ms() / 1000;
    let mut r = c.post(format!("{base}/hooks/{TENANT}/hooks")).body(body.to_owned());
    for (h, v) in signature::sign(Scheme::StandardWebhooks, secret, body.as_bytes(), ts, id).unwrap() {
        r = r.header(h, v);
    }
    r.send().await.is_ok_and(|res| res.status().is_success())
}

/// The audit entries of `action`: (actor kind, after).
async fn audits(db: &DatabaseConnection, action: &str) -> Vec<(String, Value)> {
    let sql = format!("SELECT actor_kind, after FROM audit_log WHERE action = '{action}' ORDER BY seq");
    let rows = db.query_all_raw(Statement::from_string(db.get_database_backend(), sql)).await.unwrap();
    rows.iter()
        .map(|r| {
            let after: String = r.try_get("", "after").unwrap();
            (r.try_get("", "actor_kind").unwrap(), serde_json::from_str(&after).unwrap())
        })
        .collect()
}

const PASSWORD: &str = "a long enough password";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_processs_rewrap_and_bulk_release_resume_in_another_on_their_own() {
    let Some(i) = Install::new(Engine::Postgres) else { return };
    i.cli_json(&["tenant", "create", TENANT]);
    i.cli_json(&["endpoint", "create", TENANT, "hooks", "--scheme", "standard-webhooks"]);
    let key = i.cli_json(&["key", "provision", TENANT, "hooks", "--approve-as", "rita"]);
    let secret = SigningSecret::parse(key["secret"].as_str().unwrap()).unwrap();
    let token =
        i.cli_json(&["token", "create", "--name", "pager", "--role", "oncall"])["token"].as_str().unwrap().to_owned();
    i.cli_json_stdin(&["user", "create", "root", "--role", "admin"], PASSWORD);
    let db = domain::db::connect(&i.database_url).await.unwrap();
    // A runner silent for 2 s is resumed. The first process works slowly
    // (windows of two rows, a pause after each window and each entry), so
    // both jobs are midway when it is killed; the others at full speed.
    let stale = [("SIGNET_BULK_STALE_SECS", "2"), ("SIGNET_KEK_STALE_SECS", "2")];
    let slow = ("SIGNET_FAULTS", "stall_bulk_entry_ms=300,kek_window_rows=2,stall_kek_window_ms=300");
    let mut env: Vec<(&str, &str)> = SHORT_LEASES.to_vec();
    env.push(("SIGNET_LOG_FORMAT", "json"));
    env.extend_from_slice(&stale);
    let mut servers = vec![i.serve_with(&[env.clone(), vec![slow]].concat())];
    servers.extend((0..2).map(|_| i.serve_with(&env)));

    // Updates that arrive before their reminders are quarantined; then the
    // reminders arrive, so a release applies each.
    const ENTRIES: i64 = 20;
    let c = reqwest::Client::new();
    for n in 0..ENTRIES {
        let update = json!({"type": "reminder.scheduled", "data": {"reminder_id": format!("r-{n}")}}).to_string();
        assert!(post_body(&c, &servers[0].base, &secret, &format!("upd-{n}"), &update).await);
    }
    for n in 0..ENTRIES {
        let created = json!({"type": "reminder.created", "data": {"reminder_id": format!("r-{n}"),
            "send_at": "2027-01-05T09:00:00Z"}})
        .to_string();
        assert!(post_body(&c, &servers[0].base, &secret, &format!("new-{n}"), &created).await);
    }
    let notices = "SELECT COUNT(*) AS n FROM outbox_intents WHERE kind = 'reminder_notice'";
    assert_eq!(scalar(&db, notices).await, 0);

    // Both jobs start in the first process.
    let res = c
        .post(servers[0].url("/api/v1/quarantine/bulk-releases"))
        .bearer_auth(&token)
        .json(&json!({"filter": {"tenant": TENANT, "reason": "reminder_not_found"}, "reason": "backfilled"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 202);
    let bulk_id = res.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();
    let admin = servers[0].client();
    let login = admin
        .post(servers[0].url("/fn/login"))
        .header("Origin", &servers[0].base)
        .form(&[("username", "root"), ("password", PASSWORD)])
        .send()
        .await
        .unwrap();
    assert_eq!(login.status(), 200);
    // Sealed rows before the rotation: what appears after it bounds the
    // stragglers below.
    let sealed_before: u64 = domain::kek::counts(&db).await.unwrap().values().sum();
    let rotated = admin.post(servers[0].url("/fn/rotate_kek")).header("Origin", &servers[0].base).send().await.unwrap();
    assert!(rotated.status().is_success() || rotated.status().is_redirection(), "{}", rotated.status());
    let kek_total = scalar(&db, "SELECT total AS n FROM kek_rewraps").await;
    assert!(kek_total > ENTRIES, "every stored body and key waits for the rewrap: {kek_total}");

    // Midway through both, the process dies.
    let bulk_done = format!("SELECT processed AS n FROM bulk_releases WHERE id = '{bulk_id}'");
    let deadline = Instant::now() + Duration::from_secs(20);
    while scalar(&db, &bulk_done).await < 2 || scalar(&db, "SELECT scanned AS n FROM kek_rewraps").await < 4 {
        assert!(Instant::now() < deadline, "the jobs did not get going");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    servers[0].kill9();
    let killed = Instant::now();
    let processed_at_kill = scalar(&db, &bulk_done).await;
    let scanned_at_kill = scalar(&db, "SELECT scanned AS n FROM kek_rewraps").await;
    assert!(processed_at_kill < ENTRIES && scanned_at_kill < kek_total, "killed midway");

    // Another process resumes each on its own and finishes it.
    let finished = |table: &str| format!("SELECT COUNT(*) AS n FROM {table} WHERE status = 'finished'");
    while scalar(&db, &finished("bulk_releases")).await < 1 || scalar(&db, &finished("kek_rewraps")).await < 1 {
        assert!(killed.elapsed() < Duration::from_secs(30), "the jobs were not resumed and finished in time");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for (action, log) in [
        ("quarantine.bulk_release.resume", "resumed a stopped bulk release"),
        ("kek.rewrap.resume", "resumed a stopped KEK rewrap"),
    ] {
        let resumes = audits(&db, action).await;
        assert_eq!(resumes.len(), 1, "{action}: resumed once: {resumes:?}");
        let (kind, after) = &resumes[0];
        assert_eq!((kind.as_str(), &after["automatic"]), ("system", &json!(true)), "{action}: {after}");
        assert!(after["previous_runner"].is_string(), "{after}");
        let by: Vec<usize> = (1..3).filter(|&n| !lines(&servers[n], log).is_empty()).collect();
        assert_eq!(by.len(), 1, "{action}: one survivor resumed it");
    }

    // Every entry released once, counted once, one reminder transition each.
    let job = format!(
        "SELECT processed, released, already_resolved, still_failing, auto_resumes FROM bulk_releases \
         WHERE id = '{bulk_id}'"
    );
    let row = db.query_one_raw(Statement::from_string(db.get_database_backend(), job)).await.unwrap().unwrap();
    let counts: Vec<i64> = ["processed", "released", "already_resolved", "still_failing"]
        .iter()
        .map(|c| row.try_get::<i64>("", c).unwrap())
        .collect();
    assert_eq!(counts, vec![ENTRIES, ENTRIES, 0, 0]);
    assert_eq!(row.try_get::<i32>("", "auto_resumes").unwrap(), 1);
    let items =
        format!("SELECT COUNT(*) AS n FROM bulk_release_items WHERE job_id = '{bulk_id}' AND outcome = 'released'");
    assert_eq!(scalar(&db, &items).await, ENTRIES, "each entry's outcome recorded once");
    let released = "SELECT COUNT(*) AS n FROM quarantine WHERE status = 'released'";
    assert_eq!(scalar(&db, released).await, ENTRIES);
    assert_eq!(scalar(&db, notices).await, ENTRIES, "one reminder transition each");
    assert_eq!(audits(&db, "quarantine.release").await.len() as i64, ENTRIES);
    assert_eq!(audits(&db, "quarantine.bulk_release.finish").await.len(), 1);

    // Every sealed row under the new version, each resealed once.
    let by_version = domain::kek::counts(&db).await.unwrap();
    assert!(by_version.keys().all(|(_, v)| *v == 2), "{by_version:?}");
    // Each reseal is guarded by the row's old version, so the count is of
    // distinct rows: the rotation's total, plus any straggler a process
    // sealed under the old version before its ring refresh loaded the new
    // one (the rewrap meets it ahead of its cursor). Stragglers are rows
    // that appeared after the rotation, so they bound the excess.
    let rewrapped = scalar(&db, "SELECT rewrapped AS n FROM kek_rewraps").await;
    let appeared = by_version.values().sum::<u64>().saturating_sub(sealed_before) as i64;
    assert!(
        (kek_total..=kek_total + appeared).contains(&rewrapped),
        "each row resealed once, none missed: {rewrapped} of {kek_total} (+ at most {appeared} new rows)"
    );
}

/// The connections open to the PostgreSQL database `url` names, counted
/// from the admin database (so the count does not include the counting one).
async fn connections_to(admin: &DatabaseConnection, url: &str) -> i64 {
    let name = url.rsplit_once('/').unwrap().1;
    // Client backends only: an autovacuum worker may be in the database too.
    let sql = format!(
        "SELECT COUNT(*) AS n FROM pg_stat_activity WHERE datname = '{name}' AND backend_type = 'client backend'"
    );
    scalar(admin, &sql).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_opens_at_most_its_pool_size_of_connections_and_still_answers_every_event() {
    let Some(i) = Install::new(Engine::Postgres) else { return };
    let secret = Arc::new(SigningSecret::parse(&clinic(&i, TENANT, None)).unwrap());
    let s = i.serve_with(&[("SIGNET_PG_POOL_SIZE", "4")]);
    let admin_url =
        std::env::var("SIGNET_TEST_PG_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let admin = domain::db::connect(&admin_url).await.unwrap();
    // 48 events on 16 connections at once: more concurrent claims than the
    // pool holds, so requests wait for a connection, and none may fail.
    let mut tasks = Vec::new();
    for w in 0..16 {
        let (base, secret) = (s.base.clone(), secret.clone());
        tasks.push(tokio::spawn(async move {
            let c = reqwest::Client::new();
            let mut all = true;
            for k in (w..48).step_by(16) {
                all &= post(&c, &base, &secret, k + 10_000).await;
            }
            all
        }));
    }
    let mut peak = 0;
    while tasks.iter().any(|t| !t.is_finished()) {
        peak = peak.max(connections_to(&admin, &i.database_url).await);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for t in tasks {
        assert!(t.await.unwrap(), "an event was not answered 2xx");
    }
    peak = peak.max(connections_to(&admin, &i.database_url).await);
    assert!((1..=4).contains(&peak), "the server held {peak} connections with a pool of 4");
    let db = domain::db::connect(&i.database_url).await.unwrap();
    assert_eq!(scalar(&db, "SELECT COUNT(*) AS n FROM inbox_claims WHERE event_id LIKE 'evt-1____'").await, 48);
    // A size the pool cannot work with is refused, naming the setting.
    let out = i.command().env("SIGNET_PG_POOL_SIZE", "1").args(["tenant", "list"]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("pg-pool-size") && err.contains("4..=1000"), "{err}");
}
