//! The world the matrix runs in: the server, its tenants and callers, and
//! what each case needs created fresh before a call.

use std::{
    collections::HashMap,
    sync::atomic::{AtomicUsize, Ordering},
};

use reqwest::{Client, StatusCode};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder};
use serde_json::{Value, json};

use super::case::{EVERYONE, Fresh, PASSWORD, Who};
use crate::support::{Install, Server};

pub(super) struct World {
    /// clinic-a/hooks' receive URL and an active key's secret.
    pub(super) hook: (String, String),
    pub(super) sessions: HashMap<Who, Client>,
    pub(super) tokens: HashMap<Who, String>,
    pub(super) anonymous: Client,
    pub(super) counter: AtomicUsize,
}

/// The server under test: outbox intents that fail go dead at once, and a
/// bulk release pauses after each entry (so one can be caught running).
pub(super) fn serve(i: &Install) -> Server {
    i.serve_with(&[
        // The relay URL is on loopback: allowed, so sends fail by connection.
        ("SIGNET_RELAY_ALLOW", "127.0.0.0/8"),
        ("SIGNET_OUTBOX_MAX_ATTEMPTS", "1"),
        ("SIGNET_OUTBOX_POLL_MS", "50"),
        ("SIGNET_FAULTS", "stall_bulk_entry_ms=5000"),
    ])
}

pub(super) fn setup(i: &Install) {
    // Nothing listens on port 9: relayed notifications fail.
    i.cli_json(&["tenant", "create", "clinic-a", "--notify-url", "http://127.0.0.1:9/notify"]);
    i.cli_json(&["tenant", "create", "clinic-b"]);
    i.cli_json(&["endpoint", "create", "clinic-a", "hooks", "--scheme", "standard-webhooks"]);
    i.cli_json(&["endpoint", "create", "clinic-b", "hooks", "--scheme", "standard-webhooks"]);
    for (name, role, tenant) in [
        ("root", "admin", None),
        ("rita", "reviewer", None),
        ("otto", "oncall", None),
        ("carl", "oncall", None),
        ("alice", "clinic-admin", Some("clinic-a")),
        ("bob", "clinic-admin", Some("clinic-b")),
    ] {
        let mut args = vec!["user", "create", name, "--role", role];
        if let Some(t) = tenant {
            args.extend(["--tenant", t]);
        }
        i.cli_json_stdin(&args, PASSWORD);
    }
}

fn who_user(w: Who) -> (&'static str, &'static str, Option<&'static str>) {
    match w {
        Who::Admin => ("root", "admin", None),
        Who::Reviewer => ("rita", "reviewer", None),
        Who::Oncall => ("otto", "oncall", None),
        Who::ClinicOwn => ("alice", "clinic-admin", Some("clinic-a")),
        Who::ClinicOther => ("bob", "clinic-admin", Some("clinic-b")),
        Who::Anonymous => unreachable!(),
    }
}

pub(super) async fn world(i: &Install, s: &Server) -> World {
    let mut sessions = HashMap::new();
    let mut tokens = HashMap::new();
    for w in EVERYONE.into_iter().filter(|w| *w != Who::Anonymous) {
        let (user, role, tenant) = who_user(w);
        let c = s.client();
        let res = c
            .post(s.url("/fn/login"))
            .header("Origin", &s.base)
            .form(&[("username", user), ("password", PASSWORD)])
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK, "login {user}");
        let cookie = res.headers().get("set-cookie").unwrap().to_str().unwrap().to_owned();
        assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"), "{cookie}");
        sessions.insert(w, c);
        let mut args = vec!["token", "create", "--name", user, "--role", role];
        if let Some(t) = tenant {
            args.extend(["--tenant", t]);
        }
        tokens.insert(w, i.cli_json(&args)["token"].as_str().unwrap().to_owned());
    }
    let key = i.cli_json(&["key", "provision", "clinic-a", "hooks", "--approve-as", "rita"]);
    let hook = (s.url("/hooks/clinic-a/hooks"), key["secret"].as_str().unwrap().to_owned());
    // A stored bundle for every scope the callers read the latest of.
    for scope in [None, Some("clinic-a"), Some("clinic-b")] {
        export_by_cli(i, scope);
    }
    World { hook, sessions, tokens, anonymous: s.client(), counter: AtomicUsize::new(0) }
}

