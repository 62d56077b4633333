//! Dashboard figures, from rollups only (never a count over the inbox).
//!
//! Event counts and latency come from the rollup tables: the minute table
//! for the last hour (60 buckets), the hour table for 24 hours (24) and 7
//! days (168). A tenant's figures read at most one row per bucket and
//! (endpoint, outcome, reason), however many events are stored; every
//! tenant's read the [`TOTAL`] rows, one per bucket and (outcome, reason),
//! however many endpoints there are. Only the failing endpoints' panel reads
//! every endpoint's rows, and only their verification failures. The live
//! state (open quarantine, outbox backlog, keys in overlap, retry
//! policies) comes from the small operational tables, by index.

pub mod gauges;

use std::collections::{BTreeMap, HashMap};
use views::{
    ids::{KeyId, TenantSlug},
    keys::KeyStatus,
    outbox::OutboxStatus,
    quarantine::QuarantineStatus,
    roles::Permission,
    stats::{
        FailingEndpoint, KeyFailureCount, LatencyStats, OutboxStats, OutcomeSeries, OverlapKey, PolicyState,
        ReasonCount, StatsView,
    },
};

use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder,
    QuerySelect,
    sea_query::{Alias, Expr, ExprTrait, Query},
};

use crate::{
    auth::{Principal, Scope},
    clock,
    entity::{endpoint, outbox_intent, quarantine_entry, retry_policy_version, signing_key, tenant},
    error::{DomainError, DomainResult},
    ids,
    receiver::telemetry::{LATENCY, LATENCY_BOUNDS_MS, ROLLUP_TABLES, TOTAL},
    registry::tenants,
};

/// The outcomes charted, in display order.
pub const OUTCOMES: [&str; 8] = [
    "applied",
    "stale_transition",
    "duplicate",
    "quarantined",
    "verification_failed",
    "replay",
    "identity_conflict",
    "unavailable",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    Hour,
    Day,
    Week,
}

impl Window {
    pub const ALL: [Window; 3] = [Window::Hour, Window::Day, Window::Week];

    /// Omitted or empty: 24 h.
    pub fn parse(text: Option<&str>) -> DomainResult<Window> {
        match text.unwrap_or("24h") {
            "" | "24h" => Ok(Window::Day),
            "1h" => Ok(Window::Hour),
            "7d" => Ok(Window::Week),
            other => {
                Err(DomainError::invalid("invalid_window", format!("window must be 1h, 24h or 7d, got {other:?}")))
            }
        }
    }

    /// The `window` parameter's schema: empty (24 h) or a window.
    #[cfg(feature = "openapi")]
    pub fn schema() -> utoipa::openapi::Object {
        let values: Vec<&str> = std::iter::once("").chain(Window::ALL.map(Window::as_str)).collect();
        views::openapi::one_of(&values)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Window::Hour => "1h",
            Window::Day => "24h",
            Window::Week => "7d",
        }
    }

    /// (bucket length in ms, number of buckets)
    fn plan(self) -> (i64, i64) {
        match self {
            Window::Hour => (60_000, 60),
            Window::Day => (3_600_000, 24),
            Window::Week => (3_600_000, WEEK_HOURS),
        }
    }
}

/// The longest window any reader takes from the hourly rollups.
pub const WEEK_HOURS: i64 = 168;

