//! What an admin reads: every version with its rows, the retired ones, and
//! rewrap jobs as seen at a moment (a silent runner reads as interrupted).

use std::collections::BTreeMap;

use sea_orm::{DatabaseConnection, EntityTrait, QueryOrder};
use views::{
    jobs::RunStatus,
    kek::{KekOverview, KekVersionView, RetiredView, RewrapView},
};

use super::{
    admin::authorize,
    sources::{SOURCES, counts},
};
use crate::{
    auth::Principal,
    clock,
    entity::{kek_retirement, kek_rewrap as job, kek_version},
    error::{DomainError, DomainResult},
    jobs::{Conflicts, Runs, runs},
};

runs!(
    job,
    Conflicts {
        finished: ("rewrap_finished", "this rewrap has finished"),
        canceled: ("rewrap_canceled", "this rewrap was canceled; start a new one"),
        running: (
            "rewrap_in_progress",
            "a KEK rewrap is running; wait for it or resume it once it reads as interrupted"
        ),
        resumed_elsewhere: "someone else resumed this rewrap",
        another_running: "another KEK rewrap is running",
    }
);

/// The default of `serve --kek-stale-secs` (`SIGNET_KEK_STALE_SECS`): a
/// running rewrap whose runner has not reported for this long reads as
/// interrupted, a person may resume it, and the system resumes it on its
/// own. The server passes its setting to every function that takes
/// `stale_ms`; the CLI, which runs without the server's settings, passes
/// this.
pub const DEFAULT_STALE_AFTER_MS: i64 = 60_000;

/// Whether [`overview`] counts rows: counting reads every sealed table, too
/// much to repeat every second beside a running rewrap, whose own progress
/// says how far it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counting {
    Always,
    NotWhileRewrapping,
}

/// Every version with its rows, the retired ones, and the latest job.
/// The latest job reads as interrupted once its runner has been silent for
/// `stale_ms`.
pub async fn overview(
    db: &DatabaseConnection,
    principal: &Principal,
    counting: Counting,
    stale_ms: i64,
) -> DomainResult<KekOverview> {
    authorize(principal)?;
    let versions = kek_version::Entity::find().order_by_asc(kek_version::Column::Version).all(db).await?;
    let newest = versions.last().map(|v| v.version as u32);
    let latest = job::Entity::find()
        .order_by_desc(job::Column::CreatedAt)
        .one(db)
        .await?
        .map(|j| view(j, clock::now_ms(), stale_ms));
    let counted = counting == Counting::Always || latest.as_ref().is_none_or(|j| j.status != RunStatus::Running);
    let counts = if counted { counts(db).await? } else { BTreeMap::new() };
    let mut stale_rows = 0;
    let views = versions
        .iter()
        .map(|v| {
            let version = v.version as u32;
            let rows: BTreeMap<String, u64> = SOURCES
                .iter()
                .map(|s| (s.name.to_owned(), counts.get(&(s.name.to_owned(), version)).copied().unwrap_or(0)))
                .collect();
            let total_rows = rows.values().sum();
            let is_newest = Some(version) == newest;
            if !is_newest {
                stale_rows += total_rows;
            }
            KekVersionView {
                version,
                created_at: clock::rfc3339(v.created_at),
                newest: is_newest,
                rows,
                total_rows,
                retirable: counted && !is_newest && total_rows == 0,
            }
        })
        .collect();
    let retired = kek_retirement::Entity::find()
        .order_by_asc(kek_retirement::Column::Version)
        .all(db)
        .await?
        .into_iter()
        .map(|r| RetiredView {
            version: r.version as u32,
            created_at: clock::rfc3339(r.created_at),
            retired_at: clock::rfc3339(r.retired_at),
            retired_by: r.retired_by,
        })
        .collect();
    Ok(KekOverview { versions: views, retired, stale_rows, latest_rewrap: latest, counted })
}

/// A job as its runner (or its resumer) has just written it: nothing about
/// it is stale yet.
pub(super) fn written(j: job::Model) -> RewrapView {
    let at = j.updated_at;
    view(j, at, 0)
}

/// The job as seen at `now`, a runner silent for `stale_ms` reading as
/// interrupted.
pub(super) fn view(j: job::Model, now: i64, stale_ms: i64) -> RewrapView {
    let status = job::Entity::run(&j).status_at(now, stale_ms).to_owned();
    RewrapView {
        id: j.id,
        target_version: j.target_version as u32,
        status,
        started_by: j.actor,
        source: j.source,
        total: u64::try_from(j.total).unwrap_or(0),
        scanned: u64::try_from(j.scanned).unwrap_or(0),
        rewrapped: u64::try_from(j.rewrapped).unwrap_or(0),
        error: j.error,
        started_at: clock::rfc3339(j.created_at),
        updated_at: clock::rfc3339(j.updated_at),
        finished_at: clock::rfc3339_opt(j.finished_at),
    }
}

/// The latest rewrap job, as [`overview`] shows it but without counting
/// rows.
pub async fn latest(db: &DatabaseConnection, principal: &Principal, stale_ms: i64) -> DomainResult<Option<RewrapView>> {
    authorize(principal)?;
    let j = job::Entity::find().order_by_desc(job::Column::CreatedAt).one(db).await?;
    Ok(j.map(|j| view(j, clock::now_ms(), stale_ms)))
}

/// One rewrap job, interrupted once its runner has been silent for
/// `stale_ms`.
pub async fn get(db: &DatabaseConnection, principal: &Principal, id: &str, stale_ms: i64) -> DomainResult<RewrapView> {
    authorize(principal)?;
    let j = job::Entity::find_by_id(id.to_owned()).one(db).await?.ok_or(DomainError::NotFound)?;
    Ok(view(j, clock::now_ms(), stale_ms))
}
