//! The rewrap job's runner: one window of rows at a time, each window's
//! reseals and the job's cursor committed together.

use std::sync::Arc;

use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, DbErr, EntityTrait, QueryFilter,
    sea_query::{Alias, Expr, ExprTrait, Order, Query},
};
use serde_json::json;
use views::{jobs::RunStatus, kek::RewrapView};

use super::{
    admin::kek_change,
    sources::{SOURCES, key_tuple, key_values, value_tuple},
    status::written,
};
use crate::{
    audit, clock,
    crypto::{CryptoError, kek_version_of},
    db,
    entity::kek_rewrap as job,
    error::{DomainError, DomainResult},
    jobs::{self, Runs},
    receiver::faults::Faults,
    vault::Vault,
};

/// Rows read per window of a rewrap.
pub const WINDOW: u64 = 1000;

/// A job's `source` once every source is done.
const DONE: &str = "done";

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
                if let Some(pause) = faults.stall_kek_window.filter(|_| v.status == RunStatus::Running) {
                    tokio::time::sleep(pause).await;
                }
                if v.status != RunStatus::Running {
                    return Ok(v);
                }
            }
            Ok(None) => {
                let j = job::Entity::find_by_id(id.to_owned()).one(db).await?.ok_or(DomainError::NotFound)?;
                return Ok(written(j));
            }
            Err(e) => {
                tracing::error!(job = %id, error = %e, "KEK rewrap failed");
                jobs::fail::<job::Entity>(db, id, &runner, &e).await?;
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
    if !job::Entity::run(&j).runs_as(runner) {
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
        .map_err(|e| DbErr::Custom(format!("bad rewrap cursor: {e}")))?
        // A cursor of another key (a job started before this source's key
        // changed, m20261207_000220): the source again from its start;
        // rows already under the newest version are skipped.
        .filter(|c: &Vec<String>| c.len() == source.pk.len());
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
        q.and_where(key_tuple(source).gt(value_tuple(source, after)?));
    }
    if let Some(only) = source.sealed_rows() {
        q.and_where(only);
    }
    let rows = txn.query_all(&q).await?;
    let Some(last) = rows.last().map(|r| key_values(source, r)).transpose()? else {
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
        let pk = key_values(source, row)?;
        let update = Query::update()
            .table(Alias::new(source.table))
            .value(Alias::new(source.column), resealed)
            .value(Alias::new("kek_version"), version)
            .and_where(key_tuple(source).eq(value_tuple(source, &pk)?))
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
    let txn = db::begin_write(db).await?;
    let done = jobs::finish::<job::Entity, _>(&txn, &j.id, Some(&j.runner)).await?;
    if done {
        let after = json!({"job": j.id, "scanned": j.scanned, "rewrapped": j.rewrapped});
        let version = j.target_version.to_string();
        audit::record(&txn, &crate::auth::Actor::System, kek_change("kek.rewrap.finish", &version, None, after))
            .await?;
    }
    txn.commit().await?;
    let j = job::Entity::find_by_id(j.id.clone()).one(db).await?.ok_or(DomainError::NotFound)?;
    Ok(written(j))
}
