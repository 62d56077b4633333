//! KEK versions over their life: rotation, the rewrap that reseals every
//! sealed column under the newest version, and retirement of a version
//! nothing uses any more. (The ring itself is `vault`.)
//!
//! Sealed columns ([`SOURCES`]): signing-key secrets, Signet's service keys,
//! outbox payloads (OTP codes) and stored event bodies (health data). A
//! rewrap is a job (`kek_rewraps`) that walks each table in primary-key
//! order, one window of [`WINDOW`] rows at a time; each window's reseals and
//! the job's cursor commit together, so a job killed anywhere resumes where
//! its last window ended and never reseals a row twice. It runs online:
//! each row is updated only if it still holds the version that was read, so
//! a concurrent purge (which nulls a body) or another writer wins. One job
//! runs at a time (a partial unique index); a job whose runner stopped
//! reporting reads as interrupted and can be resumed, by an admin or, a
//! bounded number of times, by the system ([`resume_stale`]).
//!
//! A version can be retired only when no row of any source still uses it,
//! it is not the newest, and the newest is old enough that every instance
//! has loaded it (they refresh the ring every 10 s).

use std::{collections::BTreeMap, sync::Arc};

use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, DbErr, EntityTrait, QueryFilter, QueryOrder, QueryResult, Set,
    sea_query::{Alias, Expr, ExprTrait, Order, Query},
};
use serde::Serialize;
use serde_json::json;

use crate::{
    audit::{self, Change},
    auth::{Authorized, Permission, Principal, Scope},
    clock,
    crypto::{Aad, CryptoError, kek_version_of},
    db,
    entity::{kek_retirement, kek_rewrap as job, kek_version},
    error::{DomainError, DomainResult},
    ids,
    receiver::faults::Faults,
    vault::Vault,
};

/// Rows read per window of a rewrap.
pub const WINDOW: u64 = 1000;
/// The default of `serve --kek-stale-secs` (`SIGNET_KEK_STALE_SECS`): a
/// running rewrap whose runner has not reported for this long reads as
/// interrupted, a person may resume it, and the system resumes it on its
/// own. The server passes its setting to every function that takes
/// `stale_ms`; the CLI, which runs without the server's settings, passes
/// this.
pub const DEFAULT_STALE_AFTER_MS: i64 = 60_000;
/// The system resumes a job on its own at most this many times in a row
/// (counted in `auto_resumes`, which a person's start or resume sets back to
/// zero), so a job that fails, or kills its process, every time stops
/// looping and waits for a person.
pub const MAX_AUTO_RESUMES: i32 = 3;
/// The newest version must be at least this old before an older one can be
/// retired: every instance has reloaded the ring by then.
pub const RETIRE_AFTER_NEWEST_MS: i64 = 60_000;

pub use views::kek::{FAILED, FINISHED, INTERRUPTED, KekOverview, KekVersionView, RUNNING, RetiredView, RewrapView};

/// A job's `source` once every source is done.
const DONE: &str = "done";

/// One sealed column: where it lives and how its AAD is built.
pub struct Source {
    /// Stable name (shown in progress and counts).
    pub name: &'static str,
    table: &'static str,
    pk: &'static [&'static str],
    /// Columns besides the key that the AAD needs.
    extra: &'static [&'static str],
    column: &'static str,
    aad: fn(&QueryResult) -> Result<Aad, DbErr>,
    /// Only rows matching this hold a sealed value (a `v1a` public key a
    /// provider uploaded is stored in clear with version 0, nothing sealed).
    sealed_only: Option<fn() -> Expr>,
}

impl Source {
    /// The `sealed_only` predicate, if any.
    fn sealed_rows(&self) -> Option<Expr> {
        self.sealed_only.map(|p| p())
    }
}

fn text(row: &QueryResult, col: &str) -> Result<String, DbErr> {
    row.try_get::<String>("", col)
}

