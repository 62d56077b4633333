//! Exporting a bundle: collect, render, list in a manifest, sign, and record
//! the export byte for byte (so a sign-off names exactly what was read, and
//! the console can hand out the same files later). Audited.

use sea_orm::{
    ColumnTrait, DatabaseConnection, DatabaseTransaction, EntityTrait, QueryFilter, QueryOrder, QuerySelect, Set,
    TransactionTrait,
};
use serde_json::json;

use super::{
    bundle,
    manifest::{EVIDENCE_HTML, EVIDENCE_JSON, Manifest},
    record::{self, Bundle},
};
use crate::{
    audit::{self, Change},
    auth::{Principal, Scope},
    clock,
    crypto::sha256_hex,
    db,
    entity::{evidence_export, evidence_signoff, tenant},
    error::{DomainError, DomainResult},
    service_keys,
    vault::Vault,
};
use views::ids::{Digest, TenantSlug};
use views::{
    evidence::{Evidence, ExportView},
    roles::Permission,
};

/// Where an export was made (recorded with it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    Cli,
    Api,
    Console,
}

impl Via {
    pub fn as_str(self) -> &'static str {
        match self {
            Via::Cli => "cli",
            Via::Api => "api",
            Via::Console => "console",
        }
    }
}

/// How many of a scope's newest exports are kept whether or not anyone
/// signed them off; older ones expire unless signed off (those stay for
/// good: a sign-off names them).
pub const KEEP_UNSIGNED: u64 = 20;
/// Expired at most per export, so one export never does unbounded work.
const EXPIRE_BATCH: u64 = 100;

/// An export's outcome: the bundle, and whether this call stored it.
#[derive(Debug)]
pub struct Exported {
    pub bundle: Bundle,
    /// False when an identical bundle (same digest) was already stored,
    /// typically by a concurrent export of the same scope: nothing new was
    /// written, and the stored bundle is the answer.
    pub created: bool,
}

/// Writes `evidence.html` from the bundle and the hex SHA-256 of its
/// `evidence.json`. The page is presentation, not product logic: the edges
/// pass `evidence_html::render`, and the manifest's signature covers the
/// bytes it wrote. Every caller must pass the same renderer, or two exports
/// of the same state would differ (and not be one by digest).
pub type RenderPage = fn(&Evidence, &str) -> String;

/// Collects, renders, signs and records a bundle. Idempotent by digest: an
/// export identical to a stored one answers with the stored one and writes
/// nothing (no second row, no second audit entry).
pub async fn export(
    db: &DatabaseConnection,
    vault: &Vault,
    principal: &Principal,
    tenant: Option<&TenantSlug>,
    via: Via,
    render_page: RenderPage,
) -> DomainResult<Exported> {
    let evidence = bundle::collect(db, vault, principal, tenant).await?;
    let signer = service_keys::evidence_signer(db, vault).await?;
    let mut evidence_json =
        serde_json::to_string_pretty(&evidence).map_err(|e| DomainError::invalid("internal", e.to_string()))?;
    evidence_json.push('\n');
    let evidence_html = render_page(&evidence, &sha256_hex(evidence_json.as_bytes()));
    let manifest = Manifest::new(
        &evidence.generated_at,
        evidence.tenant.as_deref(),
        &signer.public_key_base64(),
        &[(EVIDENCE_JSON, evidence_json.as_bytes()), (EVIDENCE_HTML, evidence_html.as_bytes())],
    );
    let manifest_json = manifest.to_file();
    let signature = signer.sign_base64(manifest_json.as_bytes());
    let digest = sha256_hex(manifest_json.as_bytes());
    let tenant_id = match evidence.tenant.as_deref() {
        Some(slug) => tenant::Entity::find().filter(tenant::Column::Slug.eq(slug)).one(db).await?.map(|t| t.id),
        None => None,
    };
    let auth =
        principal.authorize(Permission::ExportEvidence, tenant_id.as_deref().map_or(Scope::Global, Scope::Tenant))?;
    let critical = evidence.findings.iter().filter(|f| f.severity == "critical").count();
    let txn = db::begin_write(db).await?;
    // The digest decides: two exports that read the same state in the same
    // second produce the same bundle, and the second one is the first.
    let inserted = evidence_export::Entity::insert(evidence_export::ActiveModel {
        digest: Set(digest.clone()),
        tenant_id: Set(tenant_id.clone()),
        actor: Set(auth.actor().name().to_owned()),
        actor_kind: Set(auth.actor().kind().to_owned()),
        via: Set(via.as_str().to_owned()),
        created_at: Set(clock::now_ms()),
        manifest: Set(manifest_json.clone()),
        signature: Set(signature.clone()),
        evidence_json: Set(evidence_json.clone()),
        evidence_html: Set(evidence_html.clone()),
    })
    .on_conflict_do_nothing_on([evidence_export::Column::Digest])
    .exec_without_returning(&txn)
    .await?;
    if !matches!(inserted, sea_orm::TryInsertResult::Inserted(n) if n > 0) {
        txn.rollback().await?;
        let digest = crate::ids::stored(&digest)?;
        return Ok(Exported { bundle: stored(db, vault, principal, &digest).await?, created: false });
    }
    let expired = expire_unsigned(&txn, tenant_id.as_deref()).await?;
    audit::record(
        &txn,
        auth.actor(),
        Change {
            action: "evidence.export",
            target_kind: "evidence",
            target_id: &digest,
            tenant_id: tenant_id.as_deref(),
            before: None,
            after: Some(json!({
                "via": via.as_str(), "tenant": evidence.tenant, "critical_findings": critical,
                "warnings": evidence.findings.len() - critical, "expired": expired,
            })),
        },
    )
    .await?;
    txn.commit().await?;
    let bundle = Bundle { digest, manifest, manifest_json, signature, evidence, evidence_json, evidence_html };
    Ok(Exported { bundle, created: true })
}

