//! A reviewer's decision on one exported bundle, named by its manifest
//! digest: stored, audited, listed; and what changed since the last bundle
//! that was approved.

use std::collections::BTreeMap;

use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, QuerySelect};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::{
    bundle::Evidence,
    export::{self, scoped_tenant_id},
};
use crate::{
    audit::{self, Change},
    auth::{Permission, Principal, Scope},
    clock, db,
    entity::{evidence_export, evidence_signoff},
    error::{DomainError, DomainResult},
    ids,
    vault::Vault,
};

pub const APPROVED: &str = "approved";
pub const REJECTED: &str = "rejected";
const MAX_COMMENT: usize = 2000;
/// A manifest digest: hex SHA-256.
pub const DIGEST_PATTERN: &str = "^[0-9a-fA-F]{64}$";

pub use views::evidence::{Difference, SignoffView, SinceApproval};

/// A sign-off as the API takes it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NewSignoff {
    /// Hex SHA-256 of the exported bundle's `manifest.json`.
    #[cfg_attr(feature = "openapi", schema(schema_with = digest_schema))]
    pub digest: String,
    #[cfg_attr(feature = "openapi", schema(schema_with = decision_schema))]
    pub decision: String,
    #[cfg_attr(feature = "openapi", schema(schema_with = comment_schema))]
    pub comment: String,
}

/// A manifest digest in the OpenAPI document.
#[cfg(feature = "openapi")]
pub fn digest_schema() -> utoipa::openapi::Object {
    crate::schema::string(DIGEST_PATTERN, None)
}

#[cfg(feature = "openapi")]
fn decision_schema() -> utoipa::openapi::Object {
    crate::schema::one_of(&[APPROVED, REJECTED])
}

#[cfg(feature = "openapi")]
fn comment_schema() -> utoipa::openapi::Object {
    crate::text::schema(MAX_COMMENT)
}

async fn view(db: &DatabaseConnection, m: evidence_signoff::Model) -> DomainResult<SignoffView> {
    let tenant = match &m.tenant_id {
        Some(id) => crate::entity::tenant::Entity::find_by_id(id.clone()).one(db).await?.map(|t| t.slug),
        None => None,
    };
    Ok(SignoffView {
        id: m.id,
        digest: m.digest,
        tenant,
        decision: m.decision,
        comment: m.comment,
        actor: m.actor,
        actor_kind: m.actor_kind,
        at: clock::rfc3339(m.at),
    })
}

/// Records a decision on an exported bundle. Refused for a digest that was
/// never exported (or that the caller cannot see).
pub async fn sign_off(db: &DatabaseConnection, principal: &Principal, new: &NewSignoff) -> DomainResult<SignoffView> {
    let decision = match new.decision.as_str() {
        d @ (APPROVED | REJECTED) => d,
        other => {
            return Err(DomainError::invalid(
                "invalid_decision",
                format!("decision must be approved or rejected, got {other:?}"),
            ));
        }
    };
    let comment = new.comment.trim();
    if crate::text::is_blank(&new.comment) {
        return Err(DomainError::invalid(
            "comment_required",
            "a sign-off needs a comment: what was reviewed, and why this decision",
        ));
    }
    if !crate::text::fits(&new.comment, MAX_COMMENT) {
        return Err(DomainError::invalid(
            "comment_too_long",
            format!("the comment must be at most {MAX_COMMENT} characters"),
        ));
    }
    let digest = new.digest.to_ascii_lowercase();
    if digest.len() != 64 || !digest.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(DomainError::invalid("invalid_digest", "digest must be the 64-hex-digit SHA-256 of manifest.json"));
    }
    let Some(export) = evidence_export::Entity::find_by_id(digest.clone()).one(db).await? else {
        return Err(DomainError::invalid(
            "unknown_digest",
            format!("no exported bundle has the digest {digest}; export one and sign off on its digest"),
        ));
    };
    // Another tenant's bundle is not found, like any resource of theirs.
    if principal.tenant_filter().is_some_and(|own| export.tenant_id.as_deref() != Some(own)) {
        return Err(DomainError::NotFound);
    }
    let auth = principal
        .authorize(Permission::SignOffEvidence, export.tenant_id.as_deref().map_or(Scope::Global, Scope::Tenant))?;
    let model = evidence_signoff::Model {
        id: ids::new_id(),
        digest: digest.clone(),
        tenant_id: export.tenant_id.clone(),
        decision: decision.to_owned(),
        comment: comment.to_owned(),
        actor: auth.actor().name().to_owned(),
        actor_kind: auth.actor().kind().to_owned(),
        at: clock::now_ms(),
    };
    let txn = db::begin_write(db).await?;
    evidence_signoff::Entity::insert(evidence_signoff::ActiveModel::from(model.clone()))
        .exec_without_returning(&txn)
        .await?;
    audit::record(
        &txn,
        auth.actor(),
        Change {
            action: "evidence.signoff",
            target_kind: "evidence",
            target_id: &digest,
            tenant_id: export.tenant_id.as_deref(),
            before: None,
            after: Some(json!({"decision": decision, "comment": comment})),
        },
    )
    .await?;
    txn.commit().await?;
    view(db, model).await
}

