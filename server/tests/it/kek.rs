//! The console's `/kek` reads a silent rewrap as interrupted after the
//! server's `SIGNET_KEK_STALE_SECS`, the threshold of the automatic resume,
//! and its Resume follows the same reading; its Cancel stops a rewrap for
//! good, audited with the person who clicked it.

use domain::entity::{audit_entry, kek_rewrap};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, sea_query::Expr};
use serde_json::Value;

use crate::{
    both_engines,
    support::{Install, Server},
};

const PASSWORD: &str = "a long enough password";

async fn latest_status(s: &Server, c: &reqwest::Client) -> String {
    let o: Value = c.get(s.url("/fn/kek_overview")).send().await.unwrap().json().await.unwrap();
    o["latest_rewrap"]["status"].as_str().unwrap_or_default().to_owned()
}

async fn resume(s: &Server, c: &reqwest::Client, id: &str) -> reqwest::StatusCode {
    post(s, c, "/fn/resume_rewrap", id).await
}

async fn post(s: &Server, c: &reqwest::Client, path: &str, id: &str) -> reqwest::StatusCode {
    let res = c.post(s.url(path)).header("Origin", &s.base).form(&[("id", id)]).send().await.unwrap();
    res.status()
}

both_engines!(the_console_reads_a_rewrap_as_interrupted_after_the_configured_silence, async |i: &Install| {
    i.cli_json_stdin(&["user", "create", "root", "--role", "admin"], PASSWORD);
    let job = i.cli_json(&["kek", "rotate"])["rewrap"]["id"].as_str().unwrap().to_owned();
    // The job as a runner that went silent 10 s ago leaves it, the system's
    // automatic resumes used up (so only a person takes it over).
    let db = domain::db::connect(&i.database_url).await.unwrap();
    kek_rewrap::Entity::update_many()
        .col_expr(kek_rewrap::Column::Status, Expr::value(views::jobs::RunStatus::Running))
        .col_expr(kek_rewrap::Column::FinishedAt, Expr::value(Option::<i64>::None))
        .col_expr(kek_rewrap::Column::UpdatedAt, Expr::value(domain::clock::now_ms() - 10_000))
        .col_expr(kek_rewrap::Column::AutoResumes, Expr::value(domain::kek::MAX_AUTO_RESUMES))
        .filter(kek_rewrap::Column::Id.eq(&job))
        .exec(&db)
        .await
        .unwrap();

    // The default (60 s): still running, and Resume is refused.
    let default = i.serve();
    let c = default.logged_in("root", PASSWORD).await;
    assert_eq!(latest_status(&default, &c).await, "running");
    assert!(!resume(&default, &c, &job).await.is_success());
    drop(default);

    // Configured to 5 s: interrupted, and Resume takes it over.
    let short = i.serve_with(&[("SIGNET_KEK_STALE_SECS", "5")]);
    let c = short.logged_in("root", PASSWORD).await;
    assert_eq!(latest_status(&short, &c).await, "interrupted");
    let resumed = resume(&short, &c, &job).await;
    assert!(resumed.is_success() || resumed.is_redirection(), "{resumed}");
    let row = kek_rewrap::Entity::find_by_id(job.clone()).one(&db).await.unwrap().unwrap();
    assert_eq!(row.auto_resumes, 0, "a person's resume starts the automatic budget again");
});

both_engines!(the_consoles_cancel_stops_a_stopped_rewrap_for_good, async |i: &Install| {
    i.cli_json_stdin(&["user", "create", "root", "--role", "admin"], PASSWORD);
    let job = i.cli_json(&["kek", "rotate"])["rewrap"]["id"].as_str().unwrap().to_owned();
    // A rewrap stopped by an error, the automatic resumes used up.
    let db = domain::db::connect(&i.database_url).await.unwrap();
    kek_rewrap::Entity::update_many()
        .col_expr(kek_rewrap::Column::Status, Expr::value(views::jobs::RunStatus::Failed))
        .col_expr(kek_rewrap::Column::FinishedAt, Expr::value(Option::<i64>::None))
        .col_expr(kek_rewrap::Column::AutoResumes, Expr::value(domain::kek::MAX_AUTO_RESUMES))
        .filter(kek_rewrap::Column::Id.eq(&job))
        .exec(&db)
        .await
        .unwrap();
    let s = i.serve();
    let c = s.logged_in("root", PASSWORD).await;

    // Cancel beside Resume while it is stopped.
    let stopped = c.get(s.url("/kek")).send().await.unwrap().text().await.unwrap();
    assert!(
        stopped.contains(">Resume<") && stopped.contains("button danger") && stopped.contains(">Cancel<"),
        "{stopped}"
    );
    let canceled = post(&s, &c, "/fn/cancel_rewrap", &job).await;
    assert!(canceled.is_success() || canceled.is_redirection(), "{canceled}");
    assert_eq!(latest_status(&s, &c).await, "canceled");
    let ended = c.get(s.url("/kek")).send().await.unwrap().text().await.unwrap();
    assert!(ended.contains("Canceled after") && !ended.contains(">Cancel<") && !ended.contains(">Resume<"), "{ended}");
    // Neither Resume nor a second Cancel takes it up again.
    assert!(!resume(&s, &c, &job).await.is_success());
    assert!(!post(&s, &c, "/fn/cancel_rewrap", &job).await.is_success());

    let audit =
        audit_entry::Entity::find().filter(audit_entry::Column::Action.eq("kek.rewrap.cancel")).all(&db).await.unwrap();
    let actors: Vec<&str> = audit.iter().map(|e| e.actor.as_str()).collect();
    assert_eq!(actors, ["root"], "audited once, with the person who clicked");
});