/// Deletes the scope's exports older than its newest [`KEEP_UNSIGNED`] that
/// nobody signed off, at most [`EXPIRE_BATCH`] of them, and returns their
/// digests (the export's audit entry lists them). Inside a savepoint: a
/// sign-off landing on one of them at the same moment (its foreign key
/// refuses the delete) leaves them all for the next export instead of
/// failing this one.
async fn expire_unsigned(txn: &DatabaseTransaction, tenant_id: Option<&str>) -> DomainResult<Vec<String>> {
    let in_scope = |q: sea_orm::Select<evidence_export::Entity>| match tenant_id {
        Some(t) => q.filter(evidence_export::Column::TenantId.eq(t)),
        None => q.filter(evidence_export::Column::TenantId.is_null()),
    };
    let old: Vec<String> = in_scope(evidence_export::Entity::find())
        .select_only()
        .column(evidence_export::Column::Digest)
        .order_by_desc(evidence_export::Column::CreatedAt)
        .order_by_desc(evidence_export::Column::Digest)
        .offset(KEEP_UNSIGNED)
        .limit(EXPIRE_BATCH * 4)
        .into_tuple()
        .all(txn)
        .await?;
    if old.is_empty() {
        return Ok(Vec::new());
    }
    let signed: Vec<String> = evidence_signoff::Entity::find()
        .select_only()
        .column(evidence_signoff::Column::Digest)
        .filter(evidence_signoff::Column::Digest.is_in(old.clone()))
        .into_tuple()
        .all(txn)
        .await?;
    let expire: Vec<String> = old.into_iter().filter(|d| !signed.contains(d)).take(EXPIRE_BATCH as usize).collect();
    if expire.is_empty() {
        return Ok(expire);
    }
    let sp = txn.begin().await?;
    let deleted = evidence_export::Entity::delete_many()
        .filter(evidence_export::Column::Digest.is_in(expire.clone()))
        .exec(&sp)
        .await;
    match deleted {
        Ok(_) => {
            sp.commit().await?;
            Ok(expire)
        }
        Err(e) if matches!(e.sql_err(), Some(sea_orm::SqlErr::ForeignKeyConstraintViolation(_))) => {
            sp.rollback().await?;
            Ok(Vec::new())
        }
        Err(e) => Err(e.into()),
    }
}

