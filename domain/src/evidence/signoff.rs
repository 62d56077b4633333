//! A reviewer's decision on one exported bundle, named by its manifest
//! digest: stored, audited, listed; and what changed since the last bundle
//! that was approved.
//!
//! Integrity of a sign-off (issue 23 item 4):
//! - only the newest bundle of its scope can be signed (`stale_bundle`), so
//!   an old bundle never becomes the baseline of "what changed";
//! - the bundle is re-verified (digest and signature) before it is signed;
//! - approving a bundle with critical findings names each critical finding
//!   id with the reviewer's comment (`unacknowledged_findings`);
//! - one reviewer signs a bundle once: a unique index decides
//!   (`already_signed`), not a read before the insert.

use std::collections::{BTreeMap, BTreeSet};

use sea_orm::{ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, QuerySelect};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::export::{self, scoped_tenant_id};
use crate::{
    audit::{self, Change},
    auth::{Principal, Scope},
    clock, db,
    entity::{evidence_export, evidence_signoff},
    error::{DomainError, DomainResult},
    ids,
    vault::Vault,
};
use views::ids::{Digest, TenantSlug};
use views::{
    decision::Decision,
    evidence::{Acknowledgement, Difference, Evidence, SignoffView, SinceApproval},
    roles::Permission,
};

const MAX_COMMENT: usize = 2000;
/// At most this many acknowledgements in one sign-off.
pub const MAX_ACKNOWLEDGEMENTS: usize = 100;
const MAX_FINDING_ID: usize = 64;

/// A sign-off as the API takes it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NewSignoff {
    /// Hex SHA-256 of the exported bundle's `manifest.json`.
    #[cfg_attr(feature = "openapi", schema(schema_with = views::ids::digest_schema))]
    pub digest: String,
    #[cfg_attr(feature = "openapi", schema(schema_with = decision_schema))]
    pub decision: String,
    #[cfg_attr(feature = "openapi", schema(schema_with = comment_schema))]
    pub comment: String,
    /// The reviewer's word on the bundle's findings, one per finding id.
    /// Approving a bundle with critical findings needs one for each
    /// critical finding id (422 `unacknowledged_findings` names the missing).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_items = 100))]
    pub acknowledge: Vec<NewAcknowledgement>,
}

/// One finding acknowledged in a sign-off.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NewAcknowledgement {
    /// A finding `id` of the bundle (for example `drill_failed`); it covers
    /// every finding of that id. An id the bundle does not carry answers 422
    /// `unknown_finding`.
    #[cfg_attr(feature = "openapi", schema(schema_with = finding_schema))]
    pub finding: String,
    /// Why the reviewer accepts it (required).
    #[cfg_attr(feature = "openapi", schema(schema_with = comment_schema))]
    pub comment: String,
}

#[cfg(feature = "openapi")]
fn finding_schema() -> utoipa::openapi::Object {
    views::openapi::string("^[a-z0-9_]+$", Some(MAX_FINDING_ID))
}

#[cfg(feature = "openapi")]
fn decision_schema() -> utoipa::openapi::Object {
    let words: Vec<&str> = Decision::ALL.iter().map(|d| d.as_str()).collect();
    views::openapi::one_of(&words)
}

#[cfg(feature = "openapi")]
fn comment_schema() -> utoipa::openapi::Object {
    crate::text::schema(MAX_COMMENT)
}

async fn view(db: &DatabaseConnection, m: evidence_signoff::Model) -> DomainResult<SignoffView> {
    let tenant = match &m.tenant_id {
        Some(id) => crate::entity::tenant::Entity::find_by_id(id.clone())
            .one(db)
            .await?
            .map(|t| ids::stored(&t.slug))
            .transpose()?,
        None => None,
    };
    let acknowledged = serde_json::from_str(&m.acknowledged).map_err(|e| {
        DomainError::invalid("internal", format!("sign-off {} has unreadable acknowledgements: {e}", m.id))
    })?;
    Ok(SignoffView {
        digest: ids::stored(&m.digest)?,
        id: m.id,
        tenant,
        decision: m.decision,
        comment: m.comment,
        actor: m.actor,
        actor_kind: m.actor_kind,
        at: clock::rfc3339(m.at),
        acknowledged,
    })
}

