//! Drill runs: started (one at a time, and at most [`RUNS_PER_WINDOW`] per
//! principal in [`WINDOW_MS`]), executed with progress after each drill,
//! stored and audited. A run whose runner died (no progress for
//! [`STALE_MS`]) reads as `interrupted`, and no longer blocks a new run. A
//! run started by a clinic admin belongs to its tenant: other clinic admins
//! never see it; deployment-wide roles see every run.

use std::time::Instant;

use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect, Set, sea_query::Expr,
};
use serde_json::json;

use super::{
    drills::{self, Checks, Fixture, Transport},
    scheme_drill,
};
use crate::{
    audit::{self, Change},
    auth::{Actor, Principal, Scope},
    clock, db,
    entity::drill_run,
    error::{DomainError, DomainResult},
    ids,
    vault::Vault,
};
use views::{
    evidence::{DRILL_NAMES, DrillResult, DrillRunView, DrillStatus},
    roles::Permission,
};

/// A running run that has not moved for this long has lost its runner.
pub const STALE_MS: i64 = 120_000;

/// Runs one user or token may start in any [`WINDOW_MS`]: each run has a
/// commit stall (`lost_ack`), a killed process holding a write lock
/// (`interrupted_before_commit`) and 32 concurrent deliveries that share
/// the database with every tenant. The CLI, which acts on the database
/// directly anyway, is not limited. (`POST /api/v1/drills` documents its
/// 429 with these numbers.)
pub const RUNS_PER_WINDOW: usize = 3;
pub const WINDOW_MS: i64 = 10 * 60_000;

fn view(m: drill_run::Model, now: i64) -> DrillRunView {
    let drills: Vec<DrillResult> = serde_json::from_str(&m.results).unwrap_or_default();
    let status = match m.status {
        DrillStatus::Running if now - m.updated_at > STALE_MS => DrillStatus::Interrupted,
        s => s,
    };
    DrillRunView {
        run_id: m.id,
        passed: m.passed,
        status: status.as_str().to_owned(),
        actor: Some(m.actor),
        actor_kind: m.actor_kind,
        engine: m.engine,
        version: m.version,
        build_commit: m.build_commit,
        binary_sha256: m.binary_sha256,
        schema_version: m.schema_version,
        started_at: clock::rfc3339(m.started_at),
        started_at_ms: m.started_at,
        finished_at: clock::rfc3339_opt(m.finished_at),
        finished_at_ms: m.finished_at,
        total: DRILL_NAMES.len(),
        done: drills.len(),
        error: m.error,
        drills,
        schemes: recorded_schemes(m.schemes.as_deref()),
    }
}

/// The schemes a stored run drilled; a run stored before they were
/// recorded signed with standard-webhooks only.
pub(crate) fn recorded_schemes(stored: Option<&str>) -> Vec<String> {
    match stored {
        None => views::evidence::signed_with_standard_webhooks_only(),
        Some(json) => serde_json::from_str(json).unwrap_or_default(),
    }
}

/// Everyone who may run drills may read them; drills touch only the drill
/// tenant, so a clinic admin's runs are authorized in its own scope.
fn scope(principal: &Principal) -> Scope<'_> {
    principal.tenant_filter().map_or(Scope::Global, Scope::Tenant)
}

/// The newest applied migration: drills and evidence note the schema they
/// saw, and a later schema change makes a run stale.
pub async fn schema_version<C: ConnectionTrait>(conn: &C) -> DomainResult<String> {
    let row = conn
        .query_one_raw(sea_orm::Statement::from_string(
            conn.get_database_backend(),
            "SELECT MAX(version) AS v FROM seaql_migrations",
        ))
        .await?;
    Ok(row.and_then(|r| r.try_get::<Option<String>>("", "v").ok().flatten()).unwrap_or_default())
}

pub fn engine_name(db: &DatabaseConnection) -> &'static str {
    match db.get_database_backend() {
        sea_orm::DbBackend::Postgres => "postgres",
        sea_orm::DbBackend::Sqlite => "sqlite",
        _ => "other",
    }
}

/// Refuses a user or token that started [`RUNS_PER_WINDOW`] runs in the
/// last [`WINDOW_MS`], saying when the oldest of them leaves the window.
/// Read inside the start's write transaction; two starts that race past it
/// still meet the one-run-at-a-time index.
async fn within_rate_limit<C: ConnectionTrait>(conn: &C, actor: &Actor, now: i64) -> DomainResult<()> {
    if !matches!(actor, Actor::User { .. } | Actor::Token { .. }) {
        return Ok(());
    }
    let recent: Vec<i64> = drill_run::Entity::find()
        .select_only()
        .column(drill_run::Column::StartedAt)
        .filter(drill_run::Column::ActorKind.eq(actor.kind()))
        .filter(drill_run::Column::Actor.eq(actor.name()))
        .filter(drill_run::Column::StartedAt.gt(now - WINDOW_MS))
        .order_by_desc(drill_run::Column::StartedAt)
        .limit(RUNS_PER_WINDOW as u64)
        .into_tuple()
        .all(conn)
        .await?;
    if recent.len() < RUNS_PER_WINDOW {
        return Ok(());
    }
    let frees_at = recent.iter().min().copied().unwrap_or(now) + WINDOW_MS;
    let retry_after_secs = ((frees_at - now + 999) / 1000).max(1);
    Err(DomainError::RateLimited {
        code: "drill_rate_limited",
        message: format!(
            "at most {RUNS_PER_WINDOW} drill runs per {} minutes for each user or token; \
             try again in {retry_after_secs} s",
            WINDOW_MS / 60_000
        ),
        retry_after_secs,
    })
}