/// Decisions on bundles of this scope (`tenant`, or deployment-wide),
/// newest first.
pub async fn list(
    db: &DatabaseConnection,
    principal: &Principal,
    tenant: Option<&str>,
    limit: u64,
) -> DomainResult<Vec<SignoffView>> {
    let tenant_id = scoped_tenant_id(db, principal, tenant).await?;
    let mut q = evidence_signoff::Entity::find().order_by_desc(evidence_signoff::Column::At).limit(limit.clamp(1, 200));
    q = match &tenant_id {
        Some(t) => q.filter(evidence_signoff::Column::TenantId.eq(t)),
        None => q.filter(evidence_signoff::Column::TenantId.is_null()),
    };
    let mut out = Vec::new();
    for m in q.all(db).await? {
        out.push(view(db, m).await?);
    }
    Ok(out)
}

/// Compares `current` with the bundle of the last approval in its scope.
pub async fn since_last_approval(
    db: &DatabaseConnection,
    vault: &Vault,
    principal: &Principal,
    tenant: Option<&str>,
    current: &Evidence,
) -> DomainResult<SinceApproval> {
    let tenant_id = scoped_tenant_id(db, principal, tenant).await?;
    let mut q = evidence_signoff::Entity::find()
        .filter(evidence_signoff::Column::Decision.eq(APPROVED))
        .order_by_desc(evidence_signoff::Column::At);
    q = match &tenant_id {
        Some(t) => q.filter(evidence_signoff::Column::TenantId.eq(t)),
        None => q.filter(evidence_signoff::Column::TenantId.is_null()),
    };
    let Some(approval) = q.one(db).await? else { return Ok(SinceApproval { approval: None, differences: Vec::new() }) };
    let approved = export::stored(db, vault, principal, &approval.digest).await?;
    Ok(SinceApproval {
        differences: differences(&approved.evidence, current),
        approval: Some(view(db, approval).await?),
    })
}

/// Keys, constraints, retention, retry policy, the build and the
/// database's settings, side by side.
pub fn differences(before: &Evidence, after: &Evidence) -> Vec<Difference> {
    let mut out = Vec::new();
    let cred = |e: &Evidence| -> BTreeMap<String, String> {
        e.credentials
            .iter()
            .map(|k| {
                let summary = format!(
                    "{}/{} {} · {} · scope {} · owner {} · rotation {} · approved by {}",
                    k.tenant,
                    k.endpoint,
                    k.status,
                    k.event_types.join(","),
                    &k.scope_hash[..k.scope_hash.len().min(12)],
                    k.owner,
                    k.rotation_owner,
                    k.approved_by.as_deref().unwrap_or("nobody")
                );
                (k.key_id.clone(), summary)
            })
            .collect()
    };
    compare(&mut out, "credentials", cred(before), cred(after));
    let cons = |e: &Evidence| -> BTreeMap<String, String> {
        e.constraints
            .iter()
            .map(|c| (c.id.clone(), if c.present { "present".into() } else { "MISSING".into() }))
            .collect()
    };
    compare(&mut out, "constraints", cons(before), cons(after));
    let ret = |e: &Evidence| -> BTreeMap<String, String> {
        e.retention
            .endpoints
            .iter()
            .map(|r| {
                let v = format!(
                    "dedup {} · bodies {} · horizon {}",
                    crate::retention::human(r.dedup_secs),
                    crate::retention::human(r.body_secs),
                    crate::retention::human(r.horizon_secs)
                );
                (format!("{}/{}", r.tenant, r.endpoint), v)
            })
            .chain(
                e.retention
                    .horizons
                    .iter()
                    .map(|h| (format!("horizon {}", h.scheme), crate::retention::human(h.horizon_secs))),
            )
            .collect()
    };
    compare(&mut out, "retention", ret(before), ret(after));
    let pol = |e: &Evidence| -> BTreeMap<String, String> {
        e.retry_policy.iter().map(|p| (p.tenant.clone(), format!("{} (v{})", p.policy, p.version))).collect()
    };
    compare(&mut out, "retry_policy", pol(before), pol(after));
    // What the bundle is bound to: another binary, or a durability setting
    // changed since the approval. (Bundles from before these were recorded
    // have none: everything reads as new.)
    let build = |e: &Evidence| -> BTreeMap<String, String> {
        [("version", &e.build.version), ("commit", &e.build.commit), ("binary_sha256", &e.build.binary_sha256)]
            .into_iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| (k.to_owned(), v.clone()))
            .collect()
    };
    compare(&mut out, "build", build(before), build(after));
    let database = |e: &Evidence| -> BTreeMap<String, String> {
        let mut m = e.database.durability.clone();
        if !e.database.schema_version.is_empty() {
            m.insert("schema_version".into(), e.database.schema_version.clone());
        }
        m
    };
    compare(&mut out, "database", database(before), database(after));
    out
}

fn compare(
    out: &mut Vec<Difference>,
    section: &str,
    before: BTreeMap<String, String>,
    mut after: BTreeMap<String, String>,
) {
    for (subject, b) in before {
        match after.remove(&subject) {
            Some(a) if a == b => {}
            a => out.push(Difference { section: section.into(), subject, approved: Some(b), now: a }),
        }
    }
    for (subject, a) in after {
        out.push(Difference { section: section.into(), subject, approved: None, now: Some(a) });
    }
}
