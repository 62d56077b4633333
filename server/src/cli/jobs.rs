//! `signet jobs`: every background job at a glance.

use domain::{
    auth::Principal,
    jobs::{self, StaleAfter},
    kek,
    quarantine::bulk_release,
};
use sea_orm::DatabaseConnection;
use views::jobs_overview::JobsView;

use super::output::{CliError, emit};

pub(super) async fn jobs(json: bool, db: &DatabaseConnection, p: &Principal) -> Result<(), CliError> {
    // The CLI runs without the server's settings: the default thresholds.
    let stale = StaleAfter { kek_ms: kek::DEFAULT_STALE_AFTER_MS, bulk_ms: bulk_release::DEFAULT_STALE_AFTER_MS };
    let v = jobs::overview(db, p, &crate::jobs::LEASED, stale).await?;
    emit(json, &v, || human(&v));
    Ok(())
}

fn human(v: &JobsView) -> String {
    let mut lines: Vec<String> = v
        .leases
        .iter()
        .map(|l| match (&l.holder, &l.expires_at) {
            (Some(holder), Some(until)) if l.held => {
                format!("{}\theld by {holder} (epoch {}) until {until}", l.job, l.epoch)
            }
            (Some(holder), _) => format!("{}\tfree (last held by {holder}, epoch {})", l.job, l.epoch),
            _ => format!("{}\tnever taken", l.job),
        })
        .collect();
    if let Some(j) = &v.kek_rewrap {
        lines.push(format!(
            "kek rewrap {}\t{} to v{}: {} of about {} rows resealed",
            j.id, j.status, j.target_version, j.rewrapped, j.total
        ));
    }
    lines.extend(v.bulk_releases.iter().map(|b| {
        format!(
            "bulk release {}\t{}: {} of {} processed ({} released)",
            b.id, b.status, b.processed, b.total, b.released
        )
    }));
    lines.join("\n")
}