/// Starts a run (stored as `running`, audited). Refused while another run is
/// in progress (a stale one is marked interrupted first), and past the
/// principal's rate limit.
pub async fn start(db: &DatabaseConnection, principal: &Principal) -> DomainResult<DrillRunView> {
    let auth = principal.authorize(Permission::RunDrills, scope(principal))?;
    // Before the transaction: the first call hashes the binary.
    let build = super::identity::current().await;
    let now = clock::now_ms();
    let txn = db::begin_write(db).await?;
    within_rate_limit(&txn, auth.actor(), now).await?;
    drill_run::Entity::update_many()
        .col_expr(drill_run::Column::Status, Expr::value(DrillStatus::Interrupted))
        .col_expr(
            drill_run::Column::Error,
            Expr::value("the process running this drill run stopped before it finished"),
        )
        .filter(drill_run::Column::Status.eq(DrillStatus::Running))
        .filter(drill_run::Column::UpdatedAt.lt(now - STALE_MS))
        .exec(&txn)
        .await?;
    let model = drill_run::ActiveModel {
        id: Set(ids::new_id()),
        actor: Set(auth.actor().name().to_owned()),
        actor_kind: Set(auth.actor().kind().to_owned()),
        tenant_id: Set(principal.tenant_filter().map(str::to_owned)),
        status: Set(DrillStatus::Running),
        passed: Set(None),
        engine: Set(engine_name(db).to_owned()),
        version: Set(build.version),
        build_commit: Set(build.commit),
        binary_sha256: Set(build.binary_sha256),
        schema_version: Set(schema_version(&txn).await?),
        results: Set("[]".into()),
        error: Set(None),
        started_at: Set(now),
        updated_at: Set(now),
        finished_at: Set(None),
        schemes: Set(Some("[]".into())),
    }
    .insert(&txn)
    .await
    .map_err(db::conflict_if_unique(
        "drill_run_in_progress",
        "a drill run is already in progress; wait for it to finish",
    ))?;
    audit::record(
        &txn,
        auth.actor(),
        Change {
            action: "drill.start",
            target_kind: "drill_run",
            target_id: &model.id,
            tenant_id: None,
            before: None,
            after: None,
        },
    )
    .await?;
    txn.commit().await?;
    Ok(view(model, now))
}

/// Runs one drill by name.
async fn run_one<T: Transport>(db: &DatabaseConnection, fx: &Fixture, t: &T, name: &str) -> DrillResult {
    let started = Instant::now();
    let mut c = Checks::default();
    let outcome = match name {
        scheme_drill::NAME => scheme_drill::scheme_verification(db, fx, t, &mut c).await,
        other => drills::run_named(db, fx, t, other, &mut c).await,
    };
    // A fault the drill armed but no commit consumed must not outlive it.
    t.faults().disarm();
    if let Err(e) = outcome {
        tracing::error!(drill = name, error = %e, "drill could not read the database");
        c.error(format!("reading the database failed: {}", e.public_message()));
    }
    c.done(name, started)
}

