//! Bulk release of quarantined events, in the background with progress.
//!
//! [`start`] snapshots the open entries matching a filter (the oldest
//! [`MAX_ENTRIES`]) into a job, so its "N of M" counts against the M the
//! preview showed. A runner ([`spawn`], or [`step`] in tests) releases them
//! one at a time through [`quarantine::release`], so each entry keeps its
//! exactly-once guarantee and its own audit record, and bumps the job's
//! counters after each one: the page polls those. An entry's outcome is
//! recorded only while it is still pending, so two runners never count one
//! twice.
//!
//! A runner that dies (the process is killed) leaves the job `running` with
//! a stale heartbeat; it then reads as `interrupted` and anyone allowed to
//! triage can [`resume`] it. The system resumes it too ([`resume_stale`]), a
//! bounded number of times, under the job's authority re-read: the rights
//! of whoever started it (or last resumed it by hand) as they are now,
//! never more. A person may [`cancel`] it instead: it stops for good.

use std::{collections::HashMap, sync::Arc, time::Duration};

use sea_orm::{
    ColumnTrait, Condition, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, QuerySelect, Set, sea_query::Expr,
};
use serde_json::json;

use super::{
    Filter,
    bulk_item::{Mark, STOPPED, record_in},
    scope_condition, with_reason,
};
use crate::{
    audit::{self, Change},
    auth::{self, Actor, Authorized, Principal, Scope},
    clock, db,
    entity::{bulk_release as job, bulk_release_item as item, quarantine_entry as entry},
    error::{DomainError, DomainResult},
    ids,
    jobs::{self, Conflicts, Resumer, Runs, runs},
    quarantine,
    receiver::faults::Faults,
    registry::tenants,
    text::require_reason,
    vault::Vault,
};
use views::{
    jobs::RunStatus,
    quarantine::{BulkFailure, BulkItemOutcome, BulkReleaseView, QuarantineFilter, QuarantineStatus},
    roles::Permission,
};

/// At most this many entries in one bulk release.
pub const MAX_ENTRIES: u64 = 10_000;
/// By default, a running job whose runner has not reported for this long
/// reads as interrupted (`signet serve --bulk-stale-secs`).
pub const DEFAULT_STALE_AFTER_MS: i64 = 60_000;
/// Stale jobs looked at per automatic resume round.
const STALE_BATCH: u64 = 20;
/// Entries fetched per round by the runner.
const ROUND: u64 = 50;
/// Still-failing entries listed in a job's view.
const FAILURES_SHOWN: u64 = 100;

pub use crate::jobs::MAX_AUTO_RESUMES;

runs!(
    job,
    Conflicts {
        finished: ("bulk_release_finished", "this bulk release has finished"),
        canceled: ("bulk_release_canceled", "this bulk release was canceled; start a new one"),
        running: ("bulk_release_running", "this bulk release is still running"),
        resumed_elsewhere: "someone else resumed this bulk release",
        another_running: "another bulk release is running",
    }
);

