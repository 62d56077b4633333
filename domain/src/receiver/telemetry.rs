//! Durable per-minute and per-hour rollups and per-key usage, batched.
//!
//! The request path only bumps in-memory counters; a flusher (every few
//! seconds) writes one upsert per (minute, tenant, endpoint, outcome,
//! reason) into the minute table and one into the hour table, the same for
//! the [`TOTAL`] row of each (minute, outcome, reason), and one update per
//! used key. Latency is rolled up the same way, as histogram
//! buckets (outcome `latency`, reason `le_<ms>`), so dashboards compute
//! p50/p99 from a few rows. That keeps writes per event at
//! zero and hot rows off the request path; several instances simply add
//! their deltas. A crash loses at most one flush interval of counts (never a
//! claim: claims are the source of truth for what was applied).

use std::{
    collections::{BTreeMap, HashMap},
    sync::Mutex,
    time::Duration,
};

use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, DatabaseTransaction, EntityTrait, QueryFilter,
    sea_query::{Alias, Expr, ExprTrait, OnConflict, Query},
};

use super::{cache::EndpointCtx, outcome::Outcome};
use crate::{
    clock, db,
    entity::{key_failure_rollup, key_use_rollup, signing_key},
    error::DomainResult,
};

/// (minute, or a table's bucket when written; tenant id, endpoint id, outcome, reason).
type RollupKey = (i64, String, String, &'static str, String);
/// (hour, key id, tenant id, endpoint id, reason).
type KeyFailureKey = (i64, String, String, String, String);
/// (hour, key id, tenant id, endpoint id).
type KeyUseKey = (i64, String, String, String);

/// The rollup outcome that holds latency buckets.
pub const LATENCY: &str = "latency";
/// Upper bounds (ms) of the latency buckets; slower answers fall in `le_inf`.
pub const LATENCY_BOUNDS_MS: [u64; 12] = [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000];

/// The bucket label of a latency.
pub fn latency_bucket(elapsed: Duration) -> String {
    let ms = elapsed.as_secs_f64() * 1000.0;
    LATENCY_BOUNDS_MS.iter().find(|b| ms <= **b as f64).map_or_else(|| "le_inf".to_owned(), |b| format!("le_{b}"))
}

/// Failures counted under one key since the last flush: how many, and the
/// latest one's time and reason.
#[derive(Default, Clone)]
struct KeyFailures {
    count: i64,
    last_at: i64,
    last_reason: String,
}

#[derive(Default)]
pub struct Telemetry {
    rollups: Mutex<HashMap<RollupKey, i64>>,
    key_uses: Mutex<HashMap<String, (i64, i64)>>,
    // Ordered maps, so each flush's transaction writes its rows in key
    // order: two instances flushing the same key's rows at once then lock
    // them in the same order and cannot deadlock (as `write_rollups` does).
    key_failure_rollups: Mutex<BTreeMap<KeyFailureKey, i64>>,
    key_failures: Mutex<BTreeMap<String, KeyFailures>>,
    key_use_rollups: Mutex<BTreeMap<KeyUseKey, i64>>,
}

fn tenant_of(ep: Option<&EndpointCtx>) -> String {
    ep.map(|e| e.tenant_id.clone()).unwrap_or_default()
}

fn endpoint_of(ep: Option<&EndpointCtx>) -> String {
    ep.map(|e| e.endpoint_id.clone()).unwrap_or_default()
}

impl Telemetry {
    /// Counts one request's outcome and latency, and the key it is counted
    /// under (the one that verified, or the one a failed verification is
    /// attributed to: see `pipeline::process`).
    pub fn record(&self, ep: Option<&EndpointCtx>, outcome: &Outcome, key_id: Option<&str>, elapsed: Duration) {
        let now = clock::now_ms();
        let (label, reason) = outcome.labels();
        let (tenant, endpoint) = ep.map(|e| (e.tenant_id.clone(), e.endpoint_id.clone())).unwrap_or_default();
        let failed = label == "verification_failed";
        if let (true, Some(k)) = (failed, key_id) {
            *self
                .key_failure_rollups
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry((now / 3_600_000, k.to_owned(), tenant.clone(), endpoint.clone(), reason.clone()))
                .or_default() += 1;
            let mut failures = self.key_failures.lock().unwrap_or_else(|p| p.into_inner());
            let f = failures.entry(k.to_owned()).or_default();
            f.count += 1;
            if now >= f.last_at {
                (f.last_at, f.last_reason) = (now, reason.clone());
            }
        }
        {
            let mut rollups = self.rollups.lock().unwrap_or_else(|p| p.into_inner());
            let minute = now / 60_000;
            *rollups
                .entry((minute, tenant.clone(), endpoint.clone(), LATENCY, latency_bucket(elapsed)))
                .or_default() += 1;
            *rollups.entry((minute, tenant, endpoint, label, reason)).or_default() += 1;
        }
        if let (false, Some(k)) = (failed, key_id) {
            {
                let mut uses = self.key_uses.lock().unwrap_or_else(|p| p.into_inner());
                let e = uses.entry(k.to_owned()).or_default();
                e.0 += 1;
                e.1 = Ord::max(e.1, now);
            }
            *self
                .key_use_rollups
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry((now / 3_600_000, k.to_owned(), tenant_of(ep), endpoint_of(ep)))
                .or_default() += 1;
        }
    }

    /// Writes the accumulated counts. On failure they are kept for the next
    /// flush.
    pub async fn flush(&self, db: &DatabaseConnection) -> DomainResult<()> {
        let rollups = std::mem::take(&mut *self.rollups.lock().unwrap_or_else(|p| p.into_inner()));
        let mut failed = HashMap::new();
        let mut first_err = None;
        // Minute and hour rows in one transaction: a failed flush is kept
        // whole for the next one, so nothing is counted twice or lost.
        if !rollups.is_empty()
            && let Err(e) = write_rollups(db, &rollups).await
        {
            failed = rollups;
            first_err = Some(e);
        }
        let uses = std::mem::take(&mut *self.key_uses.lock().unwrap_or_else(|p| p.into_inner()));
        let mut failed_uses = HashMap::new();
        for (key_id, (n, last)) in uses {
            let res = signing_key::Entity::update_many()
                .col_expr(signing_key::Column::VerifiedCount, Expr::col(signing_key::Column::VerifiedCount).add(n))
                .col_expr(signing_key::Column::LastVerifiedAt, Expr::value(last))
                .filter(signing_key::Column::Id.eq(&key_id))
                .exec(db)
                .await;
            if let Err(e) = res {
                failed_uses.insert(key_id, (n, last));
                first_err.get_or_insert(e);
            }
        }
        if !failed.is_empty() {
            let mut r = self.rollups.lock().unwrap_or_else(|p| p.into_inner());
            for (k, v) in failed {
                *r.entry(k).or_default() += v;
            }
        }
        if let Err(e) = self.flush_key_failures(db).await {
            first_err.get_or_insert(e);
        }
        if !failed_uses.is_empty() {
            let mut u = self.key_uses.lock().unwrap_or_else(|p| p.into_inner());
            for (k, (n, last)) in failed_uses {
                let e = u.entry(k).or_default();
                e.0 += n;
                e.1 = Ord::max(e.1, last);
            }
        }
        match first_err {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }
}

impl Telemetry {
    /// Writes the per-key counts (hourly failure and success rollups and
    /// each key's latest failure) in one transaction; on failure they are
    /// kept whole.
    async fn flush_key_failures(&self, db: &DatabaseConnection) -> Result<(), sea_orm::DbErr> {
        let rollups = std::mem::take(&mut *self.key_failure_rollups.lock().unwrap_or_else(|p| p.into_inner()));
        let failures = std::mem::take(&mut *self.key_failures.lock().unwrap_or_else(|p| p.into_inner()));
        let uses = std::mem::take(&mut *self.key_use_rollups.lock().unwrap_or_else(|p| p.into_inner()));
        if rollups.is_empty() && failures.is_empty() && uses.is_empty() {
            return Ok(());
        }
        let result = async {
            let txn = db::begin_write(db).await?;
            for ((hour, key, tenant, endpoint), count) in &uses {
                let stmt = Query::insert()
                    .into_table(key_use_rollup::Entity)
                    .columns([
                        key_use_rollup::Column::Hour,
                        key_use_rollup::Column::KeyId,
                        key_use_rollup::Column::TenantId,
                        key_use_rollup::Column::EndpointId,
                        key_use_rollup::Column::Count,
                    ])
                    .values_panic([
                        (*hour).into(),
                        key.as_str().into(),
                        tenant.as_str().into(),
                        endpoint.as_str().into(),
                        (*count).into(),
                    ])
                    .on_conflict(
                        // The keys hold the tenant on both engines (every key of a
                        // table to be distributed by tenant must; m20261206_000100,
                        // m20261206_000190).
                        OnConflict::columns([
                            key_use_rollup::Column::Hour,
                            key_use_rollup::Column::TenantId,
                            key_use_rollup::Column::KeyId,
                        ])
                        .value(
                            key_use_rollup::Column::Count,
                            Expr::col((key_use_rollup::Entity, key_use_rollup::Column::Count)).add(*count),
                        )
                        .to_owned(),
                    )
                    .to_owned();
                txn.execute(&stmt).await?;
            }
            for ((hour, key, tenant, endpoint, reason), count) in &rollups {
                let stmt = Query::insert()
                    .into_table(key_failure_rollup::Entity)
                    .columns([
                        key_failure_rollup::Column::Hour,
                        key_failure_rollup::Column::KeyId,
                        key_failure_rollup::Column::TenantId,
                        key_failure_rollup::Column::EndpointId,
                        key_failure_rollup::Column::Reason,
                        key_failure_rollup::Column::Count,
                    ])
                    .values_panic([
                        (*hour).into(),
                        key.as_str().into(),
                        tenant.as_str().into(),
                        endpoint.as_str().into(),
                        reason.as_str().into(),
                        (*count).into(),
                    ])
                    .on_conflict(
                        OnConflict::columns([
                            key_failure_rollup::Column::Hour,
                            key_failure_rollup::Column::TenantId,
                            key_failure_rollup::Column::KeyId,
                            key_failure_rollup::Column::Reason,
                        ])
                        .value(
                            key_failure_rollup::Column::Count,
                            Expr::col((key_failure_rollup::Entity, key_failure_rollup::Column::Count)).add(*count),
                        )
                        .to_owned(),
                    )
                    .to_owned();
                txn.execute(&stmt).await?;
            }
            for (key, f) in &failures {
                // Another instance may have written a later failure already.
                let newer = Expr::col(signing_key::Column::LastFailureAt)
                    .is_null()
                    .or(Expr::col(signing_key::Column::LastFailureAt).lt(f.last_at));
                let latest = |mine: sea_orm::Value, column: signing_key::Column| {
                    Expr::case(newer.clone(), Expr::value(mine)).finally(Expr::col(column))
                };
                signing_key::Entity::update_many()
                    .col_expr(
                        signing_key::Column::FailureCount,
                        Expr::col(signing_key::Column::FailureCount).add(f.count),
                    )
                    .col_expr(
                        signing_key::Column::LastFailureAt,
                        latest(Some(f.last_at).into(), signing_key::Column::LastFailureAt).into(),
                    )
                    .col_expr(
                        signing_key::Column::LastFailureReason,
                        latest(Some(f.last_reason.clone()).into(), signing_key::Column::LastFailureReason).into(),
                    )
                    .filter(signing_key::Column::Id.eq(key))
                    .exec(&txn)
                    .await?;
            }
            txn.commit().await
        }
        .await;
        if result.is_err() {
            let mut u = self.key_use_rollups.lock().unwrap_or_else(|p| p.into_inner());
            for (k, v) in uses {
                *u.entry(k).or_default() += v;
            }
            drop(u);
            let mut r = self.key_failure_rollups.lock().unwrap_or_else(|p| p.into_inner());
            for (k, v) in rollups {
                *r.entry(k).or_default() += v;
            }
            let mut kf = self.key_failures.lock().unwrap_or_else(|p| p.into_inner());
            for (k, f) in failures {
                let e = kf.entry(k).or_default();
                e.count += f.count;
                if f.last_at >= e.last_at {
                    (e.last_at, e.last_reason) = (f.last_at, f.last_reason);
                }
            }
        }
        result
    }
}

/// The rollup tables and their time column, in minutes per unit.
pub(crate) const ROLLUP_TABLES: [(&str, &str, i64); 2] =
    [("event_rollups", "minute", 1), ("event_rollups_hourly", "hour", 60)];

/// The `tenant_id` and `endpoint_id` of a rollup row that sums every
/// tenant's and endpoint's rows of its bucket, outcome and reason, so the
/// all-tenants dashboard reads one row per bucket however many endpoints
/// there are. No tenant or endpoint id is `*` (ids are UUIDs); `''` is
/// taken by requests that named no known endpoint.
pub const TOTAL: &str = "*";

async fn write_rollups(db: &DatabaseConnection, rollups: &HashMap<RollupKey, i64>) -> Result<(), sea_orm::DbErr> {
    let txn = db::begin_write(db).await?;
    for (table, time_col, minutes) in ROLLUP_TABLES {
        // Summed per row of this table and written in key order: one upsert
        // per row, and two instances flushing at once lock the rows they
        // share (the totals always) in the same order, so neither waits on
        // the other in a cycle. The totals go in the same transaction as the
        // rows they sum, so the two never disagree.
        let mut rows: BTreeMap<RollupKey, i64> = BTreeMap::new();
        for ((minute, tenant, endpoint, outcome, reason), count) in rollups {
            for (t, e) in [(tenant.as_str(), endpoint.as_str()), (TOTAL, TOTAL)] {
                *rows.entry((minute / minutes, t.to_owned(), e.to_owned(), outcome, reason.clone())).or_default() +=
                    count;
            }
        }
        for (key, count) in &rows {
            add_to(&txn, table, time_col, key, *count).await?;
        }
    }
    txn.commit().await
}

/// `count = count + delta` for one rollup row, inserting it if new.
async fn add_to(
    txn: &DatabaseTransaction,
    table: &str,
    time_col: &str,
    key: &RollupKey,
    count: i64,
) -> Result<(), sea_orm::DbErr> {
    let (bucket, tenant, endpoint, outcome, reason) = key;
    let cols = [time_col, "tenant_id", "endpoint_id", "outcome", "reason"].map(Alias::new);
    let stmt = Query::insert()
        .into_table(Alias::new(table))
        .columns(cols.iter().cloned().chain([Alias::new("count")]))
        .values_panic([
            (*bucket).into(),
            tenant.as_str().into(),
            endpoint.as_str().into(),
            (*outcome).into(),
            reason.as_str().into(),
            count.into(),
        ])
        .on_conflict(
            OnConflict::columns(cols)
                .value(Alias::new("count"), Expr::col((Alias::new(table), Alias::new("count"))).add(count))
                .to_owned(),
        )
        .to_owned();
    txn.execute(&stmt).await?;
    Ok(())
}
