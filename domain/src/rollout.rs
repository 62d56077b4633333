//! The rollout order (docs/architecture.md#rollout-order-and-sign-off) as a
//! gate (issue 23 item 3): retries are enabled for a tenant only once
//! - a drill run passed on this build (same binary, or same version and
//!   commit when either side has no hash) and this schema, within
//!   [`Rollout::drill_max_age_days`]; and
//! - an approved bundle covers the tenant's current keys: every live key
//!   (`active`, or `retiring` inside its overlap) appears in the bundle's
//!   credential map with the same key id and the same scope hash. The
//!   bundle is the tenant's or a deployment-wide one, among the newest
//!   [`APPROVALS_READ`] approvals, and it is re-verified (digest and
//!   signature) before it counts. A tenant with no live key still needs
//!   one approved bundle.
//!
//! Schemes: a run records the signature schemes its `scheme_verification`
//! drill verified (`drill_runs.schemes`; [`crate::evidence::scheme_drill`]).
//! Every scheme of the cohort's endpoints (enabled or not: enabling an
//! endpoint is not gated) must be covered by some counting run, or the
//! refusal names the scheme and the endpoints using it. Runs stored before
//! schemes were recorded signed with standard-webhooks only and count for
//! that scheme alone.
//!
//! Disabling retries is never gated: it is the rollback switch.

use std::collections::{BTreeMap, BTreeSet};
use views::{decision::Decision, evidence::DrillStatus, keys::KeyStatus};

use sea_orm::{ColumnTrait, Condition, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, QuerySelect};

use crate::{
    clock,
    entity::{drill_run, endpoint, evidence_export, evidence_signoff, signing_key, tenant},
    error::{DomainError, DomainResult},
    evidence::{identity, record, runs},
    vault::Vault,
};

/// The default of `SIGNET_ROLLOUT_DRILL_MAX_AGE_DAYS`.
pub const DEFAULT_DRILL_MAX_AGE_DAYS: u32 = 7;
/// Approvals read per tenant, newest first.
pub const APPROVALS_READ: u64 = 20;
const DAY_MS: i64 = 86_400_000;
/// Endpoints named per uncovered scheme in a refusal.
const ENDPOINTS_NAMED: usize = 10;

/// What the gate needs: the vault (to re-verify approved bundles) and the
/// drill age limit.
#[derive(Clone, Copy)]
pub struct Rollout<'a> {
    pub vault: &'a Vault,
    pub drill_max_age_days: u32,
}

/// Refuses (409 `rollout_order`) unless every tenant in `cohort` meets the
/// rollout order, naming everything that is missing.
pub async fn check(db: &DatabaseConnection, gate: &Rollout<'_>, cohort: &[tenant::Model]) -> DomainResult<()> {
    let missing = missing(db, gate, cohort).await?;
    if missing.is_empty() {
        return Ok(());
    }
    Err(refusal(&missing))
}

/// The 409 `rollout_order` naming what is missing.
pub fn refusal(missing: &[String]) -> DomainError {
    DomainError::conflict(
        "rollout_order",
        format!("retries cannot be enabled before drills and review: {}", missing.join("; ")),
    )
}

/// Everything the rollout order still needs for `cohort` (empty when met).
pub async fn missing(
    db: &DatabaseConnection,
    gate: &Rollout<'_>,
    cohort: &[tenant::Model],
) -> DomainResult<Vec<String>> {
    let mut missing = drill_missing(db, gate, &schemes_in_use(db, cohort).await?).await?;
    for t in cohort {
        if let Some(why) = approval_missing(db, gate.vault, t).await? {
            missing.push(why);
        }
    }
    Ok(missing)
}

/// Each scheme the cohort's endpoints use, with those endpoints
/// (`tenant/endpoint`).
async fn schemes_in_use(
    db: &DatabaseConnection,
    cohort: &[tenant::Model],
) -> DomainResult<BTreeMap<String, Vec<String>>> {
    let slugs: BTreeMap<&str, &str> = cohort.iter().map(|t| (t.id.as_str(), t.slug.as_str())).collect();
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let rows = endpoint::Entity::find()
        .filter(endpoint::Column::TenantId.is_in(slugs.keys().copied()))
        .order_by_asc(endpoint::Column::Slug)
        .all(db)
        .await?;
    for e in rows {
        let tenant = slugs.get(e.tenant_id.as_str()).copied().unwrap_or_default();
        out.entry(e.scheme).or_default().push(format!("{tenant}/{}", e.slug));
    }
    Ok(out)
}