pub(super) async fn fresh(i: &Install, s: &Server, w: &World, f: Fresh) -> String {
    let args: &[&str] = match f {
        Fresh::Nothing => return String::new(),
        Fresh::Reminder => return "r-matrix".to_owned(),
        Fresh::Event => {
            let n = w.counter.fetch_add(1, Ordering::SeqCst);
            let body = format!(
                r#"{{"type":"reminder.created","data":{{"reminder_id":"r-e-{n}","send_at":"2027-01-05T09:00:00Z"}}}}"#
            );
            deliver(i, w, &body, &format!("e-{n}"));
            return format!("e-{n}");
        }
        Fresh::Quarantined => return quarantined(i, s, w).await,
        Fresh::DeadIntent => return dead_intent(i, s, w).await,
        Fresh::BulkRelease => return bulk_release(i, s, w, false).await,
        Fresh::InterruptedBulkRelease => return bulk_release(i, s, w, true).await,
        Fresh::IdleDrills => {
            drills_idle(s, w).await;
            return String::new();
        }
        Fresh::DrillRun => return drill_run(s, w).await,
        Fresh::IdleKek => {
            kek_idle(i).await;
            return String::new();
        }
        Fresh::StoppedRewrap => return stopped_rewrap(i).await,
        Fresh::RetirableKek => return retirable_kek(i).await,
        Fresh::Export => return export_by_cli(i, Some("clinic-a")),
        Fresh::PendingOverride => return pending_override(i),
        Fresh::ActiveKey => &["key", "provision", "clinic-a", "hooks", "--approve-as", "rita"],
        Fresh::PendingKey => &["key", "provision", "clinic-a", "hooks"],
    };
    i.cli_json(args)["key_id"].as_str().unwrap().to_owned()
}

/// The pending override of clinic-a, or a new one. The CLI asks for it, so
/// every signed-in caller is a second person; a key provisioned just before
/// is in no approved bundle, so the rollout order refuses and a request is
/// recorded.
fn pending_override(i: &Install) -> String {
    let listed = i.cli_json(&["retry-policy", "overrides", "clinic-a"]);
    if let Some(o) = listed.as_array().unwrap().iter().find(|o| o["status"] == "pending_approval") {
        return o["id"].as_str().unwrap().to_owned();
    }
    i.cli_json(&["key", "provision", "clinic-a", "hooks", "--approve-as", "rita"]);
    let set = ["retry-policy", "set", "clinic-a", "--policy", "enabled", "--reason", "matrix"];
    let o = i.cli_json(&[&set[..], &["--override-reason", "matrix"]].concat());
    o["id"].as_str().unwrap_or_else(|| panic!("no override was recorded: {o}")).to_owned()
}

/// Exports a bundle with the operator CLI (which no per-caller export
/// budget limits) and returns its digest.
fn export_by_cli(i: &Install, tenant: Option<&str>) -> String {
    let out = i.dir.path().join(format!("bundle-{}", uuid::Uuid::new_v4().simple()));
    let out = out.to_str().unwrap();
    let mut args = vec!["evidence", "export", "--out", out];
    if let Some(t) = tenant {
        args.extend(["--tenant", t]);
    }
    i.cli_json(&args)["digest"].as_str().unwrap().to_owned()
}

/// Sends `body` as a provider would, with `event_id`.
fn deliver(i: &Install, w: &World, body: &str, event_id: &str) {
    let (url, secret) = &w.hook;
    i.send_event(url, secret, event_id, body);
}