/// Snapshots the open entries matching `f` and records the job; nothing is
/// released until a runner picks it up ([`spawn`]).
pub async fn start(
    db: &DatabaseConnection,
    principal: &Principal,
    filter: &Filter,
    reason: &str,
) -> DomainResult<BulkReleaseView> {
    let reason = require_reason(reason)?;
    // Authorize the triage itself before looking: an empty match must not
    // make a caller without the right look successful.
    let (auth, tenant_id) = match &filter.tenant {
        Some(slug) => {
            let t = tenants::find(db, principal, slug).await?;
            (principal.authorize(Permission::TriageEvents, Scope::Tenant(&t.id))?, Some(t.id))
        }
        None => (principal.authorize(Permission::TriageEvents, Scope::Global)?, None),
    };
    let given =
        QuarantineFilter { status: Some(QuarantineStatus::Open.as_str().into()), limit: None, ..filter.given.clone() };
    let f = Filter { tenant: filter.tenant.clone(), given };
    let cond = with_reason(scope_condition(db, principal, &f).await?, &f.given);
    let entries: Vec<String> = entry::Entity::find()
        .select_only()
        .column(entry::Column::Id)
        .filter(cond)
        .order_by_asc(entry::Column::CreatedAt)
        .order_by_asc(entry::Column::Id)
        .limit(MAX_ENTRIES)
        .into_tuple()
        .all(db)
        .await?;
    if entries.is_empty() {
        return Err(DomainError::conflict("nothing_to_release", "no open events match these filters"));
    }
    let id = ids::new_id();
    let now = clock::now_ms();
    let txn = db::begin_write(db).await?;
    job::Entity::insert(job::ActiveModel {
        id: Set(id.clone()),
        tenant_id: Set(tenant_id.clone()),
        filter: Set(serde_json::to_string(&f.given).expect("a filter serializes")),
        reason: Set(reason.clone()),
        actor: Set(auth.actor().name().to_owned()),
        status: Set(RunStatus::Running),
        runner: Set(ids::new_id()),
        total: Set(entries.len() as i64),
        processed: Set(0),
        released: Set(0),
        still_failing: Set(0),
        already_resolved: Set(0),
        error: Set(None),
        created_at: Set(now),
        updated_at: Set(now),
        finished_at: Set(None),
        auto_resumes: Set(0),
        authority: Set(Some(authority_json(auth.actor()))),
    })
    .exec_without_returning(&txn)
    .await?;
    for (chunk_no, chunk) in entries.chunks(500).enumerate() {
        let rows = chunk.iter().enumerate().map(|(i, entry_id)| item::ActiveModel {
            job_id: Set(id.clone()),
            position: Set((chunk_no * 500 + i) as i32),
            entry_id: Set(entry_id.clone()),
            outcome: Set(None),
            error: Set(None),
        });
        item::Entity::insert_many(rows).exec_without_returning(&txn).await?;
    }
    let after = json!({"filter": f.given, "total": entries.len(), "reason": reason});
    audit::record(&txn, auth.actor(), job_change("quarantine.bulk_release.start", &id, tenant_id.as_deref(), after))
        .await?;
    txn.commit().await?;
    get(db, principal, &id, DEFAULT_STALE_AFTER_MS).await
}

/// Runs the job to the end on a tokio task, as the job's current runner
/// (set by [`start`] or [`resume`]). A failure is recorded on the job
/// (status `failed`, resumable) for the page to show.
/// `faults` (tests only) may pause after each entry.
pub fn spawn(db: DatabaseConnection, vault: Arc<Vault>, principal: Principal, job_id: String, faults: &Faults) {
    let stall = faults.stall_bulk_entry;
    tokio::spawn(async move {
        let runner = match job::Entity::find_by_id(job_id.clone()).one(&db).await {
            Ok(Some(j)) => j.runner,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(job = %job_id, error = %e, "bulk release did not start; it will read as interrupted");
                return;
            }
        };
        if let Err(e) = run(&db, &vault, &principal, &job_id, &runner, stall).await {
            tracing::warn!(job = %job_id, error = %e, "bulk release stopped");
            if let Err(e) = jobs::fail::<job::Entity>(&db, &job_id, &runner, &e).await {
                tracing::warn!(job = %job_id, error = %e, "could not record the bulk release failure");
            }
        }
    });
}

/// Processes every pending entry, then marks the job finished. Stops quietly
/// once another runner has taken the job over. `stall` is a test fault
/// point (a pause after each entry).
async fn run(
    db: &DatabaseConnection,
    vault: &Vault,
    principal: &Principal,
    job_id: &str,
    runner: &str,
    stall: Option<Duration>,
) -> DomainResult<()> {
    loop {
        let j = job::Entity::find_by_id(job_id.to_owned()).one(db).await?.ok_or(DomainError::NotFound)?;
        if !job::Entity::run(&j).runs_as(runner) {
            return Ok(());
        }
        // Each round acts with the starter's rights as they are now.
        let principal = &auth::current(db, principal).await?;
        if step_with(db, vault, principal, &j, ROUND, stall).await? == 0 {
            break;
        }
    }
    finish_as(db, principal, job_id, Some(runner)).await
}