/// Verification failures counted under keys since `from_hour`, per endpoint
/// (summed in the database), most first.
async fn key_failures(
    db: &DatabaseConnection,
    from_hour: i64,
    tenant_id: Option<&str>,
) -> DomainResult<HashMap<String, Vec<KeyFailureCount>>> {
    use crate::entity::key_failure_rollup as kf;
    let mut q = kf::Entity::find()
        .select_only()
        .column(kf::Column::EndpointId)
        .column(kf::Column::KeyId)
        .column(kf::Column::Reason)
        .column_as(Expr::cust("CAST(SUM(count) AS BIGINT)"), "n")
        .filter(kf::Column::Hour.gte(from_hour))
        .group_by(kf::Column::EndpointId)
        .group_by(kf::Column::KeyId)
        .group_by(kf::Column::Reason);
    if let Some(t) = tenant_id {
        q = q.filter(kf::Column::TenantId.eq(t));
    }
    let rows: Vec<(String, String, String, i64)> = q.into_tuple().all(db).await?;
    let mut out: HashMap<String, Vec<KeyFailureCount>> = HashMap::new();
    for (endpoint, key, reason, n) in rows {
        let stored_key: KeyId = ids::stored(&key)?;
        let keys = out.entry(endpoint).or_default();
        let pos = keys.iter().position(|k| k.key_id == key).unwrap_or_else(|| {
            keys.push(KeyFailureCount { key_id: stored_key, failures: 0, reasons: Vec::new() });
            keys.len() - 1
        });
        keys[pos].failures += n;
        keys[pos].reasons.push(ReasonCount { reason, count: n });
    }
    for keys in out.values_mut() {
        keys.sort_by_key(|k| std::cmp::Reverse(k.failures));
        for k in keys.iter_mut() {
            k.reasons.sort_by_key(|r| std::cmp::Reverse(r.count));
        }
    }
    Ok(out)
}

/// (bucket index, outcome, reason, count)
type Row = (i64, String, String, i64);

/// The rollup table a window reads and its time column.
fn table(window: Window) -> (&'static str, &'static str) {
    let (table, time_col, _) = ROLLUP_TABLES[if window == Window::Hour { 0 } else { 1 }];
    (table, time_col)
}

/// Which rollup rows a read sums.
#[derive(Clone, Copy)]
enum Rows<'a> {
    /// One tenant's, per endpoint.
    Tenant(&'a str),
    /// The [`TOTAL`] rows: every tenant's, already summed.
    Totals,
    /// Every tenant's, per endpoint (the totals left out).
    EveryEndpoint,
}

impl<'a> Rows<'a> {
    /// Per-endpoint rows of one tenant, or of all.
    fn per_endpoint(tenant_id: Option<&'a str>) -> Self {
        tenant_id.map_or(Rows::EveryEndpoint, Rows::Tenant)
    }

    /// One tenant's rows, or the totals.
    fn summed(tenant_id: Option<&'a str>) -> Self {
        tenant_id.map_or(Rows::Totals, Rows::Tenant)
    }
}

/// `SELECT <group…>, SUM(count) AS n FROM <rollups> WHERE <time> >= first
/// [AND outcome = …] AND <rows> GROUP BY <group…>`: summed in the
/// database, so at most one row per group comes back.
async fn sum_rollups(
    db: &DatabaseConnection,
    window: Window,
    first: i64,
    rows: Rows<'_>,
    outcome: Option<&str>,
    group: &[&str],
) -> DomainResult<Vec<sea_orm::QueryResult>> {
    let (table, time_col) = table(window);
    let group: Vec<Alias> = group.iter().map(|g| Alias::new(if *g == "bucket" { time_col } else { g })).collect();
    let mut q = Query::select();
    q.columns(group.clone())
        .expr_as(Expr::cust("CAST(SUM(count) AS BIGINT)"), Alias::new("n"))
        .from(Alias::new(table))
        .and_where(Expr::col(Alias::new(time_col)).gte(first))
        .group_by_columns(group);
    if let Some(o) = outcome {
        q.and_where(Expr::col(Alias::new("outcome")).eq(o));
    }
    let tenant = Expr::col(Alias::new("tenant_id"));
    q.and_where(match rows {
        Rows::Tenant(t) => tenant.eq(t),
        Rows::Totals => tenant.eq(TOTAL),
        Rows::EveryEndpoint => tenant.ne(TOTAL),
    });
    Ok(db.query_all(&q).await?)
}

/// Counts per bucket, outcome and reason, summed over endpoints.
async fn rollup_rows(
    db: &DatabaseConnection,
    window: Window,
    first: i64,
    tenant_id: Option<&str>,
) -> DomainResult<Vec<Row>> {
    let time_col = table(window).1;
    let rows = sum_rollups(db, window, first, Rows::summed(tenant_id), None, &["bucket", "outcome", "reason"]).await?;
    rows.iter()
        .map(|r| {
            Ok((
                r.try_get::<i64>("", time_col)? - first,
                r.try_get("", "outcome")?,
                r.try_get("", "reason")?,
                r.try_get("", "n")?,
            ))
        })
        .collect()
}

