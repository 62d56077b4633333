//! How the deployment is run: the latest drills (and whether they still
//! count), retention, each tenant's retry policy, and the week's metrics.

use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, PaginatorTrait, QueryFilter};
use views::{
    evidence::{
        BuildEvidence, DrillEvidence, MetricsEvidence, RetentionEvidence, RetentionRow, RetryPolicyEvidence, RoleAccess,
    },
    roles::Permission,
};

use crate::{
    auth::Principal,
    entity::{audit_entry, tenant},
    error::DomainResult,
    evidence::{identity, runs},
    registry::tenants,
    retention, retry_policy,
    stats::{self, Window},
};

/// A drill run older than this no longer counts as current evidence.
pub const DRILL_STALE_DAYS: i64 = 7;
const DAY_MS: i64 = 86_400_000;

pub(super) async fn drill_evidence(
    db: &DatabaseConnection,
    scope: Option<&tenant::Model>,
    build: &BuildEvidence,
    now: i64,
) -> DomainResult<DrillEvidence> {
    let latest = runs::latest_finished(db, scope.map(|t| t.id.as_str())).await?;
    let mut reasons = Vec::new();
    if let Some(run) = &latest {
        // A run counts only for the build it ran on: an upgrade (another
        // binary, or another commit or version) needs drills again.
        if !identity::same_build(&run.version, &run.build_commit, &run.binary_sha256, build) {
            let was = match (run.build_commit.as_str(), run.binary_sha256.get(..12)) {
                ("", _) => format!("version {}, build not recorded", run.version),
                (commit, Some(sha)) if !sha.is_empty() => {
                    format!("version {}, commit {commit}, binary {sha}…", run.version)
                }
                (commit, _) => format!("version {}, commit {commit}", run.version),
            };
            reasons.push(format!(
                "the run was on another build ({was}; now version {}, commit {}, binary {}…)",
                build.version,
                build.commit,
                build.binary_sha256.get(..12).unwrap_or_default()
            ));
        }
        if now - run.started_at_ms > DRILL_STALE_DAYS * DAY_MS {
            reasons.push(format!("the run is older than {DRILL_STALE_DAYS} days"));
        }
        let schema = runs::schema_version(db).await?;
        if schema != run.schema_version {
            reasons.push(format!("the schema changed since the run ({} → {schema})", run.schema_version));
        }
        let key_changes = audit_entry::Entity::find()
            .filter(audit_entry::Column::Action.starts_with("key."))
            .filter(audit_entry::Column::At.gt(run.started_at_ms))
            .count(db)
            .await?;
        if key_changes > 0 {
            reasons.push(format!("{key_changes} key change(s) since the run"));
        }
    }
    Ok(DrillEvidence { stale: !reasons.is_empty(), stale_reasons: reasons, latest })
}

pub(super) async fn retention_evidence(
    db: &DatabaseConnection,
    principal: &Principal,
    scope: Option<&tenant::Model>,
) -> DomainResult<RetentionEvidence> {
    let o = retention::overview(db, principal).await?;
    let endpoints = o
        .endpoints
        .into_iter()
        .filter(|r| scope.is_none_or(|t| r.tenant == t.slug))
        .map(|r| RetentionRow {
            guard_holds: r.current.dedup_secs >= r.horizon_secs,
            tenant: r.tenant.into_string(),
            endpoint: r.endpoint.into_string(),
            scheme: r.scheme,
            dedup_secs: r.current.dedup_secs,
            body_secs: r.current.body_secs,
            horizon_secs: r.horizon_secs,
            effective_dedup_secs: r.effective_dedup_secs,
            manual_resend_secs: r.manual_resend_secs,
            decided_by: r.current.actor,
            decided_at: r.current.created_at,
            reason: r.current.reason,
        })
        .collect();
    Ok(RetentionEvidence { horizons: o.horizons, horizon_history: o.horizon_history, endpoints })
}

pub(super) async fn retry_evidence(
    db: &DatabaseConnection,
    principal: &Principal,
    scope: Option<&tenant::Model>,
    access: &[RoleAccess],
) -> DomainResult<Vec<RetryPolicyEvidence>> {
    let who: Vec<String> = access
        .iter()
        .filter(|a| a.permissions.iter().any(|p| p == Permission::ManageRetryPolicy.as_str()))
        .flat_map(|a| {
            let (users, tokens) = a.unnamed();
            let counted = (users + tokens > 0).then(|| {
                format!("{users} user(s) and {tokens} token(s) of role {} (not named in a tenant's bundle)", a.role)
            });
            std::iter::once(format!("role {}", a.role))
                .chain(a.holders.iter().map(|h| format!("{} {}", h.kind, h.name)))
                .chain(counted)
        })
        .collect();
    let mut out = Vec::new();
    for t in tenants::list(db, principal).await? {
        if scope.is_some_and(|s| t.slug != s.slug) {
            continue;
        }
        let v = retry_policy::get(db, principal, &t.slug).await?;
        out.push(RetryPolicyEvidence {
            open_overrides: crate::break_glass::open(db, &t.id, t.slug.as_str()).await?,
            tenant: v.tenant.into_string(),
            policy: v.policy.as_str().to_owned(),
            version: v.version,
            history: v.history,
            may_roll_back: who.clone(),
        });
    }
    Ok(out)
}

pub(super) async fn metrics_evidence(
    db: &DatabaseConnection,
    principal: &Principal,
    tenant: Option<&views::ids::TenantSlug>,
) -> DomainResult<MetricsEvidence> {
    let s = stats::stats(db, principal, tenant, Window::Week).await?;
    let series = |o: &str| s.series.iter().find(|x| x.outcome == o);
    Ok(MetricsEvidence {
        window: s.window.clone(),
        start: s.start.clone(),
        end: s.end.clone(),
        applied: series("applied").map_or(0, |x| x.total),
        duplicate_acks: series("duplicate").map_or(0, |x| x.total),
        verification_failures: series("verification_failed").map(|x| x.reasons.clone()).unwrap_or_default(),
        rollbacks: series("unavailable").map_or(0, |x| x.total),
        quarantined: series("quarantined").map(|x| x.reasons.clone()).unwrap_or_default(),
        quarantine_open: s.quarantine_open,
        outbox_backlog: s.outbox.backlog,
        outbox_oldest_pending_age_secs: s.outbox.oldest_pending_age_secs,
        outbox_dead: s.outbox.dead,
    })
}