/// Releases up to `max` pending entries of the job, recording each outcome
/// as it goes; returns how many it processed (0: none pending, or the job
/// no longer runs as it did when the round began). [`spawn`] repeats this;
/// tests call it to stop a job midway.
pub async fn step(
    db: &DatabaseConnection,
    vault: &Vault,
    principal: &Principal,
    job_id: &str,
    max: u64,
) -> DomainResult<u64> {
    let j = job::Entity::find_by_id(job_id.to_owned()).one(db).await?.ok_or(DomainError::NotFound)?;
    step_with(db, vault, principal, &j, max, None).await
}

/// Attempts at one entry when the database reports a passing failure
/// (busy, serialization, deadlock, connection) before the job stops.
const TRANSIENT_ATTEMPTS: u32 = 3;

async fn step_with(
    db: &DatabaseConnection,
    vault: &Vault,
    principal: &Principal,
    j: &job::Model,
    max: u64,
    stall: Option<Duration>,
) -> DomainResult<u64> {
    let pending = item::Entity::find()
        .filter(item::Column::JobId.eq(&j.id))
        .filter(item::Column::Outcome.is_null())
        .order_by_asc(item::Column::Position)
        .limit(max)
        .all(db)
        .await?;
    for it in &pending {
        // Canceled or taken over since the round began: not one more entry.
        if !still_runs(db, j).await? {
            return Ok(0);
        }
        let mark = Mark { item: it, runner: &j.runner };
        let mut attempt = 1;
        let outcome = loop {
            match quarantine::release_marking(db, vault, principal, &it.entry_id, &j.reason, Some(&mark)).await {
                // Recorded in the release's own transaction.
                Ok(()) => break None,
                // Stopped between the check and the commit: rolled back.
                Err(DomainError::Conflict { code: STOPPED, .. }) => return Ok(0),
                Err(DomainError::Conflict { code: "already_resolved", .. }) => {
                    break Some((BulkItemOutcome::AlreadyResolved, None));
                }
                Err(DomainError::Db(e)) if db::is_transient(&e) => {
                    if attempt >= TRANSIENT_ATTEMPTS {
                        return Err(e.into());
                    }
                    tokio::time::sleep(Duration::from_millis(200 * u64::from(attempt))).await;
                    attempt += 1;
                }
                // Still cannot apply, its claim or body is gone or will not
                // decrypt, or the entry is no longer visible: it stays open,
                // listed with the reason, and the job goes on.
                Err(e) => {
                    if matches!(e, DomainError::Db(_) | DomainError::Crypto(_)) {
                        tracing::warn!(job = %j.id, entry = %it.entry_id, error = %e, "bulk release: entry failed");
                    }
                    break Some((BulkItemOutcome::StillFailing, Some(e.public_message())));
                }
            }
        };
        if let Some((outcome, error)) = outcome {
            let txn = db::begin_write(db).await?;
            match record_in(&txn, &mark, outcome, error).await {
                Err(DomainError::Conflict { code: STOPPED, .. }) => return Ok(0),
                recorded => recorded?,
            }
            txn.commit().await?;
        }
        if let Some(pause) = stall {
            tokio::time::sleep(pause).await;
        }
    }
    Ok(pending.len() as u64)
}

/// Whether `j`'s runner, as read, still runs it.
async fn still_runs(db: &DatabaseConnection, j: &job::Model) -> DomainResult<bool> {
    let now = job::Entity::find_by_id(j.id.clone()).one(db).await?.ok_or(DomainError::NotFound)?;
    Ok(job::Entity::run(&now).runs_as(&j.runner))
}

/// Marks the job finished once nothing is pending (tests: after [`step`]).
pub async fn finish(db: &DatabaseConnection, principal: &Principal, job_id: &str) -> DomainResult<()> {
    finish_as(db, principal, job_id, None).await
}

