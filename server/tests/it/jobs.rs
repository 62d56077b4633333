//! Cancel and the one status view through the real binary: a bulk release
//! canceled over `/api/v1` stops at its next entry and leaves the rest in
//! quarantine; `GET /api/v1/jobs` and `signet jobs` list the leases and the
//! runs; `signet kek cancel` stops a rewrap, and the next one starts anew.

use std::time::Duration;

use domain::entity::kek_rewrap;
use reqwest::StatusCode;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, sea_query::Expr};
use serde_json::{Value, json};

use crate::{
    both_engines,
    support::{Install, Server},
};

const EVENTS: u64 = 8;
const PASSWORD: &str = "a long enough password";

async fn call(s: &Server, token: &str, method: reqwest::Method, path: &str) -> (StatusCode, Value) {
    let res = s.client().request(method, s.url(path)).bearer_auth(token).send().await.unwrap();
    let status = res.status();
    (status, res.json().await.unwrap_or(Value::Null))
}

async fn get(s: &Server, token: &str, path: &str) -> Value {
    let (status, body) = call(s, token, reqwest::Method::GET, path).await;
    assert_eq!(status, StatusCode::OK, "{path}: {body}");
    body
}

fn token(i: &Install, role: &str) -> String {
    i.cli_json(&["token", "create", "--name", role, "--role", role])["token"].as_str().unwrap().to_owned()
}

both_engines!(a_canceled_bulk_release_stops_and_the_status_view_shows_it, async |i: &Install| {
    i.cli_json(&["tenant", "create", "clinic-a"]);
    i.cli_json(&["endpoint", "create", "clinic-a", "hooks", "--scheme", "standard-webhooks"]);
    let key = i.cli_json(&["key", "provision", "clinic-a", "hooks", "--approve-as", "rita"]);
    let secret = key["secret"].as_str().unwrap().to_owned();
    let (oncall, reviewer, admin) = (token(i, "oncall"), token(i, "reviewer"), token(i, "admin"));
    // The automatic resume looks every 2 s, and would take a silent job
    // after 2 s: a canceled one it must leave alone.
    let s = i.serve_with(&[("SIGNET_BULK_STALE_SECS", "2"), ("SIGNET_FAULTS", "stall_bulk_entry_ms=500")]);
    i.send_releasable(&s.url("/hooks/clinic-a/hooks"), &secret, EVENTS);
    i.cli_json_stdin(&["user", "create", "olive", "--role", "oncall"], PASSWORD);
    let console = s.logged_in("olive", PASSWORD).await;
    let res = s
        .client()
        .post(s.url("/api/v1/quarantine/bulk-releases"))
        .bearer_auth(&oncall)
        .json(&json!({"filter": {"tenant": "clinic-a", "reason": "reminder_not_found"}, "reason": "backfill"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::ACCEPTED);
    let id = res.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();
    let job = format!("/api/v1/quarantine/bulk-releases/{id}");
    for _ in 0..600 {
        if get(&s, &oncall, &job).await["processed"].as_u64() >= Some(2) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }

    // The console offers Cancel while it runs.
    let page = format!("/quarantine/bulk/{id}");
    let running = console.get(s.url(&page)).send().await.unwrap().text().await.unwrap();
    assert!(running.contains("button danger") && running.contains(">Cancel"), "{running}");

    let cancel = format!("{job}/cancel");
    let (status, _) = call(&s, &reviewer, reqwest::Method::POST, &cancel).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "a reviewer may not triage");
    let (status, canceled) = call(&s, &oncall, reqwest::Method::POST, &cancel).await;
    assert_eq!(status, StatusCode::OK, "{canceled}");
    assert_eq!(canceled["status"], "canceled");
    let done = canceled["processed"].as_u64().unwrap();
    assert!((2..EVENTS).contains(&done), "canceled midway: {canceled}");

    // Past several more entries' pace and the automatic resume's threshold.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let later = get(&s, &oncall, &job).await;
    assert_eq!((later["status"].as_str(), later["processed"].as_u64()), (Some("canceled"), Some(done)));
    let open = get(&s, &oncall, "/api/v1/quarantine?tenant=clinic-a&status=open").await;
    assert_eq!(open["total"].as_u64(), Some(EVENTS - done), "the rest stay in quarantine");
    let (status, body) = call(&s, &oncall, reqwest::Method::POST, &format!("{job}/resume")).await;
    assert_eq!((status, body["error"].as_str()), (StatusCode::CONFLICT, Some("bulk_release_canceled")));
    let (status, body) = call(&s, &oncall, reqwest::Method::POST, &cancel).await;
    assert_eq!((status, body["error"].as_str()), (StatusCode::CONFLICT, Some("bulk_release_canceled")));
    let ended = console.get(s.url(&page)).send().await.unwrap().text().await.unwrap();
    assert!(ended.contains("Canceled after") && !ended.contains("button danger"), "{ended}");
    let audit = get(&s, &admin, "/api/v1/audit?action=quarantine.bulk_release.cancel").await;
    assert_eq!(audit.as_array().map(Vec::len), Some(1), "{audit}");

    // The status view: every leased job (this process holds them), the runs.
    let view = get(&s, &oncall, "/api/v1/jobs").await;
    let leases = view["leases"].as_array().unwrap();
    let names: Vec<&str> = leases.iter().filter_map(|l| l["job"].as_str()).collect();
    for name in ["outbox_relay", "gauge_samples", "maintenance", "job_resume"] {
        let lease = leases.iter().find(|l| l["job"] == name).unwrap_or_else(|| panic!("{name} in {names:?}"));
        assert_eq!(lease["held"], true, "{lease}");
        assert!(lease["holder"].is_string() && lease["epoch"].as_u64() >= Some(1), "{lease}");
    }
    assert_eq!(view["bulk_releases"][0]["id"], id.as_str());
    assert_eq!(view["bulk_releases"][0]["status"], "canceled");
    assert!(view["kek_rewrap"].is_null(), "on-call does not see the KEK's rewrap");
    let clinic = i.cli_json(&["token", "create", "--name", "clinic", "--role", "clinic-admin", "--tenant", "clinic-a"]);
    let (status, _) = call(&s, clinic["token"].as_str().unwrap(), reqwest::Method::GET, "/api/v1/jobs").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "a clinic admin is bound to one tenant");

    // `signet jobs` shows the same, the latest rewrap too.
    i.cli_json(&["kek", "rotate"]);
    let cli = i.cli_json(&["jobs"]);
    assert_eq!(cli["leases"].as_array().map(Vec::len), Some(leases.len()));
    assert_eq!(cli["bulk_releases"][0]["status"], "canceled");
    assert_eq!(cli["kek_rewrap"]["status"], "finished");
    assert_eq!(get(&s, &admin, "/api/v1/jobs").await["kek_rewrap"]["status"], "finished");
});

