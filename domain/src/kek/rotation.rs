//! Adding a KEK version, and starting, resuming, taking over or canceling
//! the rewrap job that reseals every sealed column under the newest.

use sea_orm::{DatabaseConnection, EntityTrait, QueryOrder, Set};
use serde::Serialize;
use serde_json::json;
use views::{jobs::RunStatus, kek::RewrapView};

use super::{
    admin::{authorize, kek_change, open_err},
    sources::{SOURCES, counts},
    status::written,
};
use crate::{
    audit,
    auth::{Authorized, Principal},
    clock,
    crypto::CryptoError,
    db,
    entity::{kek_rewrap as job, kek_version},
    error::{DomainError, DomainResult},
    ids,
    jobs::{self, Resumer, Runs},
    vault::Vault,
};

/// What [`rotate`] did: the job that reseals everything, and whether a
/// version was added for it.
#[derive(Debug, Clone, Serialize)]
pub struct Rotation {
    pub kek_version: u32,
    /// `false`: rows were still under older versions (an interrupted or
    /// failed rewrap), so this resumed sealing them under the newest instead
    /// of adding yet another version.
    pub added_version: bool,
    pub rewrap: RewrapView,
}

/// Adds a KEK version (unless rows still wait under older ones) and starts
/// the rewrap of every sealed column under the newest, or resumes the
/// unfinished one if it has failed or been silent for `stale_ms`. The caller
/// runs the job ([`run`](crate::kek::run) in the foreground, [`spawn`](crate::kek::spawn) in the
/// background).
pub async fn rotate(
    db: &DatabaseConnection,
    vault: &Vault,
    principal: &Principal,
    stale_ms: i64,
) -> DomainResult<Rotation> {
    let auth = authorize(principal)?;
    vault.refresh(db).await.map_err(open_err)?;
    if let Some(j) = unfinished(db).await? {
        return resume_job(db, j, stale_ms, Resumer::Person(&auth)).await.map(|rewrap| Rotation {
            kek_version: rewrap.target_version,
            added_version: false,
            rewrap,
        });
    }
    let newest = vault.ring().newest_version().ok_or(CryptoError::EmptyKeyring)?;
    let stale: u64 = counts(db).await?.iter().filter(|((_, v), _)| *v != newest).map(|(_, n)| n).sum();
    let added_version = stale == 0;
    let target = if added_version {
        let next = newest + 1;
        let wrapped = vault.wrap_new_kek(next)?;
        let txn = db::begin_write(db).await?;
        kek_version::Entity::insert(kek_version::ActiveModel {
            version: Set(next as i32),
            wrapped_key: Set(wrapped),
            created_at: Set(clock::now_ms()),
            ..Default::default()
        })
        .exec(&txn)
        .await
        .map_err(db::conflict_if_unique(
            "rotation_in_progress",
            "another KEK rotation added a version at the same time; run it again",
        ))?;
        let version = next.to_string();
        let change =
            kek_change("kek.rotate", &version, Some(json!({"kek_version": newest})), json!({"kek_version": next}));
        audit::record(&txn, auth.actor(), change).await?;
        txn.commit().await?;
        vault.refresh(db).await.map_err(open_err)?;
        next
    } else {
        newest
    };
    let rewrap = create_job(db, &auth, target).await?;
    Ok(Rotation { kek_version: target, added_version, rewrap })
}

/// Starts a rewrap of everything under the newest version (or resumes the
/// one that failed or has been silent for `stale_ms`).
pub async fn start_rewrap(
    db: &DatabaseConnection,
    vault: &Vault,
    principal: &Principal,
    stale_ms: i64,
) -> DomainResult<RewrapView> {
    let auth = authorize(principal)?;
    vault.refresh(db).await.map_err(open_err)?;
    if let Some(j) = unfinished(db).await? {
        return resume_job(db, j, stale_ms, Resumer::Person(&auth)).await;
    }
    let newest = vault.ring().newest_version().ok_or(CryptoError::EmptyKeyring)?;
    create_job(db, &auth, newest).await
}

/// Resumes a failed job, or one whose runner has been silent for
/// `stale_ms` (a compare-and-set on its heartbeat: of two resumers, one
/// wins).
pub async fn resume(
    db: &DatabaseConnection,
    principal: &Principal,
    id: &str,
    stale_ms: i64,
) -> DomainResult<RewrapView> {
    let (auth, j) = named_job(db, principal, id).await?;
    resume_job(db, j, stale_ms, Resumer::Person(&auth)).await
}

/// The rewrap `id` names, for an administrator: the page's Resume and
/// Cancel act on the run they showed, never on a newer one.
async fn named_job(db: &DatabaseConnection, principal: &Principal, id: &str) -> DomainResult<(Authorized, job::Model)> {
    let auth = authorize(principal)?;
    let j = job::Entity::find_by_id(id.to_owned()).one(db).await?.ok_or(DomainError::NotFound)?;
    Ok((auth, j))
}

