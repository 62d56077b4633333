//! The console's `/kek` reads a silent rewrap as interrupted after the
//! server's `SIGNET_KEK_STALE_SECS`, the threshold of the automatic resume,
//! and its Resume follows the same reading.

use domain::entity::kek_rewrap;
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
    let res = c.post(s.url("/fn/resume_rewrap")).header("Origin", &s.base).form(&[("id", id)]).send().await.unwrap();
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