/// Every sealed column, in the order a rewrap walks them.
pub const SOURCES: [Source; 4] = [
    Source {
        name: "signing_keys",
        table: "signing_keys",
        pk: &["id"],
        extra: &["tenant_id", "endpoint_id"],
        column: "secret_ciphertext",
        aad: |r| Ok(Aad::signing_key(&text(r, "tenant_id")?, &text(r, "endpoint_id")?, &text(r, "id")?)),
        // HMAC secrets and the private keys of pairs Signet generated.
        sealed_only: Some(|| Expr::col(Alias::new("kek_version")).ne(0)),
    },
    Source {
        name: "service_keys",
        table: "service_keys",
        pk: &["purpose"],
        extra: &["key_id", "binding"],
        column: "ciphertext",
        aad: |r| Ok(Aad::service_key(&text(r, "purpose")?, &text(r, "key_id")?, &text(r, "binding")?)),
        sealed_only: None,
    },
    Source {
        name: "outbox_payloads",
        table: "outbox_intents",
        // Walked by id (ix_outbox_id), not by the (tenant_id, id) key: a
        // rewrap started before that key holds a cursor of the id alone.
        pk: &["id"],
        extra: &["tenant_id"],
        column: "payload_ciphertext",
        aad: |r| Ok(Aad::outbox_payload(&text(r, "tenant_id")?, &text(r, "id")?)),
        sealed_only: None,
    },
    Source {
        name: "event_bodies",
        table: "inbox_claims",
        pk: &["tenant_id", "endpoint_id", "event_id"],
        extra: &[],
        column: "body_ciphertext",
        aad: |r| Ok(Aad::event_body(&text(r, "tenant_id")?, &text(r, "endpoint_id")?, &text(r, "event_id")?)),
        sealed_only: None,
    },
];

fn col(name: &str) -> Expr {
    Expr::col(Alias::new(name))
}

fn key_tuple(s: &Source) -> Expr {
    Expr::tuple(s.pk.iter().map(|c| col(c)))
}

fn value_tuple(values: &[String]) -> Expr {
    Expr::tuple(values.iter().map(|v| Expr::val(v.clone())))
}

/// Whether [`overview`] counts rows: counting reads every sealed table, too
/// much to repeat every second beside a running rewrap, whose own progress
/// says how far it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counting {
    Always,
    NotWhileRewrapping,
}

fn authorize(principal: &Principal) -> DomainResult<Authorized> {
    principal.authorize(Permission::ManageKeks, Scope::Global)
}

