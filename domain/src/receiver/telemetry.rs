//! Durable per-minute and per-hour rollups and per-key usage, batched.
//!
//! The request path only bumps in-memory counters; a flusher (every few
//! seconds) writes one upsert per (minute, tenant, endpoint, outcome,
//! reason) into the minute table and one into the hour table, and one
//! update per used key. Latency is rolled up the same way, as histogram
//! buckets (outcome `latency`, reason `le_<ms>`), so dashboards compute
//! p50/p99 from a few rows. That keeps writes per event at
//! zero and avoids hot-row contention; several instances simply add their
//! deltas. A crash loses at most one flush interval of counts (never a
//! claim: claims are the source of truth for what was applied).

use std::{collections::HashMap, sync::Mutex, time::Duration};

use sea_orm::{
    sea_query::{Expr, ExprTrait, OnConflict},
    ColumnTrait, DatabaseConnection, DatabaseTransaction, EntityTrait, QueryFilter, Set,
};

use super::{cache::EndpointCtx, outcome::Outcome};
use crate::{
    clock, db,
    entity::{event_rollup, event_rollup_hourly as hourly, signing_key},
    error::DomainResult,
};

type RollupKey = (i64, String, String, &'static str, String);

/// The rollup outcome that holds latency buckets.
pub const LATENCY: &str = "latency";
/// Upper bounds (ms) of the latency buckets; slower answers fall in `le_inf`.
pub const LATENCY_BOUNDS_MS: [u64; 12] = [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000];

/// The bucket label of a latency.
pub fn latency_bucket(elapsed: Duration) -> String {
    let ms = elapsed.as_secs_f64() * 1000.0;
    LATENCY_BOUNDS_MS.iter().find(|b| ms <= **b as f64).map_or_else(|| "le_inf".to_owned(), |b| format!("le_{b}"))
}

#[derive(Default)]
pub struct Telemetry {
    rollups: Mutex<HashMap<RollupKey, i64>>,
    key_uses: Mutex<HashMap<String, (i64, i64)>>,
}

impl Telemetry {
    /// Counts one request's outcome and latency (and the key that verified it).
    pub fn record(&self, ep: Option<&EndpointCtx>, outcome: &Outcome, key_id: Option<&str>, elapsed: Duration) {
        let now = clock::now_ms();
        let (label, reason) = outcome.labels();
        let (tenant, endpoint) = ep.map(|e| (e.tenant_id.clone(), e.endpoint_id.clone())).unwrap_or_default();
        {
            let mut rollups = self.rollups.lock().unwrap_or_else(|p| p.into_inner());
            let minute = now / 60_000;
            *rollups.entry((minute, tenant.clone(), endpoint.clone(), LATENCY, latency_bucket(elapsed))).or_default() += 1;
            *rollups.entry((minute, tenant, endpoint, label, reason)).or_default() += 1;
        }
        if let Some(k) = key_id {
            let mut uses = self.key_uses.lock().unwrap_or_else(|p| p.into_inner());
            let e = uses.entry(k.to_owned()).or_default();
            e.0 += 1;
            e.1 = Ord::max(e.1, now);
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
        if !rollups.is_empty() {
            if let Err(e) = write_rollups(db, &rollups).await {
                failed = rollups;
                first_err = Some(e);
            }
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

async fn write_rollups(db: &DatabaseConnection, rollups: &HashMap<RollupKey, i64>) -> Result<(), sea_orm::DbErr> {
    let txn = db::begin_write(db).await?;
    for (key, count) in rollups {
        add_to_minute(&txn, key, *count).await?;
        add_to_hour(&txn, key, *count).await?;
    }
    txn.commit().await
}

async fn add_to_minute(db: &DatabaseTransaction, key: &RollupKey, count: i64) -> Result<(), sea_orm::DbErr> {
    let (minute, tenant, endpoint, outcome, reason) = key.clone();
    event_rollup::Entity::insert(event_rollup::ActiveModel {
        minute: Set(minute),
        tenant_id: Set(tenant),
        endpoint_id: Set(endpoint),
        outcome: Set(outcome.to_owned()),
        reason: Set(reason),
        count: Set(count),
    })
    .on_conflict(
        OnConflict::columns([
            event_rollup::Column::Minute,
            event_rollup::Column::TenantId,
            event_rollup::Column::EndpointId,
            event_rollup::Column::Outcome,
            event_rollup::Column::Reason,
        ])
        .value(event_rollup::Column::Count, Expr::col((event_rollup::Entity, event_rollup::Column::Count)).add(count))
        .to_owned(),
    )
    .exec_without_returning(db)
    .await?;
    Ok(())
}

async fn add_to_hour(db: &DatabaseTransaction, key: &RollupKey, count: i64) -> Result<(), sea_orm::DbErr> {
    let (minute, tenant, endpoint, outcome, reason) = key.clone();
    hourly::Entity::insert(hourly::ActiveModel {
        hour: Set(minute / 60),
        tenant_id: Set(tenant),
        endpoint_id: Set(endpoint),
        outcome: Set(outcome.to_owned()),
        reason: Set(reason),
        count: Set(count),
    })
    .on_conflict(
        OnConflict::columns([
            hourly::Column::Hour,
            hourly::Column::TenantId,
            hourly::Column::EndpointId,
            hourly::Column::Outcome,
            hourly::Column::Reason,
        ])
        .value(hourly::Column::Count, Expr::col((hourly::Entity, hourly::Column::Count)).add(count))
        .to_owned(),
    )
    .exec_without_returning(db)
    .await?;
    Ok(())
}