/// Verification failures per endpoint and reason over the window.
async fn failure_rows(
    db: &DatabaseConnection,
    window: Window,
    first: i64,
    tenant_id: Option<&str>,
) -> DomainResult<Vec<(String, String, i64)>> {
    let rows = sum_rollups(
        db,
        window,
        first,
        Rows::per_endpoint(tenant_id),
        Some("verification_failed"),
        &["endpoint_id", "reason"],
    )
    .await?;
    rows.iter().map(|r| Ok((r.try_get("", "endpoint_id")?, r.try_get("", "reason")?, r.try_get("", "n")?))).collect()
}

/// The `q` quantile (0..1) of a latency histogram keyed by bucket label.
pub fn quantile(hist: &HashMap<String, i64>, q: f64) -> Option<f64> {
    let bounds: Vec<(String, f64)> = LATENCY_BOUNDS_MS
        .iter()
        .map(|b| (format!("le_{b}"), *b as f64))
        .chain(std::iter::once(("le_inf".to_owned(), f64::INFINITY)))
        .collect();
    let total: i64 = bounds.iter().map(|(l, _)| hist.get(l).copied().unwrap_or(0)).sum();
    if total == 0 {
        return None;
    }
    let rank = q * total as f64;
    let (mut cum, mut lower) = (0i64, 0.0f64);
    for (label, upper) in bounds {
        let n = hist.get(&label).copied().unwrap_or(0);
        if n > 0 && (cum + n) as f64 >= rank {
            if upper.is_infinite() {
                return Some(lower);
            }
            return Some(lower + (upper - lower) * ((rank - cum as f64) / n as f64).clamp(0.0, 1.0));
        }
        cum += n;
        lower = upper;
    }
    Some(lower)
}

