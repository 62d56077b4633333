//! `signet kek`: rotate, rewrap, status, cancel and retire.

use domain::auth::Principal;
use sea_orm::DatabaseConnection;

use super::{
    KekCmd,
    open::open_vault,
    output::{CliError, emit},
};
use crate::config::DbArgs;
use views::jobs::RunStatus;

/// Progress of a rewrap, on stderr (at most every half second).
fn rewrap_progress() -> impl FnMut(&views::kek::RewrapView) {
    let mut last = std::time::Instant::now();
    move |v| {
        if last.elapsed() >= std::time::Duration::from_millis(500) || !v.is_running() {
            last = std::time::Instant::now();
            eprintln!(
                "{}: {} of about {} rows resealed under v{} ({} read)",
                v.source, v.rewrapped, v.total, v.target_version, v.scanned
            );
        }
    }
}

pub(super) async fn kek(
    json: bool,
    args: &DbArgs,
    db: &DatabaseConnection,
    p: &Principal,
    cmd: KekCmd,
) -> Result<(), CliError> {
    use domain::kek;
    match cmd {
        KekCmd::Rotate => {
            let vault = open_vault(args, db).await?;
            let rotation = kek::rotate(db, &vault, p, kek::DEFAULT_STALE_AFTER_MS).await?;
            let done = kek::run(db, &vault, &rotation.rewrap.id, rewrap_progress()).await?;
            let report = serde_json::json!({
                "kek_version": rotation.kek_version,
                "added_version": rotation.added_version,
                "rewrap": done,
            });
            emit(json, &report, || {
                format!(
                    "{} KEK version {}; resealed {} of {} rows read",
                    if rotation.added_version { "added" } else { "resumed the rewrap to" },
                    rotation.kek_version,
                    done.rewrapped,
                    done.scanned
                )
            });
        }
        KekCmd::Rewrap => {
            let vault = open_vault(args, db).await?;
            let job = kek::start_rewrap(db, &vault, p, kek::DEFAULT_STALE_AFTER_MS).await?;
            let done = kek::run(db, &vault, &job.id, rewrap_progress()).await?;
            emit(json, &done, || {
                format!(
                    "{}resealed {} rows under KEK version {} ({} read)",
                    if done.status == RunStatus::Canceled { "canceled; " } else { "" },
                    done.rewrapped,
                    done.target_version,
                    done.scanned
                )
            });
        }
        KekCmd::Status => {
            let o = kek::overview(db, p, kek::Counting::Always, kek::DEFAULT_STALE_AFTER_MS).await?;
            emit(json, &o, || {
                let mut lines: Vec<String> = o
                    .versions
                    .iter()
                    .map(|v| {
                        let rows: Vec<String> = v.rows.iter().map(|(k, n)| format!("{k} {n}")).collect();
                        format!(
                            "v{}{}\t{}\t{}",
                            v.version,
                            if v.newest { " (newest)" } else { "" },
                            v.created_at,
                            rows.join(", ")
                        )
                    })
                    .collect();
                lines.extend(
                    o.retired.iter().map(|r| format!("v{} retired {} by {}", r.version, r.retired_at, r.retired_by)),
                );
                if let Some(j) = &o.latest_rewrap {
                    lines.push(format!("latest rewrap: {} ({} resealed, {} read)", j.status, j.rewrapped, j.scanned));
                }
                lines.join("\n")
            });
        }
        KekCmd::Cancel => {
            let j = kek::cancel(db, p, kek::DEFAULT_STALE_AFTER_MS).await?;
            emit(json, &j, || {
                format!(
                    "canceled the rewrap to KEK version {} ({} of about {} rows resealed, {} read)",
                    j.target_version, j.rewrapped, j.total, j.scanned
                )
            });
        }
        KekCmd::Retire { version } => {
            let vault = open_vault(args, db).await?;
            let r = kek::retire(db, &vault, p, version).await?;
            emit(json, &r, || format!("retired KEK version {}", r.version));
        }
    }
    Ok(())
}
