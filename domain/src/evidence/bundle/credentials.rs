//! The credentials section: every key with its approval, profile and
//! verification counts, and the KEK versions that seal them.

use std::collections::BTreeMap;
use views::ids::TenantSlug;
use views::{
    decision::Decision,
    evidence::{CredentialRow, KekSeals, KeyVerification},
    hmac::HmacProfile,
    keys::KeyStatus,
};

use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder};

use crate::{
    auth::Principal,
    clock,
    entity::{endpoint, kek_version, key_approval, key_failure_rollup, key_use_rollup, signing_key},
    error::DomainResult,
    registry::keys,
};

const DAY_MS: i64 = 86_400_000;

/// Hours of per-key verification counts a bundle shows: the metrics
/// section's window (`Window::Week`, 168 hourly buckets).
const VERIFICATION_WINDOW_HOURS: i64 = crate::stats::WEEK_HOURS;

pub(super) async fn kek_seals(db: &DatabaseConnection) -> DomainResult<Vec<KekSeals>> {
    let versions = kek_version::Entity::find().order_by_asc(kek_version::Column::Version).all(db).await?;
    let newest = versions.last().map(|v| v.version);
    Ok(versions
        .into_iter()
        .map(|v| KekSeals { version: v.version as u32, seals: v.seals, newest: Some(v.version) == newest })
        .collect())
}

pub(super) async fn credentials(
    db: &DatabaseConnection,
    principal: &Principal,
    tenant: Option<&TenantSlug>,
    now: i64,
) -> DomainResult<Vec<CredentialRow>> {
    let views = keys::list(db, principal, &keys::KeyFilter { tenant: tenant.cloned(), ..Default::default() }).await?;
    let ids: Vec<String> = views.iter().map(|k| k.key_id.to_string()).collect();
    let rows: BTreeMap<String, signing_key::Model> = signing_key::Entity::find()
        .filter(signing_key::Column::Id.is_in(ids.clone()))
        .all(db)
        .await?
        .into_iter()
        .map(|k| (k.id.clone(), k))
        .collect();
    // An `hmac` endpoint's keys name its profile beside the scheme.
    let endpoint_ids: Vec<String> = rows.values().map(|k| k.endpoint_id.clone()).collect();
    let profiles: BTreeMap<String, String> = endpoint::Entity::find()
        .filter(endpoint::Column::Id.is_in(endpoint_ids))
        .filter(endpoint::Column::Scheme.eq("hmac"))
        .all(db)
        .await?
        .into_iter()
        .map(|e| {
            let profile = e.hmac_profile.as_deref().and_then(|p| serde_json::from_str::<HmacProfile>(p).ok());
            (e.id, profile.map_or_else(|| "hmac (profile unreadable)".to_owned(), |p| p.describe()))
        })
        .collect();
    // The approval in force: the newest `approved` decision per key.
    let mut approvals: BTreeMap<String, key_approval::Model> = BTreeMap::new();
    for a in key_approval::Entity::find()
        .filter(key_approval::Column::KeyId.is_in(ids))
        .filter(key_approval::Column::Decision.eq(Decision::Approved))
        .order_by_asc(key_approval::Column::DecidedAt)
        .all(db)
        .await?
    {
        approvals.insert(a.key_id.clone(), a);
    }
    let mut verification = verification_counts(db, &ids_in(&rows), now).await?;
    let mut out: Vec<CredentialRow> = views
        .into_iter()
        .filter_map(|k| {
            let row = rows.get(k.key_id.as_str())?;
            let approval = approvals.get(k.key_id.as_str());
            let mut verified = verification.remove(k.key_id.as_str()).unwrap_or_default();
            verified.last_failure_at = clock::rfc3339_opt(row.last_failure_at);
            verified.last_failure_reason = row.last_failure_reason.clone();
            Some(CredentialRow {
                tenant: k.tenant.into_string(),
                endpoint: k.endpoint.into_string(),
                status: k.status.as_str().to_owned(),
                scheme: profiles.get(&row.endpoint_id).cloned().unwrap_or_else(|| k.scheme.as_str().to_owned()),
                event_types: k.event_types,
                owner: k.owner,
                rotation_owner: k.rotation_owner,
                approved_by: approval.map(|a| a.reviewer.clone()),
                approved_at: approval.map(|a| clock::rfc3339(a.decided_at)),
                scope_hash: k.scope_hash,
                scope_approved: k.scope_approved,
                kek_version: row.kek_version,
                // A sealed private key (a pair Signet generated) can sign.
                can_sign: k.credential.can_sign() || !row.secret_ciphertext.is_empty(),
                credential: k.credential.as_str().to_owned(),
                created_at: k.created_at,
                age_days: (now - row.created_at) / DAY_MS,
                last_verified_at: k.last_verified_at,
                overlap_ends_at: if row.status == KeyStatus::Retiring { k.expires_at } else { None },
                verification: verified,
                key_id: k.key_id.into_string(),
            })
        })
        .collect();
    out.sort_by(|a, b| {
        (&a.tenant, &a.endpoint, &a.created_at, &a.key_id).cmp(&(&b.tenant, &b.endpoint, &b.created_at, &b.key_id))
    });
    Ok(out)
}

fn ids_in(rows: &BTreeMap<String, signing_key::Model>) -> Vec<String> {
    rows.keys().cloned().collect()
}

/// Each key's successes and failures (by reason) over the last
/// [`VERIFICATION_WINDOW_HOURS`], summed in the database from the hourly
/// per-key rollups.
async fn verification_counts(
    db: &DatabaseConnection,
    ids: &[String],
    now: i64,
) -> DomainResult<BTreeMap<String, KeyVerification>> {
    use sea_orm::{QuerySelect, sea_query::Expr};
    let from_hour = now / 3_600_000 - VERIFICATION_WINDOW_HOURS + 1;
    let mut out: BTreeMap<String, KeyVerification> = BTreeMap::new();
    let uses: Vec<(String, i64)> = key_use_rollup::Entity::find()
        .select_only()
        .column(key_use_rollup::Column::KeyId)
        .column_as(Expr::cust("CAST(SUM(count) AS BIGINT)"), "n")
        .filter(key_use_rollup::Column::KeyId.is_in(ids.to_vec()))
        .filter(key_use_rollup::Column::Hour.gte(from_hour))
        .group_by(key_use_rollup::Column::KeyId)
        .into_tuple()
        .all(db)
        .await?;
    for (key, n) in uses {
        out.entry(key).or_default().successes = n;
    }
    let failures: Vec<(String, String, i64)> = key_failure_rollup::Entity::find()
        .select_only()
        .column(key_failure_rollup::Column::KeyId)
        .column(key_failure_rollup::Column::Reason)
        .column_as(Expr::cust("CAST(SUM(count) AS BIGINT)"), "n")
        .filter(key_failure_rollup::Column::KeyId.is_in(ids.to_vec()))
        .filter(key_failure_rollup::Column::Hour.gte(from_hour))
        .group_by(key_failure_rollup::Column::KeyId)
        .group_by(key_failure_rollup::Column::Reason)
        .into_tuple()
        .all(db)
        .await?;
    for (key, reason, count) in failures {
        let v = out.entry(key).or_default();
        v.failures += count;
        v.failures_by_reason.push(views::stats::ReasonCount { reason, count });
    }
    for v in out.values_mut() {
        v.failures_by_reason.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.reason.cmp(&b.reason)));
    }
    Ok(out)
}