/// Waits until no drill run is in progress (they run one at a time).
async fn kek_idle(i: &Install) -> sea_orm::DatabaseConnection {
    let db = domain::db::connect(&i.database_url).await.unwrap();
    for _ in 0..600 {
        let running = domain::entity::kek_rewrap::Entity::find()
            .filter(domain::entity::kek_rewrap::Column::Status.eq("running"))
            .all(&db)
            .await
            .unwrap();
        if running.is_empty() {
            return db;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("a KEK rewrap never finished");
}

/// The latest rewrap, marked as stopped by an error (resumable).
async fn stopped_rewrap(i: &Install) -> String {
    use domain::entity::kek_rewrap as job;
    let db = kek_idle(i).await;
    let latest = match job::Entity::find().order_by_desc(job::Column::CreatedAt).one(&db).await.unwrap() {
        Some(j) => j,
        None => {
            let out = i.cli(&["kek", "rewrap"], "");
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            job::Entity::find().order_by_desc(job::Column::CreatedAt).one(&db).await.unwrap().unwrap()
        }
    };
    // Failed, and given up on by the automatic resume (which takes over a
    // failed job once it has been silent a minute, as it may be by now on a
    // slow run): it waits for a person.
    job::Entity::update_many()
        .col_expr(job::Column::Status, sea_orm::sea_query::Expr::value("failed"))
        .col_expr(job::Column::AutoResumes, sea_orm::sea_query::Expr::value(domain::kek::MAX_AUTO_RESUMES))
        .filter(job::Column::Id.eq(&latest.id))
        .exec(&db)
        .await
        .unwrap();
    latest.id
}

/// Rotates (from the shell) and ages the versions: the previous newest is
/// then unused and retirable.
async fn retirable_kek(i: &Install) -> String {
    let db = kek_idle(i).await;
    let rotated = i.cli_json(&["kek", "rotate"]);
    domain::entity::kek_version::Entity::update_many()
        .col_expr(domain::entity::kek_version::Column::CreatedAt, sea_orm::sea_query::Expr::value(0i64))
        .exec(&db)
        .await
        .unwrap();
    (rotated["kek_version"].as_u64().unwrap() - 1).to_string()
}

async fn drills_idle(s: &Server, w: &World) {
    for _ in 0..600 {
        let runs = admin_get(s, w, "/api/v1/drills?limit=1").await;
        if runs.as_array().and_then(|r| r.first()).is_none_or(|r| r["status"] != "running") {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("a drill run never finished");
}

/// A finished drill run of clinic-a: its clinic admin's latest, or a new
/// one (a clinic admin sees only its own tenant's runs).
async fn drill_run(s: &Server, w: &World) -> String {
    drills_idle(s, w).await;
    let own = &w.tokens[&Who::ClinicOwn];
    let runs: Value =
        w.anonymous.get(s.url("/api/v1/drills?limit=1")).bearer_auth(own).send().await.unwrap().json().await.unwrap();
    if let Some(id) = runs.as_array().and_then(|r| r.first()).and_then(|r| r["run_id"].as_str()) {
        return id.to_owned();
    }
    let res = w.anonymous.post(s.url("/api/v1/drills")).bearer_auth(own).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::ACCEPTED);
    let id = res.json::<Value>().await.unwrap()["run_id"].as_str().unwrap().to_owned();
    drills_idle(s, w).await;
    id
}

/// A JSON GET with the admin's token.
async fn admin_get(s: &Server, w: &World, path: &str) -> Value {
    let res = w.anonymous.get(s.url(path)).bearer_auth(&w.tokens[&Who::Admin]).send().await.unwrap();
    res.json().await.unwrap()
}

/// An OTP request whose notification cannot be relayed, once it is dead.
async fn dead_intent(i: &Install, s: &Server, w: &World) -> String {
    let n = w.counter.fetch_add(1, Ordering::SeqCst);
    deliver(
        i,
        w,
        &format!(r#"{{"type":"otp.requested","data":{{"otp_request_id":"otp-{n}","channel":"sms"}}}}"#),
        &format!("o-{n}"),
    );
    let key = format!("otp:otp-{n}");
    for _ in 0..200 {
        let list = admin_get(s, w, "/api/v1/outbox?tenant=clinic-a&status=dead").await;
        if let Some(item) = list.as_array().unwrap().iter().find(|v| v["idempotency_key"] == key.as_str()) {
            return item["id"].as_str().unwrap().to_owned();
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("intent {key} never went dead");
}

/// A bulk release of clinic-a's open quarantine, started by the admin. With
/// `interrupted`, once its runner is pausing after the first entry, its
/// heartbeat is aged as if the runner's process had died.
async fn bulk_release(i: &Install, s: &Server, w: &World, interrupted: bool) -> String {
    quarantined(i, s, w).await;
    let res = w
        .anonymous
        .post(s.url("/api/v1/quarantine/bulk-releases"))
        .bearer_auth(&w.tokens[&Who::Admin])
        .json(&json!({"filter": {"tenant": "clinic-a"}, "reason": "matrix fixture"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::ACCEPTED);
    let id = res.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();
    if interrupted {
        for _ in 0..200 {
            if admin_get(s, w, &format!("/api/v1/quarantine/bulk-releases/{id}")).await["processed"].as_u64() >= Some(1)
            {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
        let db = domain::db::connect(&i.database_url).await.unwrap();
        db.execute_raw(sea_orm::Statement::from_string(
            db.get_database_backend(),
            // Silent since the epoch, and given up on by the automatic resume
            // (which would otherwise take it over within two seconds and race
            // the call under test): it waits for a person.
            format!(
                "UPDATE bulk_releases SET updated_at = 0, auto_resumes = {} WHERE id = '{id}'",
                domain::quarantine::bulk_release::MAX_AUTO_RESUMES
            ),
        ))
        .await
        .unwrap();
        db.close().await.unwrap();
        assert_eq!(admin_get(s, w, &format!("/api/v1/quarantine/bulk-releases/{id}")).await["status"], "interrupted");
    }
    id
}

/// A reminder update that arrives before its reminder (quarantined), then
/// the reminder itself: the entry is open and a release will apply.
async fn quarantined(i: &Install, s: &Server, w: &World) -> String {
    let n = w.counter.fetch_add(1, Ordering::SeqCst);
    let event_id = format!("q-{n}");
    deliver(i, w, &format!(r#"{{"type":"reminder.scheduled","data":{{"reminder_id":"r-q-{n}"}}}}"#), &event_id);
    deliver(
        i,
        w,
        &format!(
            r#"{{"type":"reminder.created","data":{{"reminder_id":"r-q-{n}","send_at":"2027-01-05T09:00:00Z"}}}}"#
        ),
        &format!("c-{n}"),
    );
    let list = admin_get(s, w, "/api/v1/quarantine?tenant=clinic-a").await;
    let items = list["items"].as_array().unwrap();
    let entry = items
        .iter()
        .find(|q| q["event_id"] == event_id.as_str())
        .unwrap_or_else(|| panic!("{event_id} not quarantined: {list}"));
    entry["id"].as_str().unwrap().to_owned()
}