/// [`finish`], only while `runner` (if given) still owns the job.
async fn finish_as(
    db: &DatabaseConnection,
    principal: &Principal,
    job_id: &str,
    runner: Option<&str>,
) -> DomainResult<()> {
    let txn = db::begin_write(db).await?;
    if jobs::finish::<job::Entity, _>(&txn, job_id, runner).await? {
        let j = job::Entity::find_by_id(job_id.to_owned()).one(&txn).await?.ok_or(DomainError::NotFound)?;
        let after = json!({
            "total": j.total,
            "released": j.released,
            "still_failing": j.still_failing,
            "already_resolved": j.already_resolved,
        });
        audit::record(
            &txn,
            &principal.actor,
            job_change("quarantine.bulk_release.finish", job_id, j.tenant_id.as_deref(), after),
        )
        .await?;
    }
    txn.commit().await?;
    Ok(())
}

/// Takes over an interrupted (or failed) job and runs the rest of it.
/// Entries already processed are not touched again.
pub async fn resume(
    db: &DatabaseConnection,
    vault: &Arc<Vault>,
    principal: &Principal,
    job_id: &str,
    stale_ms: i64,
    faults: &Faults,
) -> DomainResult<BulkReleaseView> {
    let j = find(db, principal, job_id).await?;
    let auth = principal.authorize(Permission::TriageEvents, scope_of(&j))?;
    jobs::check_resumable::<job::Entity>(&job::Entity::run(&j), clock::now_ms(), stale_ms)?;
    take_over(db, &auth, &j, Resumer::Person(&auth)).await?;
    spawn(db.clone(), vault.clone(), principal.clone(), job_id.to_owned(), faults);
    get(db, principal, job_id, stale_ms).await
}

/// Cancels a running, interrupted or failed job for good (anyone allowed to
/// triage its events): its runner stops before its next entry, the entries
/// it released stay released, the rest stay open. A conflict once the job
/// has finished or was canceled.
pub async fn cancel(
    db: &DatabaseConnection,
    principal: &Principal,
    job_id: &str,
    stale_ms: i64,
) -> DomainResult<BulkReleaseView> {
    let j = find(db, principal, job_id).await?;
    let auth = principal.authorize(Permission::TriageEvents, scope_of(&j))?;
    let run = job::Entity::run(&j);
    let after = json!({
        "previous_status": run.status_at(clock::now_ms(), stale_ms),
        "processed": j.processed,
        "released": j.released,
        "total": j.total,
    });
    let change = job_change("quarantine.bulk_release.cancel", &j.id, j.tenant_id.as_deref(), after);
    jobs::cancel::<job::Entity>(db, &run, auth.actor(), change).await?;
    get(db, principal, job_id, stale_ms).await
}

/// Gives `j` a new runner (of two resumers, one wins; a runner that was
/// only slow stops at its next round) and audits the resume. `auth` is the
/// resumer's, or for the system the job's authority re-checked: a person's
/// rights become the job's authority, the system's resume records whose it
/// ran under.
async fn take_over(db: &DatabaseConnection, auth: &Authorized, j: &job::Model, by: Resumer<'_>) -> DomainResult<()> {
    let mut after = json!({"processed": j.processed, "total": j.total});
    let person = matches!(by, Resumer::Person(_));
    if !person {
        after["authority"] = json!(auth.actor());
    }
    let change = job_change("quarantine.bulk_release.resume", &j.id, j.tenant_id.as_deref(), after);
    let also = |u: sea_orm::UpdateMany<job::Entity>| {
        if person { u.col_expr(job::Column::Authority, Expr::value(Some(authority_json(auth.actor())))) } else { u }
    };
    jobs::take_over::<job::Entity>(db, &job::Entity::run(j), by, also, change).await
}

