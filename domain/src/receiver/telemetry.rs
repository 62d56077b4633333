//! Durable per-minute rollups and per-key usage, batched.
//!
//! The request path only bumps in-memory counters; a flusher (every few
//! seconds) writes one upsert per (minute, tenant, endpoint, outcome,
//! reason) and one update per used key. That keeps writes per event at
//! zero and avoids hot-row contention; several instances simply add their
//! deltas. A crash loses at most one flush interval of counts (never a
//! claim: claims are the source of truth for what was applied).

use std::{collections::HashMap, sync::Mutex};

use sea_orm::{
    sea_query::{Expr, ExprTrait, OnConflict},
    ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, Set,
};

use super::{cache::EndpointCtx, outcome::Outcome};
use crate::{
    clock,
    entity::{event_rollup, signing_key},
    error::DomainResult,
};

type RollupKey = (i64, String, String, &'static str, String);

#[derive(Default)]
pub struct Telemetry {
    rollups: Mutex<HashMap<RollupKey, i64>>,
    key_uses: Mutex<HashMap<String, (i64, i64)>>,
}

impl Telemetry {
    /// Counts one request's outcome (and the key that verified it).
    pub fn record(&self, ep: Option<&EndpointCtx>, outcome: &Outcome, key_id: Option<&str>) {
        let now = clock::now_ms();
        let (label, reason) = outcome.labels();
        let (tenant, endpoint) = ep.map(|e| (e.tenant_id.clone(), e.endpoint_id.clone())).unwrap_or_default();
        *self.rollups.lock().unwrap_or_else(|p| p.into_inner()).entry((now / 60_000, tenant, endpoint, label, reason)).or_default() += 1;
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
        for (key, count) in rollups {
            let (minute, tenant, endpoint, outcome, reason) = key.clone();
            let res = event_rollup::Entity::insert(event_rollup::ActiveModel {
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
            .await;
            if let Err(e) = res {
                failed.insert(key, count);
                first_err.get_or_insert(e);
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