/// Why no drill run counts, and each scheme in use that no counting run
/// covered; empty when runs cover them all.
async fn drill_missing(
    db: &DatabaseConnection,
    gate: &Rollout<'_>,
    in_use: &BTreeMap<String, Vec<String>>,
) -> DomainResult<Vec<String>> {
    let build = identity::current().await;
    let schema = runs::schema_version(db).await?;
    let since = clock::now_ms() - i64::from(gate.drill_max_age_days) * DAY_MS;
    let passed = drill_run::Entity::find()
        .filter(drill_run::Column::Status.eq(DrillStatus::Finished))
        .filter(drill_run::Column::Passed.eq(true))
        .filter(drill_run::Column::FinishedAt.gte(since))
        .order_by_desc(drill_run::Column::FinishedAt)
        .limit(200)
        .all(db)
        .await?;
    let counting: Vec<&drill_run::Model> = passed
        .iter()
        .filter(|r| {
            r.schema_version == schema && identity::same_build(&r.version, &r.build_commit, &r.binary_sha256, &build)
        })
        .collect();
    if counting.is_empty() {
        return Ok(vec![format!(
            "no drill run passed on this build (version {}, commit {}, binary {}…) and schema {schema} in the last \
             {} days (run `signet drill run`)",
            build.version,
            build.commit,
            build.binary_sha256.get(..12).unwrap_or_default(),
            gate.drill_max_age_days
        )]);
    }
    let covered: BTreeSet<String> =
        counting.iter().flat_map(|r| runs::recorded_schemes(r.schemes.as_deref())).collect();
    Ok(in_use
        .iter()
        .filter(|(scheme, _)| !covered.contains(*scheme))
        .map(|(scheme, endpoints)| {
            let more = endpoints.len().saturating_sub(ENDPOINTS_NAMED);
            let more = if more > 0 { format!(" and {more} more") } else { String::new() };
            format!(
                "no drill run that counts verified the {scheme} scheme (used by {}{more}); run `signet drill run` on \
                 this build",
                endpoints.iter().take(ENDPOINTS_NAMED).cloned().collect::<Vec<_>>().join(", ")
            )
        })
        .collect())
}

/// Why no approved bundle covers `t`'s live keys, or `None` when one does.
async fn approval_missing(db: &DatabaseConnection, vault: &Vault, t: &tenant::Model) -> DomainResult<Option<String>> {
    let now = clock::now_ms();
    let live: BTreeMap<String, String> = signing_key::Entity::find()
        .filter(signing_key::Column::TenantId.eq(&t.id))
        .filter(signing_key::Column::Status.is_in([KeyStatus::Active, KeyStatus::Retiring]))
        .all(db)
        .await?
        .into_iter()
        .filter(|k| k.status == KeyStatus::Active || k.expires_at.is_none_or(|e| e > now))
        .map(|k| (k.id, k.scope_hash))
        .collect();
    let approvals = evidence_signoff::Entity::find()
        .filter(evidence_signoff::Column::Decision.eq(Decision::Approved))
        .filter(
            Condition::any()
                .add(evidence_signoff::Column::TenantId.eq(&t.id))
                .add(evidence_signoff::Column::TenantId.is_null()),
        )
        .order_by_desc(evidence_signoff::Column::At)
        .limit(APPROVALS_READ)
        .all(db)
        .await?;
    if approvals.is_empty() {
        return Ok(Some(format!(
            "{}: no approved evidence bundle (export one and have a reviewer approve it)",
            t.slug
        )));
    }
    // The keys the newest approval leaves out are the ones named.
    let mut uncovered_in_newest: Option<Vec<String>> = None;
    for a in approvals {
        let Some(row) = evidence_export::Entity::find_by_id(a.digest.clone()).one(db).await? else { continue };
        let bundle = record::verified(db, vault, row).await?;
        let approved: BTreeMap<&str, &str> = bundle
            .evidence
            .credentials
            .iter()
            .filter(|c| c.tenant == t.slug)
            .map(|c| (c.key_id.as_str(), c.scope_hash.as_str()))
            .collect();
        let uncovered: Vec<String> = live
            .iter()
            .filter(|(id, hash)| approved.get(id.as_str()) != Some(&hash.as_str()))
            .map(|(id, _)| id.clone())
            .collect();
        if uncovered.is_empty() {
            return Ok(None);
        }
        uncovered_in_newest.get_or_insert(uncovered);
    }
    Ok(Some(format!(
        "{}: no approved bundle covers its current keys (not in the newest approved bundle with their current \
         scope: {})",
        t.slug,
        uncovered_in_newest.unwrap_or_default().join(", ")
    )))
}