/// The system's automatic resume (run by one process at a time, under the
/// `job_resume` lease): takes the latest job over if its runner has been
/// silent for `stale_ms` (a `running` job whose process died, or a `failed`
/// one, which so waits as long before it is tried again) and the system has
/// resumed it fewer than [`MAX_AUTO_RESUMES`](crate::jobs::MAX_AUTO_RESUMES) times in a row. The take-over
/// is the one a person's Resume makes (of two resumers, one wins; a runner
/// that was only slow stops at its next window), audited as
/// `kek.rewrap.resume` by `system` with `"automatic": true`, the previous
/// runner and `process` (the resuming process). `None`: nothing to resume,
/// or another resumer won. The caller runs the job ([`spawn`](crate::kek::spawn)).
pub async fn resume_stale(
    db: &DatabaseConnection,
    vault: &Vault,
    stale_ms: i64,
    process: &str,
) -> DomainResult<Option<RewrapView>> {
    let Some(j) = unfinished(db).await? else { return Ok(None) };
    if !job::Entity::run(&j).auto_resumable(clock::now_ms(), stale_ms) {
        return Ok(None);
    }
    // A rewrap is an admin's job; resuming it is the system's own action.
    authorize(&Principal::system())?;
    // Seal under the newest version even if another process added it since
    // this one's last ring refresh.
    vault.refresh(db).await.map_err(open_err)?;
    match resume_job(db, j, stale_ms, Resumer::System { process }).await {
        Ok(v) => Ok(Some(v)),
        Err(DomainError::Conflict { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The latest job if it has not ended: running (perhaps stale) or failed.
/// A canceled one is never taken up again: the next rewrap is a new job.
async fn unfinished(db: &DatabaseConnection) -> DomainResult<Option<job::Model>> {
    let latest = job::Entity::find().order_by_desc(job::Column::CreatedAt).one(db).await?;
    Ok(latest.filter(|j| !matches!(j.status, RunStatus::Finished | RunStatus::Canceled)))
}

/// Cancels the latest rewrap (running, interrupted or failed) for good, as
/// an admin: its runner stops at its next window, rolling that window back;
/// the rows it resealed stay resealed, so a version they left may still be
/// in use by the others (and cannot be retired until a new rewrap is done).
/// A conflict when it has finished or was canceled; not found when no
/// rewrap ever ran.
pub async fn cancel(db: &DatabaseConnection, principal: &Principal, stale_ms: i64) -> DomainResult<RewrapView> {
    let auth = authorize(principal)?;
    let j = job::Entity::find().order_by_desc(job::Column::CreatedAt).one(db).await?.ok_or(DomainError::NotFound)?;
    cancel_job(db, &auth, j, stale_ms).await
}

/// Cancels the rewrap `id` as [`cancel`] does the latest: the one a page
/// showed, so a click never stops a newer rewrap its page had not shown.
pub async fn cancel_by_id(
    db: &DatabaseConnection,
    principal: &Principal,
    id: &str,
    stale_ms: i64,
) -> DomainResult<RewrapView> {
    let (auth, j) = named_job(db, principal, id).await?;
    cancel_job(db, &auth, j, stale_ms).await
}

/// Cancels `j`, audited as `kek.rewrap.cancel` by `auth`'s actor.
async fn cancel_job(
    db: &DatabaseConnection,
    auth: &Authorized,
    j: job::Model,
    stale_ms: i64,
) -> DomainResult<RewrapView> {
    let run = job::Entity::run(&j);
    let version = j.target_version.to_string();
    let after = json!({
        "job": j.id,
        "previous_status": run.status_at(clock::now_ms(), stale_ms),
        "source": j.source,
        "scanned": j.scanned,
        "rewrapped": j.rewrapped,
    });
    jobs::cancel::<job::Entity>(db, &run, auth.actor(), kek_change("kek.rewrap.cancel", &version, None, after)).await?;
    let j = job::Entity::find_by_id(j.id).one(db).await?.ok_or(DomainError::NotFound)?;
    Ok(written(j))
}

/// Takes `j` over if it failed or its runner has been silent for `stale_ms`.
async fn resume_job(
    db: &DatabaseConnection,
    j: job::Model,
    stale_ms: i64,
    by: Resumer<'_>,
) -> DomainResult<RewrapView> {
    let run = job::Entity::run(&j);
    jobs::check_resumable::<job::Entity>(&run, clock::now_ms(), stale_ms)?;
    let version = j.target_version.to_string();
    let after = json!({"job": j.id, "source": j.source, "scanned": j.scanned});
    jobs::take_over::<job::Entity>(db, &run, by, |u| u, kek_change("kek.rewrap.resume", &version, None, after)).await?;
    let j = job::Entity::find_by_id(j.id).one(db).await?.ok_or(DomainError::NotFound)?;
    Ok(written(j))
}

async fn create_job(db: &DatabaseConnection, auth: &Authorized, target: u32) -> DomainResult<RewrapView> {
    let total: u64 = counts(db).await?.iter().filter(|((_, v), _)| *v != target).map(|(_, n)| n).sum();
    let now = clock::now_ms();
    let id = ids::new_id();
    let txn = db::begin_write(db).await?;
    job::Entity::insert(job::ActiveModel {
        id: Set(id.clone()),
        target_version: Set(target as i32),
        status: Set(RunStatus::Running),
        runner: Set(ids::new_id()),
        actor: Set(auth.actor().name().to_owned()),
        source: Set(SOURCES[0].name.to_owned()),
        cursor: Set(None),
        total: Set(total as i64),
        scanned: Set(0),
        rewrapped: Set(0),
        error: Set(None),
        created_at: Set(now),
        updated_at: Set(now),
        finished_at: Set(None),
        auto_resumes: Set(0),
    })
    .exec_without_returning(&txn)
    .await
    .map_err(db::conflict_if_unique("rewrap_in_progress", "a KEK rewrap is already running"))?;
    let version = target.to_string();
    audit::record(
        &txn,
        auth.actor(),
        kek_change("kek.rewrap.start", &version, None, json!({"job": id, "rows_to_rewrap": total})),
    )
    .await?;
    txn.commit().await?;
    let j = job::Entity::find_by_id(id).one(db).await?.ok_or(DomainError::NotFound)?;
    Ok(written(j))
}