/// The digest of the newest bundle of a scope (ties on the millisecond go
/// to the greater digest, as the expiry orders them).
async fn newest_digest(db: &impl ConnectionTrait, tenant_id: Option<&str>) -> DomainResult<Option<String>> {
    let q = evidence_export::Entity::find()
        .select_only()
        .column(evidence_export::Column::Digest)
        .order_by_desc(evidence_export::Column::CreatedAt)
        .order_by_desc(evidence_export::Column::Digest);
    let q = match tenant_id {
        Some(t) => q.filter(evidence_export::Column::TenantId.eq(t)),
        None => q.filter(evidence_export::Column::TenantId.is_null()),
    };
    Ok(q.into_tuple().one(db).await?)
}

fn refuse_stale(digest: &str, newest: Option<String>) -> DomainResult<()> {
    match newest {
        Some(n) if n != digest => Err(DomainError::conflict(
            "stale_bundle",
            format!(
                "bundle {digest} is not the newest of its scope ({n} is); only the newest bundle can be signed off"
            ),
        )),
        _ => Ok(()),
    }
}

/// Checks the acknowledgements' shape: a finding id and a comment each, one
/// per finding id.
fn check_acknowledgements(acks: &[NewAcknowledgement]) -> DomainResult<Vec<Acknowledgement>> {
    if acks.len() > MAX_ACKNOWLEDGEMENTS {
        return Err(DomainError::invalid(
            "too_many_acknowledgements",
            format!("at most {MAX_ACKNOWLEDGEMENTS} acknowledgements, one per finding id"),
        ));
    }
    let mut seen = BTreeSet::new();
    let mut out = Vec::with_capacity(acks.len());
    for a in acks {
        let finding = a.finding.trim();
        if finding.is_empty() || finding.len() > MAX_FINDING_ID {
            return Err(DomainError::invalid("unknown_finding", "an acknowledgement names no finding id"));
        }
        if crate::text::is_blank(&a.comment) {
            return Err(DomainError::invalid(
                "acknowledgement_comment_required",
                format!("the acknowledgement of {finding} needs a comment: why this finding is accepted"),
            ));
        }
        if !crate::text::fits(&a.comment, MAX_COMMENT) {
            return Err(DomainError::invalid(
                "comment_too_long",
                format!("the comment on {finding} must be at most {MAX_COMMENT} characters"),
            ));
        }
        if !seen.insert(finding.to_owned()) {
            return Err(DomainError::invalid(
                "duplicate_acknowledgement",
                format!("{finding} is acknowledged twice; one acknowledgement covers every finding of that id"),
            ));
        }
        out.push(Acknowledgement { finding: finding.to_owned(), comment: a.comment.trim().to_owned() });
    }
    Ok(out)
}

/// Every acknowledgement names a finding of the bundle; an approval
/// acknowledges every critical one.
fn check_against_findings(decision: Decision, acks: &[Acknowledgement], evidence: &Evidence) -> DomainResult<()> {
    let ids: BTreeSet<&str> = evidence.findings.iter().map(|f| f.id.as_str()).collect();
    let unknown: Vec<&str> = acks.iter().map(|a| a.finding.as_str()).filter(|f| !ids.contains(f)).collect();
    if !unknown.is_empty() {
        return Err(DomainError::invalid(
            "unknown_finding",
            format!("the bundle has no finding {}; acknowledge only the findings it carries", unknown.join(", ")),
        ));
    }
    if decision != Decision::Approved {
        return Ok(());
    }
    let acked: BTreeSet<&str> = acks.iter().map(|a| a.finding.as_str()).collect();
    let missing: BTreeSet<&str> = evidence
        .findings
        .iter()
        .filter(|f| f.severity == "critical")
        .map(|f| f.id.as_str())
        .filter(|f| !acked.contains(f))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let missing: Vec<&str> = missing.into_iter().collect();
    Err(DomainError::invalid(
        "unacknowledged_findings",
        format!(
            "approving this bundle needs an acknowledgement with a comment for each critical finding; missing: {}",
            missing.join(", ")
        ),
    ))
}

