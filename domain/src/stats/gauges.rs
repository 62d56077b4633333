//! Gauge samples for the dashboards: the outbox backlog and the age of its
//! oldest pending intent, per tenant and in total (`tenant_id = ''`).
//! `signet serve` samples every 15 s; each sample raises the minute's and
//! the hour's value to the highest seen (several instances sampling the
//! same database agree). Minute samples are purged after two days with the
//! minute rollups.

use std::collections::HashMap;

use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter, QuerySelect,
    sea_query::{Alias, Expr, ExprTrait, OnConflict, Query},
};

use crate::{db, entity::outbox_intent, error::DomainResult};
use views::outbox::OutboxStatus;

pub const OUTBOX_BACKLOG: &str = "outbox_backlog";
pub const OUTBOX_OLDEST_AGE_SECS: &str = "outbox_oldest_age_secs";
const TABLE: &str = "gauge_samples";

/// Takes one sample of the outbox gauges at `now_ms`.
pub async fn sample(db: &DatabaseConnection, now_ms: i64) -> DomainResult<()> {
    let per_tenant: Vec<(String, i64, i64)> = outbox_intent::Entity::find()
        .select_only()
        .column(outbox_intent::Column::TenantId)
        .column_as(Expr::cust("CAST(COUNT(*) AS BIGINT)"), "n")
        .column_as(Expr::cust("MIN(created_at)"), "oldest")
        .filter(outbox_intent::Column::Status.is_in([OutboxStatus::Pending, OutboxStatus::Sending]))
        .filter(crate::registry::tenants::not_synthetic_tenant(outbox_intent::Column::TenantId))
        .group_by(outbox_intent::Column::TenantId)
        .into_tuple()
        .all(db)
        .await?;
    let age = |oldest: i64| Ord::max(now_ms - oldest, 0) / 1000;
    let mut values: Vec<(String, &str, i64)> = Vec::new();
    let (mut total, mut oldest_all) = (0, i64::MAX);
    for (tenant, n, oldest) in per_tenant {
        values.push((tenant.clone(), OUTBOX_BACKLOG, n));
        values.push((tenant, OUTBOX_OLDEST_AGE_SECS, age(oldest)));
        total += n;
        oldest_all = Ord::min(oldest_all, oldest);
    }
    values.push((String::new(), OUTBOX_BACKLOG, total));
    values.push((String::new(), OUTBOX_OLDEST_AGE_SECS, if total > 0 { age(oldest_all) } else { 0 }));

    let txn = db::begin_write(db).await?;
    let keep_higher =
        Expr::cust("CASE WHEN excluded.value > gauge_samples.value THEN excluded.value ELSE gauge_samples.value END");
    for (unit, bucket) in [("minute", now_ms / 60_000), ("hour", now_ms / 3_600_000)] {
        for (tenant, name, value) in &values {
            let cols = ["unit", "bucket", "tenant_id", "name"].map(Alias::new);
            let stmt = Query::insert()
                .into_table(Alias::new(TABLE))
                .columns(cols.iter().cloned().chain([Alias::new("value")]))
                .values_panic([unit.into(), bucket.into(), tenant.as_str().into(), (*name).into(), (*value).into()])
                .on_conflict(
                    OnConflict::columns([
                        Alias::new("unit"),
                        Alias::new("tenant_id"),
                        Alias::new("bucket"),
                        Alias::new("name"),
                    ])
                    .value(Alias::new("value"), keep_higher.clone())
                    .to_owned(),
                )
                .to_owned();
            txn.execute(&stmt).await?;
        }
    }
    txn.commit().await?;
    Ok(())
}

/// The highest sample of each gauge per bucket, `n` buckets from `first`
/// (0 where nothing was sampled). `tenant_id` `None` means the totals.
pub async fn series(
    db: &DatabaseConnection,
    unit: &str,
    first: i64,
    n: usize,
    tenant_id: Option<&str>,
) -> DomainResult<HashMap<String, Vec<i64>>> {
    let mut q = Query::select();
    q.columns(["bucket", "name", "value"].map(Alias::new))
        .from(Alias::new(TABLE))
        .and_where(Expr::col(Alias::new("unit")).eq(unit))
        .and_where(Expr::col(Alias::new("tenant_id")).eq(tenant_id.unwrap_or("")))
        .and_where(Expr::col(Alias::new("bucket")).gte(first));
    let mut out: HashMap<String, Vec<i64>> =
        [OUTBOX_BACKLOG, OUTBOX_OLDEST_AGE_SECS].into_iter().map(|g| (g.to_owned(), vec![0; n])).collect();
    for row in db.query_all(&q).await? {
        let (bucket, name, value): (i64, String, i64) =
            (row.try_get("", "bucket")?, row.try_get("", "name")?, row.try_get("", "value")?);
        if let (Some(points), Ok(i)) = (out.get_mut(&name), usize::try_from(bucket - first))
            && let Some(p) = points.get_mut(i)
        {
            *p = value;
        }
    }
    Ok(out)
}

/// Deletes minute samples older than `cutoff_ms`.
pub async fn purge_minutes(db: &DatabaseConnection, cutoff_ms: i64) -> DomainResult<u64> {
    purge(db, "minute", cutoff_ms / 60_000).await
}

/// Deletes hour samples older than `cutoff_ms`.
pub async fn purge_hours(db: &DatabaseConnection, cutoff_ms: i64) -> DomainResult<u64> {
    purge(db, "hour", cutoff_ms / 3_600_000).await
}

async fn purge(db: &DatabaseConnection, unit: &str, before_bucket: i64) -> DomainResult<u64> {
    let mut q = Query::delete();
    q.from_table(Alias::new(TABLE))
        .and_where(Expr::col(Alias::new("unit")).eq(unit))
        .and_where(Expr::col(Alias::new("bucket")).lt(before_bucket));
    Ok(db.execute(&q).await?.rows_affected())
}