/// Rows per (source, version). Reads every sealed table once (on ten million
/// stored events about a second on PostgreSQL; see
/// docs/benchmarks.md#kek-rewrap).
pub async fn counts<C: ConnectionTrait>(conn: &C) -> DomainResult<BTreeMap<(String, u32), u64>> {
    let mut out = BTreeMap::new();
    for s in &SOURCES {
        let mut stmt = Query::select()
            .expr_as(col("kek_version"), Alias::new("v"))
            .expr_as(Expr::col(Alias::new("kek_version")).count(), Alias::new("n"))
            .from(Alias::new(s.table))
            .and_where(Expr::col(Alias::new("kek_version")).is_not_null())
            .group_by_col(Alias::new("kek_version"))
            .to_owned();
        if let Some(only) = s.sealed_rows() {
            stmt.and_where(only);
        }
        for row in conn.query_all(&stmt).await? {
            let v: i32 = row.try_get("", "v")?;
            let n: i64 = row.try_get("", "n")?;
            out.insert((s.name.to_owned(), v as u32), n as u64);
        }
    }
    Ok(out)
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
    let counted = counting == Counting::Always || latest.as_ref().is_none_or(|j| j.status != RUNNING);
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
fn written(j: job::Model) -> RewrapView {
    let at = j.updated_at;
    view(j, at, 0)
}

/// The job as seen at `now`, a runner silent for `stale_ms` reading as
/// interrupted.
fn view(j: job::Model, now: i64, stale_ms: i64) -> RewrapView {
    let status =
        if j.status == RUNNING && now - j.updated_at > stale_ms { INTERRUPTED.to_owned() } else { j.status.clone() };
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

/// One rewrap job, interrupted once its runner has been silent for
/// `stale_ms`.
pub async fn get(db: &DatabaseConnection, principal: &Principal, id: &str, stale_ms: i64) -> DomainResult<RewrapView> {
    authorize(principal)?;
    let j = job::Entity::find_by_id(id.to_owned()).one(db).await?.ok_or(DomainError::NotFound)?;
    Ok(view(j, clock::now_ms(), stale_ms))
}

pub(crate) fn open_err(e: crate::vault::VaultOpenError) -> DomainError {
    use crate::vault::VaultOpenError;
    match e {
        VaultOpenError::Db(d) => DomainError::Db(d),
        VaultOpenError::Crypto(c) => DomainError::Crypto(c),
        VaultOpenError::WrongMasterKey(_) | VaultOpenError::AuditKey(_) => {
            DomainError::Crypto(CryptoError::Unauthentic)
        }
    }
}

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
/// runs the job ([`run`] in the foreground, [`spawn`] in the background).
pub async fn rotate(
    db: &DatabaseConnection,
    vault: &Vault,
    principal: &Principal,
    stale_ms: i64,
) -> DomainResult<Rotation> {
    let auth = authorize(principal)?;
    vault.refresh(db).await.map_err(open_err)?;
    if let Some(j) = unfinished(db).await? {
        return resume_job(db, &auth, j, stale_ms, Resumer::Person).await.map(|rewrap| Rotation {
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
        return resume_job(db, &auth, j, stale_ms, Resumer::Person).await;
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
    let auth = authorize(principal)?;
    let j = job::Entity::find_by_id(id.to_owned()).one(db).await?.ok_or(DomainError::NotFound)?;
    resume_job(db, &auth, j, stale_ms, Resumer::Person).await
}

/// The system's automatic resume (run by one process at a time, under the
/// `job_resume` lease): takes the latest job over if its runner has been
/// silent for `stale_ms` (a `running` job whose process died, or a `failed`
/// one, which so waits as long before it is tried again) and the system has
/// resumed it fewer than [`MAX_AUTO_RESUMES`] times in a row. The take-over
/// is the one a person's Resume makes (of two resumers, one wins; a runner
/// that was only slow stops at its next window), audited as
/// `kek.rewrap.resume` by `system` with `"automatic": true`, the previous
/// runner and `process` (the resuming process). `None`: nothing to resume,
/// or another resumer won. The caller runs the job ([`spawn`]).
pub async fn resume_stale(
    db: &DatabaseConnection,
    vault: &Vault,
    stale_ms: i64,
    process: &str,
) -> DomainResult<Option<RewrapView>> {
    let Some(j) = unfinished(db).await? else { return Ok(None) };
    let silent = clock::now_ms() - j.updated_at > stale_ms;
    if !silent || j.auto_resumes >= MAX_AUTO_RESUMES || !(j.status == RUNNING || j.status == FAILED) {
        return Ok(None);
    }
    // A rewrap is an admin's job; resuming it is the system's own action.
    let auth = authorize(&Principal::system())?;
    // Seal under the newest version even if another process added it since
    // this one's last ring refresh.
    vault.refresh(db).await.map_err(open_err)?;
    match resume_job(db, &auth, j, stale_ms, Resumer::System { process }).await {
        Ok(v) => Ok(Some(v)),
        Err(DomainError::Conflict { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Who takes a job over.
#[derive(Clone, Copy)]
enum Resumer<'a> {
    /// An admin (Resume, `kek rewrap`, `kek rotate`): the job's budget of
    /// automatic resumes starts again.
    Person,
    /// The automatic resume in `process`.
    System { process: &'a str },
}

/// The latest job if it has not finished: running (perhaps stale) or failed.
async fn unfinished(db: &DatabaseConnection) -> DomainResult<Option<job::Model>> {
    Ok(job::Entity::find().order_by_desc(job::Column::CreatedAt).one(db).await?.filter(|j| j.status != FINISHED))
}

/// Takes `j` over if it failed or its runner has been silent for `stale_ms`.
async fn resume_job(
    db: &DatabaseConnection,
    auth: &Authorized,
    j: job::Model,
    stale_ms: i64,
    by: Resumer<'_>,
) -> DomainResult<RewrapView> {
    match view(j.clone(), clock::now_ms(), stale_ms).status.as_str() {
        INTERRUPTED | FAILED => {}
        FINISHED => return Err(DomainError::conflict("rewrap_finished", "this rewrap has finished")),
        _ => {
            return Err(DomainError::conflict(
                "rewrap_in_progress",
                "a KEK rewrap is running; wait for it or resume it once it reads as interrupted",
            ));
        }
    }
    let auto_resumes = match by {
        Resumer::Person => Expr::value(0),
        Resumer::System { .. } => Expr::col(job::Column::AutoResumes).add(1),
    };
    let txn = db::begin_write(db).await?;
    let taken = job::Entity::update_many()
        .col_expr(job::Column::Runner, Expr::value(ids::new_id()))
        .col_expr(job::Column::Status, Expr::value(RUNNING))
        .col_expr(job::Column::Error, Expr::value(Option::<String>::None))
        .col_expr(job::Column::UpdatedAt, Expr::value(clock::now_ms()))
        .col_expr(job::Column::AutoResumes, auto_resumes)
        .filter(job::Column::Id.eq(&j.id))
        .filter(job::Column::Status.eq(&j.status))
        .filter(job::Column::UpdatedAt.eq(j.updated_at))
        .exec(&txn)
        .await
        .map_err(db::conflict_if_unique("rewrap_in_progress", "another KEK rewrap is running"))?;
    if taken.rows_affected == 0 {
        txn.rollback().await?;
        return Err(DomainError::conflict("rewrap_in_progress", "someone else resumed this rewrap"));
    }
    let version = j.target_version.to_string();
    let mut after = json!({"job": j.id, "source": j.source, "scanned": j.scanned, "previous_runner": j.runner});
    if let Resumer::System { process } = by {
        after["automatic"] = json!(true);
        after["process"] = json!(process);
        after["previous_status"] = json!(j.status);
    }
    audit::record(&txn, auth.actor(), kek_change("kek.rewrap.resume", &version, None, after)).await?;
    txn.commit().await?;
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
        status: Set(RUNNING.into()),
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

/// An audit entry about KEK version `version` (its decimal text).
fn kek_change<'a>(
    action: &'a str,
    version: &'a str,
    before: Option<serde_json::Value>,
    after: serde_json::Value,
) -> Change<'a> {
    Change { action, target_kind: "kek", target_id: version, tenant_id: None, before, after: Some(after) }
}

/// Runs the job to its end as its current runner, calling `progress` after
/// every window. Stops early (without failing the job) if another runner
/// took it over. A failure is recorded on the job (`failed`, resumable).
pub async fn run(
    db: &DatabaseConnection,
    vault: &Vault,
    id: &str,
    progress: impl FnMut(&RewrapView),
) -> DomainResult<RewrapView> {
    run_paced(db, vault, id, &Faults::default(), progress).await
}

/// [`run`], with the test fault points `kek_window_rows` (windows of that
/// many rows) and `stall_kek_window_ms` (a pause after each window), so a
/// test can kill a runner midway.
async fn run_paced(
    db: &DatabaseConnection,
    vault: &Vault,
    id: &str,
    faults: &Faults,
    mut progress: impl FnMut(&RewrapView),
) -> DomainResult<RewrapView> {
    let j = job::Entity::find_by_id(id.to_owned()).one(db).await?.ok_or(DomainError::NotFound)?;
    let runner = j.runner.clone();
    let window = faults.kek_window_rows.unwrap_or(WINDOW);
    loop {
        match step(db, vault, id, &runner, window).await {
            Ok(Some(v)) => {
                progress(&v);
                if let Some(pause) = faults.stall_kek_window.filter(|_| v.status == RUNNING) {
                    tokio::time::sleep(pause).await;
                }
                if v.status != RUNNING {
                    return Ok(v);
                }
            }
            Ok(None) => {
                let j = job::Entity::find_by_id(id.to_owned()).one(db).await?.ok_or(DomainError::NotFound)?;
                return Ok(written(j));
            }
            Err(e) => {
                tracing::error!(job = %id, error = %e, "KEK rewrap failed");
                job::Entity::update_many()
                    .col_expr(job::Column::Status, Expr::value(FAILED))
                    .col_expr(job::Column::Error, Expr::value(Some(e.public_message())))
                    .col_expr(job::Column::UpdatedAt, Expr::value(clock::now_ms()))
                    .filter(job::Column::Id.eq(id))
                    .filter(job::Column::Runner.eq(&runner))
                    .exec(db)
                    .await?;
                return Err(e);
            }
        }
    }
}

/// [`run`] on a tokio task (the console's Rewrap and Resume buttons, the
/// automatic resume). `faults` (tests only) may slow it down.
pub fn spawn(db: DatabaseConnection, vault: Arc<Vault>, id: String, faults: &Faults) {
    let faults = faults.clone();
    tokio::spawn(async move {
        if let Err(e) = run_paced(&db, &vault, &id, &faults, |_| {}).await {
            tracing::warn!(job = %id, error = %e, "KEK rewrap stopped");
        }
    });
}

/// One window of the job: reads up to `window` rows ([`WINDOW`] when run)
/// of the current source after the cursor, reseals those under another
/// version, and moves the cursor, all in one transaction. `None` when
/// `runner` no longer owns the job.
pub async fn step(
    db: &DatabaseConnection,
    vault: &Vault,
    id: &str,
    runner: &str,
    window: u64,
) -> DomainResult<Option<RewrapView>> {
    let j = job::Entity::find_by_id(id.to_owned()).one(db).await?.ok_or(DomainError::NotFound)?;
    if j.runner != runner || j.status != RUNNING {
        return Ok(None);
    }
    let Some(pos) = SOURCES.iter().position(|s| s.name == j.source) else {
        return finish(db, &j).await.map(Some);
    };
    let source = &SOURCES[pos];
    let cursor: Option<Vec<String>> = j
        .cursor
        .as_deref()
        .map(serde_json::from_str)
        .transpose()
        .map_err(|e| DbErr::Custom(format!("bad rewrap cursor: {e}")))?;
    vault.reserve_seals(db, std::cmp::max(window, 1)).await?;
    let txn = db::begin_write(db).await?;
    // The window: the next WINDOW rows after the cursor, with what a reseal
    // needs, in one index range scan. (Selecting the stale rows by a second
    // range predicate instead let PostgreSQL's planner choose a parallel
    // sequential scan per window on ten million claims.)
    // The version this process seals under: the newest, as of the reserve.
    let target = vault.sealing_version().ok_or(CryptoError::SealsNotReserved)?;
    let mut q = Query::select();
    for c in source.pk.iter().chain(source.extra) {
        q.column(Alias::new(*c));
    }
    q.column(Alias::new(source.column))
        .column(Alias::new("kek_version"))
        .from(Alias::new(source.table))
        .limit(std::cmp::max(window, 1));
    for c in source.pk {
        q.order_by(Alias::new(*c), Order::Asc);
    }
    if let Some(after) = &cursor {
        q.and_where(key_tuple(source).gt(value_tuple(after)));
    }
    if let Some(only) = source.sealed_rows() {
        q.and_where(only);
    }
    let rows = txn.query_all(&q).await?;
    let Some(last) =
        rows.last().map(|r| source.pk.iter().map(|c| text(r, c)).collect::<Result<Vec<_>, _>>()).transpose()?
    else {
        // This source is done: on to the next.
        let next = SOURCES.get(pos + 1).map_or(DONE, |s| s.name);
        job::Entity::update_many()
            .col_expr(job::Column::Source, Expr::value(next))
            .col_expr(job::Column::Cursor, Expr::value(Option::<String>::None))
            .col_expr(job::Column::UpdatedAt, Expr::value(clock::now_ms()))
            .filter(job::Column::Id.eq(id))
            .filter(job::Column::Runner.eq(runner))
            .exec(&txn)
            .await?;
        txn.commit().await?;
        return Ok(Some(written(job::Entity::find_by_id(id.to_owned()).one(db).await?.ok_or(DomainError::NotFound)?)));
    };
    let mut rewrapped = 0i64;
    for row in &rows {
        let Some(old) = row.try_get::<Option<i32>>("", "kek_version")?.filter(|v| *v != target as i32) else {
            continue;
        };
        let Some(sealed) = row.try_get::<Option<Vec<u8>>>("", source.column)? else { continue };
        let aad = (source.aad)(row)?;
        let Some(resealed) = vault.rewrap(&aad, &sealed)? else { continue };
        let version = kek_version_of(&resealed)? as i32;
        let pk: Vec<String> = source.pk.iter().map(|c| text(row, c)).collect::<Result<_, _>>()?;
        let update = Query::update()
            .table(Alias::new(source.table))
            .value(Alias::new(source.column), resealed)
            .value(Alias::new("kek_version"), version)
            .and_where(key_tuple(source).eq(value_tuple(&pk)))
            .and_where(Expr::col(Alias::new("kek_version")).eq(old))
            .to_owned();
        rewrapped += txn.execute(&update).await?.rows_affected() as i64;
    }
    let moved = job::Entity::update_many()
        .col_expr(
            job::Column::Cursor,
            Expr::value(Some(serde_json::to_string(&last).map_err(|e| DbErr::Custom(e.to_string()))?)),
        )
        .col_expr(job::Column::Scanned, Expr::col(job::Column::Scanned).add(rows.len() as i64))
        .col_expr(job::Column::Rewrapped, Expr::col(job::Column::Rewrapped).add(rewrapped))
        .col_expr(job::Column::UpdatedAt, Expr::value(clock::now_ms()))
        .filter(job::Column::Id.eq(id))
        .filter(job::Column::Runner.eq(runner))
        .exec(&txn)
        .await?;
    if moved.rows_affected == 0 {
        // Taken over by another runner: this window's work is not ours to commit.
        txn.rollback().await?;
        return Ok(None);
    }
    txn.commit().await?;
    Ok(Some(written(job::Entity::find_by_id(id.to_owned()).one(db).await?.ok_or(DomainError::NotFound)?)))
}

async fn finish(db: &DatabaseConnection, j: &job::Model) -> DomainResult<RewrapView> {
    let now = clock::now_ms();
    let txn = db::begin_write(db).await?;
    let done = job::Entity::update_many()
        .col_expr(job::Column::Status, Expr::value(FINISHED))
        .col_expr(job::Column::FinishedAt, Expr::value(Some(now)))
        .col_expr(job::Column::UpdatedAt, Expr::value(now))
        .filter(job::Column::Id.eq(&j.id))
        .filter(job::Column::Runner.eq(&j.runner))
        .filter(job::Column::Status.eq(RUNNING))
        .exec(&txn)
        .await?;
    if done.rows_affected > 0 {
        let after = json!({"job": j.id, "scanned": j.scanned, "rewrapped": j.rewrapped});
        let version = j.target_version.to_string();
        audit::record(&txn, &crate::auth::Actor::System, kek_change("kek.rewrap.finish", &version, None, after))
            .await?;
    }
    txn.commit().await?;
    let j = job::Entity::find_by_id(j.id.clone()).one(db).await?.ok_or(DomainError::NotFound)?;
    Ok(written(j))
}

/// Takes a KEK version out of the ring for good. Refused while any row of
/// any source still uses it, for the newest version, and until the newest
/// has been in the ring long enough for every instance to have loaded it.
pub async fn retire(
    db: &DatabaseConnection,
    vault: &Vault,
    principal: &Principal,
    version: u32,
) -> DomainResult<RetiredView> {
    let auth = authorize(principal)?;
    let txn = db::begin_write(db).await?;
    let all = kek_version::Entity::find().order_by_asc(kek_version::Column::Version).all(&txn).await?;
    let Some(row) = all.iter().find(|v| v.version as u32 == version).cloned() else {
        if kek_retirement::Entity::find_by_id(version as i32).one(&txn).await?.is_some() {
            return Err(DomainError::conflict("kek_retired", format!("KEK version {version} is already retired")));
        }
        return Err(DomainError::NotFound);
    };
    let newest = all.last().ok_or(CryptoError::EmptyKeyring)?;
    if newest.version == row.version {
        return Err(DomainError::conflict(
            "kek_newest",
            format!("KEK version {version} is the newest: rotate first (signet kek rotate)"),
        ));
    }
    if clock::now_ms() - newest.created_at < RETIRE_AFTER_NEWEST_MS {
        return Err(DomainError::conflict(
            "kek_rotated_recently",
            format!(
                "KEK version {} was added less than a minute ago; an instance may not have loaded it yet. \
                 Try again shortly",
                newest.version
            ),
        ));
    }
    let in_use: Vec<String> = counts(&txn)
        .await?
        .into_iter()
        .filter(|((_, v), n)| *v == version && *n > 0)
        .map(|((source, _), n)| format!("{n} {source}"))
        .collect();
    if !in_use.is_empty() {
        return Err(DomainError::conflict(
            "kek_in_use",
            format!("KEK version {version} still seals {}: rewrap first (signet kek rewrap)", in_use.join(", ")),
        ));
    }
    let now = clock::now_ms();
    kek_version::Entity::delete_by_id(row.version).exec(&txn).await?;
    kek_retirement::Entity::insert(kek_retirement::ActiveModel {
        version: Set(row.version),
        created_at: Set(row.created_at),
        retired_at: Set(now),
        retired_by: Set(auth.actor().name().to_owned()),
    })
    .exec_without_returning(&txn)
    .await?;
    let target = version.to_string();
    audit::record(
        &txn,
        auth.actor(),
        kek_change("kek.retire", &target, Some(json!({"kek_version": version})), json!({"retired": true})),
    )
    .await?;
    txn.commit().await?;
    vault.refresh(db).await.map_err(open_err)?;
    Ok(RetiredView {
        version,
        created_at: clock::rfc3339(row.created_at),
        retired_at: clock::rfc3339(now),
        retired_by: auth.actor().name().to_owned(),
    })
}