both_engines!(signet_kek_cancel_stops_a_rewrap_and_the_next_starts_anew, async |i: &Install| {
    let first = i.cli_json(&["kek", "rotate"])["rewrap"]["id"].as_str().unwrap().to_owned();
    let finished = i.cli(&["--json", "kek", "cancel"], "");
    assert!(!finished.status.success());
    let e: Value = serde_json::from_slice(finished.stderr.trim_ascii()).unwrap();
    assert_eq!(e["error"], "rewrap_finished");

    // A rewrap whose process died midway.
    let db = domain::db::connect(&i.database_url).await.unwrap();
    kek_rewrap::Entity::update_many()
        .col_expr(kek_rewrap::Column::Status, Expr::value(views::jobs::RunStatus::Running))
        .col_expr(kek_rewrap::Column::FinishedAt, Expr::value(Option::<i64>::None))
        .col_expr(kek_rewrap::Column::Source, Expr::value("outbox_payloads"))
        .filter(kek_rewrap::Column::Id.eq(&first))
        .exec(&db)
        .await
        .unwrap();
    let canceled = i.cli_json(&["kek", "cancel"]);
    assert_eq!((canceled["id"].as_str(), canceled["status"].as_str()), (Some(first.as_str()), Some("canceled")));
    let status = i.cli_json(&["kek", "status"]);
    assert_eq!(status["latest_rewrap"]["status"], "canceled");
    // `kek rewrap` does not take a canceled job up again: it starts anew.
    let next = i.cli_json(&["kek", "rewrap"]);
    assert_ne!(next["id"].as_str(), Some(first.as_str()));
    assert_eq!(next["status"], "finished");
    let row = kek_rewrap::Entity::find_by_id(first).one(&db).await.unwrap().unwrap();
    assert_eq!(row.status.as_str(), "canceled");
});