/// The newest stored bundle of a scope (`tenant`, or a clinic admin's own;
/// `None`: deployment-wide), re-verified. Reads only.
pub async fn latest(
    db: &DatabaseConnection,
    vault: &Vault,
    principal: &Principal,
    tenant: Option<&TenantSlug>,
) -> DomainResult<Bundle> {
    let newest = list(db, principal, tenant, 1).await?.into_iter().next().ok_or(DomainError::NotFound)?;
    stored(db, vault, principal, &newest.digest).await
}

/// An export the caller may see, by digest.
pub(crate) async fn find(
    db: &DatabaseConnection,
    principal: &Principal,
    digest: &Digest,
) -> DomainResult<evidence_export::Model> {
    let row =
        evidence_export::Entity::find_by_id(digest.as_str().to_owned()).one(db).await?.ok_or(DomainError::NotFound)?;
    match (&row.tenant_id, principal.tenant_filter()) {
        // A tenant-bound caller sees only its own tenant's bundles.
        (_, Some(own)) if row.tenant_id.as_deref() != Some(own) => Err(DomainError::NotFound),
        (Some(t), _) => principal.authorize(Permission::ExportEvidence, Scope::Tenant(t)).map(|_| row),
        (None, _) => principal.authorize(Permission::ExportEvidence, Scope::Global).map(|_| row),
    }
}

fn findings_count(evidence_json: &str) -> (usize, usize) {
    let v: serde_json::Value = serde_json::from_str(evidence_json).unwrap_or_default();
    let all = v.get("findings").and_then(|f| f.as_array()).cloned().unwrap_or_default();
    let critical = all.iter().filter(|f| f.get("severity").and_then(|s| s.as_str()) == Some("critical")).count();
    (critical, all.len() - critical)
}

async fn view(db: &DatabaseConnection, m: &evidence_export::Model) -> DomainResult<ExportView> {
    let tenant = match &m.tenant_id {
        Some(id) => {
            tenant::Entity::find_by_id(id.clone()).one(db).await?.map(|t| crate::ids::stored(&t.slug)).transpose()?
        }
        None => None,
    };
    let (critical_findings, warnings) = findings_count(&m.evidence_json);
    Ok(ExportView {
        digest: crate::ids::stored(&m.digest)?,
        tenant,
        actor: m.actor.clone(),
        actor_kind: m.actor_kind.clone(),
        via: m.via.clone(),
        created_at: clock::rfc3339(m.created_at),
        critical_findings,
        warnings,
    })
}

/// The bundle of an earlier export, rebuilt from what was stored.
pub async fn stored(
    db: &DatabaseConnection,
    vault: &Vault,
    principal: &Principal,
    digest: &Digest,
) -> DomainResult<Bundle> {
    record::verified(db, vault, find(db, principal, digest).await?).await
}

/// Exports the caller may see, newest first; `tenant`: only bundles limited
/// to that tenant (`None`: deployment-wide bundles, or a clinic admin's own).
pub async fn list(
    db: &DatabaseConnection,
    principal: &Principal,
    tenant: Option<&TenantSlug>,
    limit: u64,
) -> DomainResult<Vec<ExportView>> {
    let tenant_id = scoped_tenant_id(db, principal, tenant).await?;
    let mut q =
        evidence_export::Entity::find().order_by_desc(evidence_export::Column::CreatedAt).limit(limit.clamp(1, 200));
    q = match &tenant_id {
        Some(t) => q.filter(evidence_export::Column::TenantId.eq(t)),
        None => q.filter(evidence_export::Column::TenantId.is_null()),
    };
    let mut out = Vec::new();
    for m in q.all(db).await? {
        out.push(view(db, &m).await?);
    }
    Ok(out)
}

/// The tenant id a listing is limited to, authorized.
pub async fn scoped_tenant_id(
    db: &DatabaseConnection,
    principal: &Principal,
    tenant: Option<&TenantSlug>,
) -> DomainResult<Option<String>> {
    let id = match (tenant, principal.tenant_filter()) {
        (Some(slug), _) => Some(crate::registry::tenants::find(db, principal, slug).await?.id),
        (None, Some(own)) => Some(own.to_owned()),
        (None, None) => None,
    };
    principal.authorize(Permission::ExportEvidence, id.as_deref().map_or(Scope::Global, Scope::Tenant))?;
    Ok(id)
}