/// The system's automatic resume (run by one process at a time, under the
/// `job_resume` lease): takes over the jobs whose runner has been silent for
/// `stale_ms` (a `running` job whose process died, or a `failed` one, which
/// so waits as long before it is tried again) and that the system has
/// resumed fewer than [`MAX_AUTO_RESUMES`] times in a row, and runs each in
/// this process. Each runs under its authority as it is now: if that user
/// or token is disabled, revoked, or may no longer triage the job's events,
/// the job is marked `failed` (saying why) and left to a person, exactly as
/// its runner would stop it at its next round. Returns the ids resumed (a
/// job another resumer won is not among them).
pub async fn resume_stale(
    db: &DatabaseConnection,
    vault: &Arc<Vault>,
    stale_ms: i64,
    process: &str,
    faults: &Faults,
) -> DomainResult<Vec<String>> {
    let stale = job::Entity::find()
        .filter(jobs::auto_resumable::<job::Entity>(clock::now_ms(), stale_ms))
        .filter(job::Column::Authority.is_not_null())
        .order_by_asc(job::Column::UpdatedAt)
        .limit(STALE_BATCH)
        .all(db)
        .await?;
    if stale.is_empty() {
        return Ok(Vec::new());
    }
    // A release seals (outbox payloads): under the newest version, even if
    // another process added it since this one's last ring refresh.
    vault.refresh(db).await.map_err(crate::kek::open_err)?;
    let mut resumed = Vec::new();
    for j in stale {
        let principal = match authority(db, &j).await? {
            Ok(p) => p,
            Err(why) => {
                give_up(db, &j, &why).await?;
                continue;
            }
        };
        let Ok(auth) = principal.authorize(Permission::TriageEvents, scope_of(&j)) else {
            give_up(db, &j, "its authority may no longer triage these events").await?;
            continue;
        };
        match take_over(db, &auth, &j, Resumer::System { process }).await {
            Ok(()) => {
                spawn(db.clone(), vault.clone(), principal, j.id.clone(), faults);
                resumed.push(j.id);
            }
            // Another resumer won, or its runner reported meanwhile.
            Err(DomainError::Conflict { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(resumed)
}

/// The job's authority as it stands now; `Err` says why it has none.
async fn authority(db: &DatabaseConnection, j: &job::Model) -> DomainResult<Result<Principal, String>> {
    let Some(actor) = j.authority.as_deref().and_then(|a| serde_json::from_str::<Actor>(a).ok()) else {
        return Ok(Err("its authority is not recorded".to_owned()));
    };
    match auth::of_actor(db, &actor).await {
        Ok(p) => Ok(Ok(p)),
        Err(DomainError::Db(e)) => Err(DomainError::Db(e)),
        Err(_) => Ok(Err(format!("{} {} is disabled, revoked or gone", actor.kind(), actor.name()))),
    }
}

/// Stops a stale job the system may not resume: `failed`, saying `why`, and
/// with no automatic resumes left (a person may still resume it). Only if
/// it is still as it was read.
async fn give_up(db: &DatabaseConnection, j: &job::Model, why: &str) -> DomainResult<()> {
    tracing::warn!(job = %j.id, reason = why, "bulk release not resumed automatically");
    job::Entity::update_many()
        .col_expr(job::Column::Status, Expr::value(RunStatus::Failed))
        .col_expr(job::Column::Error, Expr::value(format!("not resumed automatically: {why}")))
        .col_expr(job::Column::AutoResumes, Expr::value(MAX_AUTO_RESUMES))
        .col_expr(job::Column::UpdatedAt, Expr::value(clock::now_ms()))
        .filter(job::Column::Id.eq(&j.id))
        .filter(job::Column::Status.eq(j.status))
        .filter(job::Column::UpdatedAt.eq(j.updated_at))
        .exec(db)
        .await?;
    Ok(())
}

/// How a job stores its authority.
fn authority_json(actor: &Actor) -> String {
    serde_json::to_string(actor).expect("an actor serializes")
}

/// One job with its still-failing entries.
pub async fn get(
    db: &DatabaseConnection,
    principal: &Principal,
    job_id: &str,
    stale_ms: i64,
) -> DomainResult<BulkReleaseView> {
    let j = find(db, principal, job_id).await?;
    let failed = item::Entity::find()
        .filter(item::Column::JobId.eq(job_id))
        .filter(item::Column::Outcome.eq(BulkItemOutcome::StillFailing))
        .order_by_asc(item::Column::Position)
        .limit(FAILURES_SHOWN)
        .all(db)
        .await?;
    // People look for the provider's event id, not our entry id.
    let event_ids: HashMap<String, String> = entry::Entity::find()
        .filter(entry::Column::Id.is_in(failed.iter().map(|i| i.entry_id.as_str())))
        .all(db)
        .await?
        .into_iter()
        .map(|e| (e.id, e.event_id))
        .collect();
    let failures = failed
        .into_iter()
        .map(|i| BulkFailure {
            event_id: event_ids.get(&i.entry_id).cloned().unwrap_or_default(),
            id: i.entry_id,
            error: i.error.unwrap_or_default(),
        })
        .collect();
    let mut v = view(j, clock::now_ms(), stale_ms);
    v.failures = failures;
    Ok(v)
}

/// The latest jobs the caller may see, newest first.
pub async fn recent(
    db: &DatabaseConnection,
    principal: &Principal,
    limit: u64,
    stale_ms: i64,
) -> DomainResult<Vec<BulkReleaseView>> {
    let mut cond = Condition::all();
    match principal.tenant_filter() {
        Some(own) => {
            principal.authorize(Permission::ReadEvents, Scope::Tenant(own))?;
            cond = cond.add(job::Column::TenantId.eq(own));
        }
        None => {
            principal.authorize(Permission::ReadEvents, Scope::Global)?;
        }
    }
    let now = clock::now_ms();
    let rows = job::Entity::find()
        .filter(cond)
        .order_by_desc(job::Column::CreatedAt)
        .limit(limit.clamp(1, 50))
        .all(db)
        .await?;
    Ok(rows.into_iter().map(|j| view(j, now, stale_ms)).collect())
}

/// The job, if the caller may read events of its scope (else not found).
async fn find(db: &DatabaseConnection, principal: &Principal, job_id: &str) -> DomainResult<job::Model> {
    let j = job::Entity::find_by_id(job_id.to_owned()).one(db).await?.ok_or(DomainError::NotFound)?;
    // A release across all tenants is not a tenant-bound caller's to see.
    if j.tenant_id.is_none() && principal.tenant_filter().is_some() {
        return Err(DomainError::NotFound);
    }
    principal.authorize(Permission::ReadEvents, scope_of(&j))?;
    Ok(j)
}

/// A job belongs to its filter's tenant, or to no tenant when it spans all.
fn scope_of(j: &job::Model) -> Scope<'_> {
    j.tenant_id.as_deref().map_or(Scope::Global, Scope::Tenant)
}

fn view(j: job::Model, now: i64, stale_ms: i64) -> BulkReleaseView {
    let n = |v: i64| u64::try_from(v).unwrap_or(0);
    BulkReleaseView {
        status: job::Entity::run(&j).status_at(now, stale_ms).to_owned(),
        filter: serde_json::from_str(&j.filter).unwrap_or_default(),
        id: j.id,
        reason: j.reason,
        started_by: j.actor,
        total: n(j.total),
        processed: n(j.processed),
        released: n(j.released),
        still_failing: n(j.still_failing),
        already_resolved: n(j.already_resolved),
        error: j.error,
        started_at: clock::rfc3339(j.created_at),
        updated_at: clock::rfc3339(j.updated_at),
        finished_at: clock::rfc3339_opt(j.finished_at),
        failures: Vec::new(),
    }
}

fn job_change<'a>(
    action: &'a str,
    job_id: &'a str,
    tenant_id: Option<&'a str>,
    after: serde_json::Value,
) -> Change<'a> {
    Change { action, target_kind: "bulk_release", target_id: job_id, tenant_id, before: None, after: Some(after) }
}