/// Runs every drill for a started run, storing each result as it finishes,
/// then the verdict (audited as `drill.finish`). Errors that stop the run
/// (the fixture cannot be made) are stored on the run.
pub async fn execute<T: Transport>(
    db: &DatabaseConnection,
    vault: &Vault,
    principal: &Principal,
    run_id: &str,
    transport: &T,
) -> DomainResult<DrillRunView> {
    let auth = principal.authorize(Permission::RunDrills, scope(principal))?;
    let mut results: Vec<DrillResult> = Vec::new();
    let fixture = match drills::fixture(db, vault).await {
        Ok(fx) => drills::clear(db, &fx).await.map(|()| fx),
        Err(e) => Err(e),
    };
    let error = match fixture {
        Ok(fx) => {
            for name in DRILL_NAMES {
                let result = run_one(db, &fx, transport, name).await;
                tracing::info!(run_id, drill = name, passed = result.passed, "drill finished");
                results.push(result);
                progress(db, run_id, &results).await?;
            }
            None
        }
        Err(e) => {
            tracing::error!(run_id, error = %e, "drill fixture failed");
            Some(format!("the drill tenant could not be prepared: {}", e.public_message()))
        }
    };
    let passed = error.is_none() && results.iter().all(|r| r.passed);
    let covered = scheme_drill::covered(&results);
    let now = clock::now_ms();
    let txn = db::begin_write(db).await?;
    drill_run::Entity::update_many()
        .col_expr(drill_run::Column::Status, Expr::value(DrillStatus::Finished))
        .col_expr(drill_run::Column::Passed, Expr::value(passed))
        .col_expr(
            drill_run::Column::Results,
            Expr::value(serde_json::to_string(&results).unwrap_or_else(|_| "[]".into())),
        )
        .col_expr(drill_run::Column::Error, Expr::value(error.clone()))
        .col_expr(
            drill_run::Column::Schemes,
            Expr::value(serde_json::to_string(&covered).unwrap_or_else(|_| "[]".into())),
        )
        .col_expr(drill_run::Column::UpdatedAt, Expr::value(now))
        .col_expr(drill_run::Column::FinishedAt, Expr::value(now))
        .filter(drill_run::Column::Id.eq(run_id))
        .exec(&txn)
        .await?;
    let failed: Vec<&str> = results.iter().filter(|r| !r.passed).map(|r| r.name.as_str()).collect();
    audit::record(
        &txn,
        auth.actor(),
        Change {
            action: "drill.finish",
            target_kind: "drill_run",
            target_id: run_id,
            tenant_id: None,
            before: None,
            after: Some(json!({"passed": passed, "failed": failed, "error": error, "schemes": covered})),
        },
    )
    .await?;
    txn.commit().await?;
    let row = drill_run::Entity::find_by_id(run_id.to_owned()).one(db).await?.ok_or(DomainError::NotFound)?;
    Ok(view(row, now))
}

async fn progress(db: &DatabaseConnection, run_id: &str, results: &[DrillResult]) -> DomainResult<()> {
    drill_run::Entity::update_many()
        .col_expr(
            drill_run::Column::Results,
            Expr::value(serde_json::to_string(results).unwrap_or_else(|_| "[]".into())),
        )
        .col_expr(drill_run::Column::UpdatedAt, Expr::value(clock::now_ms()))
        .filter(drill_run::Column::Id.eq(run_id))
        .exec(db)
        .await?;
    Ok(())
}

/// Starts a run and executes it to the end (the CLI's `drill run`).
pub async fn run<T: Transport>(
    db: &DatabaseConnection,
    vault: &Vault,
    principal: &Principal,
    transport: &T,
) -> DomainResult<DrillRunView> {
    let started = start(db, principal).await?;
    execute(db, vault, principal, &started.run_id, transport).await
}

/// The runs a principal may see: a clinic admin's tenant's only.
fn visible(principal: &Principal) -> sea_orm::Select<drill_run::Entity> {
    match principal.tenant_filter() {
        Some(own) => drill_run::Entity::find().filter(drill_run::Column::TenantId.eq(own)),
        None => drill_run::Entity::find(),
    }
}

/// One run; another tenant's (or a deployment-wide role's) answers not
/// found to a clinic admin.
pub async fn get(db: &DatabaseConnection, principal: &Principal, run_id: &str) -> DomainResult<DrillRunView> {
    principal.authorize(Permission::RunDrills, scope(principal))?;
    let row =
        visible(principal).filter(drill_run::Column::Id.eq(run_id)).one(db).await?.ok_or(DomainError::NotFound)?;
    Ok(view(row, clock::now_ms()))
}

/// Newest first; a clinic admin's tenant's runs only.
pub async fn list(db: &DatabaseConnection, principal: &Principal, limit: u64) -> DomainResult<Vec<DrillRunView>> {
    principal.authorize(Permission::RunDrills, scope(principal))?;
    let now = clock::now_ms();
    let rows = visible(principal)
        .order_by_desc(drill_run::Column::StartedAt)
        .limit(limit.clamp(1, views::paging::DRILL_RUNS.max))
        .all(db)
        .await?;
    Ok(rows.into_iter().map(|m| view(m, now)).collect())
}

/// The newest finished run, whoever started it: drills test the deployment,
/// so every bundle carries the latest. In a bundle limited to `tenant`, who
/// started a run outside that tenant is not named (`actor` is null).
pub(crate) async fn latest_finished(
    db: &DatabaseConnection,
    tenant: Option<&str>,
) -> DomainResult<Option<DrillRunView>> {
    let now = clock::now_ms();
    let row = drill_run::Entity::find()
        .filter(drill_run::Column::Status.eq(DrillStatus::Finished))
        .order_by_desc(drill_run::Column::StartedAt)
        .one(db)
        .await?;
    Ok(row.map(|m| {
        let named = tenant.is_none_or(|t| m.tenant_id.as_deref() == Some(t));
        let mut v = view(m, now);
        if !named {
            v.actor = None;
        }
        v
    }))
}

/// Something that starts a run's execution in the background (the server
/// owns the transport; server functions and API handlers only start runs).
pub trait DrillSpawner: Send + Sync {
    fn spawn(&self, principal: Principal, run_id: String);
}