/// Records a decision on the newest exported bundle of its scope, after
/// re-verifying it. Refused for a digest that was never exported (or that
/// the caller cannot see), an older bundle (`stale_bundle`), a bundle that
/// fails its check (`bundle_tampered`), an approval that leaves a critical
/// finding unacknowledged, and a second sign-off by the same reviewer
/// (`already_signed`).
pub async fn sign_off(
    db: &DatabaseConnection,
    vault: &Vault,
    principal: &Principal,
    new: &NewSignoff,
) -> DomainResult<SignoffView> {
    let Some(decision) = Decision::parse(&new.decision) else {
        return Err(DomainError::invalid(
            "invalid_decision",
            format!("decision must be approved or rejected, got {:?}", new.decision),
        ));
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
    let acknowledged = check_acknowledgements(&new.acknowledge)?;
    let digest = Digest::parse(new.digest.as_str())?;
    let Some(export) = evidence_export::Entity::find_by_id(digest.as_str().to_owned()).one(db).await? else {
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
    refuse_stale(digest.as_str(), newest_digest(db, export.tenant_id.as_deref()).await?)?;
    // What the reviewer acknowledges is what the stored bundle says, and
    // only once it proves to be the bundle this deployment signed.
    let bundle = export::stored(db, vault, principal, &digest).await?;
    check_against_findings(decision, &acknowledged, &bundle.evidence)?;
    let acknowledged_json =
        serde_json::to_string(&acknowledged).map_err(|e| DomainError::invalid("internal", e.to_string()))?;
    let model = evidence_signoff::Model {
        id: ids::new_id(),
        digest: digest.as_str().to_owned(),
        tenant_id: export.tenant_id.clone(),
        decision,
        comment: comment.to_owned(),
        actor: auth.actor().name().to_owned(),
        actor_kind: auth.actor().kind().to_owned(),
        at: clock::now_ms(),
        acknowledged: acknowledged_json,
    };
    let txn = db::begin_write(db).await?;
    // Again under the write lock: an export that landed since is newer.
    refuse_stale(digest.as_str(), newest_digest(&txn, export.tenant_id.as_deref()).await?)?;
    let inserted = evidence_signoff::Entity::insert(evidence_signoff::ActiveModel::from(model.clone()))
        .on_conflict_do_nothing_on([
            evidence_signoff::Column::Digest,
            evidence_signoff::Column::ActorKind,
            evidence_signoff::Column::Actor,
        ])
        .exec_without_returning(&txn)
        .await?;
    if !matches!(inserted, sea_orm::TryInsertResult::Inserted(n) if n > 0) {
        txn.rollback().await?;
        return Err(DomainError::conflict(
            "already_signed",
            format!("{} has already signed off bundle {digest}; a reviewer signs a bundle once", model.actor),
        ));
    }
    audit::record(
        &txn,
        auth.actor(),
        Change {
            action: "evidence.signoff",
            target_kind: "evidence",
            target_id: digest.as_str(),
            tenant_id: export.tenant_id.as_deref(),
            before: None,
            after: Some(json!({"decision": decision, "comment": comment, "acknowledged": acknowledged})),
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
    tenant: Option<&TenantSlug>,
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
    tenant: Option<&TenantSlug>,
    current: &Evidence,
) -> DomainResult<SinceApproval> {
    let tenant_id = scoped_tenant_id(db, principal, tenant).await?;
    let mut q = evidence_signoff::Entity::find()
        .filter(evidence_signoff::Column::Decision.eq(Decision::Approved))
        .order_by_desc(evidence_signoff::Column::At);
    q = match &tenant_id {
        Some(t) => q.filter(evidence_signoff::Column::TenantId.eq(t)),
        None => q.filter(evidence_signoff::Column::TenantId.is_null()),
    };
    let Some(approval) = q.one(db).await? else { return Ok(SinceApproval { approval: None, differences: Vec::new() }) };
    let approved = export::stored(db, vault, principal, &ids::stored(&approval.digest)?).await?;
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
                    views::retention::human(r.dedup_secs),
                    views::retention::human(r.body_secs),
                    views::retention::human(r.horizon_secs)
                );
                (format!("{}/{}", r.tenant, r.endpoint), v)
            })
            .chain(
                e.retention
                    .horizons
                    .iter()
                    .map(|h| (format!("horizon {}", h.scheme), views::retention::human(h.horizon_secs))),
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