/// The dashboard for one tenant (`Some(slug)`) or every visible tenant.
pub async fn stats(
    db: &DatabaseConnection,
    principal: &Principal,
    tenant_slug: Option<&TenantSlug>,
    window: Window,
) -> DomainResult<StatsView> {
    // A clinic admin always sees its own tenant only.
    let scope_tenant: Option<tenant::Model> = match (tenant_slug, principal.tenant_filter()) {
        (Some(slug), _) => Some(tenants::find(db, principal, slug).await?),
        (None, Some(own)) => Some(tenant::Entity::find_by_id(own).one(db).await?.ok_or(DomainError::NotFound)?),
        (None, None) => None,
    };
    principal
        .authorize(Permission::ReadEvents, scope_tenant.as_ref().map_or(Scope::Global, |t| Scope::Tenant(&t.id)))?;
    let tenant_id = scope_tenant.as_ref().map(|t| t.id.as_str());

    let now = clock::now_ms();
    let (bucket_ms, buckets) = window.plan();
    let last = now / bucket_ms;
    let first = last - buckets + 1;
    let rows = rollup_rows(db, window, first, tenant_id).await?;

    let n = buckets as usize;
    let mut points: BTreeMap<&str, Vec<i64>> = OUTCOMES.iter().map(|o| (*o, vec![0; n])).collect();
    let mut reasons: HashMap<&str, BTreeMap<String, i64>> = HashMap::new();
    let mut hist: Vec<HashMap<String, i64>> = vec![HashMap::new(); n];
    let mut failures: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
    for (endpoint_id, reason, count) in failure_rows(db, window, first, tenant_id).await? {
        if !endpoint_id.is_empty() {
            *failures.entry(endpoint_id).or_default().entry(reason).or_default() += count;
        }
    }
    for (i, outcome, reason, count) in rows {
        let Some(slot) = usize::try_from(i).ok().filter(|i| *i < n) else { continue };
        if outcome == LATENCY {
            *hist[slot].entry(reason).or_default() += count;
            continue;
        }
        let Some(key) = OUTCOMES.iter().find(|o| **o == outcome) else { continue };
        points.get_mut(key).expect("every outcome has points")[slot] += count;
        if !reason.is_empty() {
            *reasons.entry(key).or_default().entry(reason).or_default() += count;
        }
    }
    let series = OUTCOMES
        .iter()
        .map(|o| {
            let pts = points.remove(o).unwrap_or_default();
            let mut rs: Vec<ReasonCount> = reasons
                .remove(o)
                .unwrap_or_default()
                .into_iter()
                .map(|(reason, count)| ReasonCount { reason, count })
                .collect();
            rs.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.reason.cmp(&b.reason)));
            OutcomeSeries { outcome: (*o).to_owned(), total: pts.iter().sum(), points: pts, reasons: rs }
        })
        .collect();

    let mut all_hist: HashMap<String, i64> = HashMap::new();
    for h in &hist {
        for (k, v) in h {
            *all_hist.entry(k.clone()).or_default() += v;
        }
    }
    let latency = LatencyStats {
        samples: all_hist.values().sum(),
        p50_ms: quantile(&all_hist, 0.5),
        p99_ms: quantile(&all_hist, 0.99),
        p50_points: hist.iter().map(|h| quantile(h, 0.5)).collect(),
        p99_points: hist.iter().map(|h| quantile(h, 0.99)).collect(),
    };

    let visible_tenants: Vec<tenant::Model> = match &scope_tenant {
        Some(t) => vec![t.clone()],
        None => {
            tenant::Entity::find()
                .filter(tenant::Column::Synthetic.eq(false))
                .order_by_asc(tenant::Column::Slug)
                .all(db)
                .await?
        }
    };
    let slug_of: HashMap<&str, &str> = visible_tenants.iter().map(|t| (t.id.as_str(), t.slug.as_str())).collect();

    let mut open_q =
        quarantine_entry::Entity::find().filter(quarantine_entry::Column::Status.eq(QuarantineStatus::Open));
    let mut backlog_q = outbox_intent::Entity::find()
        .filter(outbox_intent::Column::Status.is_in([OutboxStatus::Pending, OutboxStatus::Sending]));
    let mut dead_q = outbox_intent::Entity::find().filter(outbox_intent::Column::Status.eq(OutboxStatus::Dead));
    if let Some(t) = tenant_id {
        open_q = open_q.filter(quarantine_entry::Column::TenantId.eq(t));
        backlog_q = backlog_q.filter(outbox_intent::Column::TenantId.eq(t));
        dead_q = dead_q.filter(outbox_intent::Column::TenantId.eq(t));
    } else {
        // The drills' rows never count as anyone's backlog.
        use crate::registry::tenants::not_synthetic_tenant;
        open_q = open_q.filter(not_synthetic_tenant(quarantine_entry::Column::TenantId));
        backlog_q = backlog_q.filter(not_synthetic_tenant(outbox_intent::Column::TenantId));
        dead_q = dead_q.filter(not_synthetic_tenant(outbox_intent::Column::TenantId));
    }
    let oldest = backlog_q.clone().order_by_asc(outbox_intent::Column::CreatedAt).one(db).await?;
    let mut sampled =
        gauges::series(db, if window == Window::Hour { "minute" } else { "hour" }, first, n, tenant_id).await?;
    let outbox = OutboxStats {
        backlog: backlog_q.count(db).await?,
        oldest_pending_age_secs: oldest.map(|o| Ord::max(now - o.created_at, 0) / 1000),
        dead: dead_q.count(db).await?,
        backlog_points: sampled.remove(gauges::OUTBOX_BACKLOG).unwrap_or_default(),
        oldest_age_points: sampled.remove(gauges::OUTBOX_OLDEST_AGE_SECS).unwrap_or_default(),
    };

    // Endpoints named for the keys and failures shown.
    let mut endpoints_q = endpoint::Entity::find();
    if let Some(t) = tenant_id {
        endpoints_q = endpoints_q.filter(endpoint::Column::TenantId.eq(t));
    }
    let endpoints: HashMap<String, endpoint::Model> =
        endpoints_q.all(db).await?.into_iter().map(|e| (e.id.clone(), e)).collect();
    let mut keys_q =
        signing_key::Entity::find().filter(signing_key::Column::Status.is_in([KeyStatus::Active, KeyStatus::Retiring]));
    match tenant_id {
        Some(t) => keys_q = keys_q.filter(signing_key::Column::TenantId.eq(t)),
        None => keys_q = keys_q.filter(crate::registry::tenants::not_synthetic_tenant(signing_key::Column::TenantId)),
    }
    let live_keys = keys_q.order_by_asc(signing_key::Column::CreatedAt).all(db).await?;
    let name = |endpoint_id: &str| {
        endpoints
            .get(endpoint_id)
            .map(|e| (slug_of.get(e.tenant_id.as_str()).copied().unwrap_or("?").to_owned(), e.slug.clone()))
    };
    let mut keys_in_overlap = Vec::new();
    for k in live_keys.iter().filter(|k| k.status == KeyStatus::Retiring) {
        let Some((tenant, endpoint)) = name(&k.endpoint_id) else { continue };
        let replaced_by = live_keys.iter().find(|n| n.replaces_key_id.as_deref() == Some(k.id.as_str()));
        keys_in_overlap.push(OverlapKey {
            key_id: ids::stored(&k.id)?,
            tenant: ids::stored(&tenant)?,
            endpoint: ids::stored(&endpoint)?,
            expires_at: clock::rfc3339_opt(k.expires_at),
            expires_at_ms: k.expires_at,
            replaced_by: replaced_by.map(|n| ids::stored(&n.id)).transpose()?,
        });
    }
    let mut per_key = key_failures(db, first * bucket_ms / 3_600_000, tenant_id).await?;
    let mut failing_endpoints: Vec<FailingEndpoint> = Vec::new();
    for (endpoint_id, by_reason) in failures {
        let Some((tenant, endpoint)) = name(&endpoint_id) else { continue };
        let mut reasons: Vec<ReasonCount> =
            by_reason.into_iter().map(|(reason, count)| ReasonCount { reason, count }).collect();
        reasons.sort_by_key(|r| std::cmp::Reverse(r.count));
        failing_endpoints.push(FailingEndpoint {
            tenant,
            endpoint: ids::stored(&endpoint)?,
            failures: reasons.iter().map(|r| r.count).sum(),
            reasons,
            accepted_keys: live_keys
                .iter()
                .filter(|k| k.endpoint_id == endpoint_id)
                .map(|k| ids::stored(&k.id))
                .collect::<DomainResult<_>>()?,
            by_key: per_key.remove(&endpoint_id).unwrap_or_default(),
        });
    }
    failing_endpoints.sort_by_key(|e| std::cmp::Reverse(e.failures));

    let versions: HashMap<String, i32> = retry_policy_version::Entity::find()
        .select_only()
        .column(retry_policy_version::Column::TenantId)
        .column_as(Expr::cust("MAX(version)"), "v")
        .group_by(retry_policy_version::Column::TenantId)
        .into_tuple::<(String, i32)>()
        .all(db)
        .await?
        .into_iter()
        .collect();
    let retry_policies = visible_tenants
        .iter()
        .map(|t| {
            Ok(PolicyState {
                tenant: ids::stored(&t.slug)?,
                policy: t.retry_policy,
                version: versions.get(&t.id).copied().unwrap_or(0),
            })
        })
        .collect::<DomainResult<_>>()?;

    Ok(StatsView {
        window: window.as_str().to_owned(),
        tenant: scope_tenant.as_ref().map(|t| ids::stored(&t.slug)).transpose()?,
        bucket_secs: bucket_ms / 1000,
        start: clock::rfc3339(first * bucket_ms),
        end: clock::rfc3339((last + 1) * bucket_ms),
        now_ms: now,
        bucket_starts: (first..=last).map(|b| clock::rfc3339(b * bucket_ms)).collect(),
        series,
        latency,
        quarantine_open: open_q.count(db).await?,
        outbox,
        keys_in_overlap,
        failing_endpoints,
        retry_policies,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate_within_buckets() {
        let h: HashMap<String, i64> =
            [("le_1".to_owned(), 50), ("le_2".to_owned(), 49), ("le_inf".to_owned(), 1)].into_iter().collect();
        assert_eq!(quantile(&h, 0.5), Some(1.0));
        let p99 = quantile(&h, 0.99).unwrap();
        assert!((p99 - 2.0).abs() < 1e-9, "{p99}");
        assert_eq!(quantile(&h, 1.0), Some(5000.0), "the open bucket reports its lower bound");
        assert_eq!(quantile(&HashMap::new(), 0.5), None);
        assert!(Window::parse(Some("2h")).is_err());
        assert_eq!(Window::parse(None).unwrap(), Window::Day);
    }
}
