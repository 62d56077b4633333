//! Exporting a bundle: collect, render, list in a manifest, sign, and record
//! the export byte for byte (so a sign-off names exactly what was read, and
//! the console can hand out the same files later). Audited.

use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, QuerySelect, Set};
use serde_json::json;

use super::{
    bundle::{self, Evidence},
    html,
    manifest::{EVIDENCE_HTML, EVIDENCE_JSON, MANIFEST_JSON, MANIFEST_SIG, Manifest},
};
use crate::{
    audit::{self, Change},
    auth::{Permission, Principal, Scope},
    clock,
    crypto::sha256_hex,
    db,
    entity::{evidence_export, tenant},
    error::{DomainError, DomainResult},
    service_keys,
    vault::Vault,
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

/// A signed bundle: the four files and the parsed forms.
#[derive(Debug, Clone)]
pub struct Bundle {
    /// Hex SHA-256 of `manifest_json`.
    pub digest: String,
    pub manifest: Manifest,
    pub manifest_json: String,
    /// Base64 Ed25519 over `manifest_json` (the content of `manifest.sig`).
    pub signature: String,
    pub evidence: Evidence,
    pub evidence_json: String,
    pub evidence_html: String,
}

impl Bundle {
    /// The files as written to disk, in order.
    pub fn files(&self) -> [(&'static str, Vec<u8>); 4] {
        [
            (EVIDENCE_JSON, self.evidence_json.clone().into_bytes()),
            (EVIDENCE_HTML, self.evidence_html.clone().into_bytes()),
            (MANIFEST_JSON, self.manifest_json.clone().into_bytes()),
            (MANIFEST_SIG, format!("{}\n", self.signature).into_bytes()),
        ]
    }
}

pub use views::evidence::ExportView;

/// Collects, renders, signs and records a bundle.
pub async fn export(
    db: &DatabaseConnection,
    vault: &Vault,
    principal: &Principal,
    tenant: Option<&str>,
    via: Via,
) -> DomainResult<Bundle> {
    let evidence = bundle::collect(db, vault, principal, tenant).await?;
    let signer = service_keys::evidence_signer(db, vault).await?;
    let mut evidence_json =
        serde_json::to_string_pretty(&evidence).map_err(|e| DomainError::invalid("internal", e.to_string()))?;
    evidence_json.push('\n');
    let evidence_html = html::render(&evidence, &sha256_hex(evidence_json.as_bytes()));
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
    evidence_export::Entity::insert(evidence_export::ActiveModel {
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
    .exec_without_returning(&txn)
    .await?;
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
                "warnings": evidence.findings.len() - critical,
            })),
        },
    )
    .await?;
    txn.commit().await?;
    Ok(Bundle { digest, manifest, manifest_json, signature, evidence, evidence_json, evidence_html })
}

/// An export the caller may see, by digest.
pub(crate) async fn find(
    db: &DatabaseConnection,
    principal: &Principal,
    digest: &str,
) -> DomainResult<evidence_export::Model> {
    let row = evidence_export::Entity::find_by_id(digest.to_owned()).one(db).await?.ok_or(DomainError::NotFound)?;
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
        Some(id) => tenant::Entity::find_by_id(id.clone()).one(db).await?.map(|t| t.slug),
        None => None,
    };
    let (critical_findings, warnings) = findings_count(&m.evidence_json);
    Ok(ExportView {
        digest: m.digest.clone(),
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
pub async fn stored(db: &DatabaseConnection, principal: &Principal, digest: &str) -> DomainResult<Bundle> {
    let m = find(db, principal, digest).await?;
    let manifest: Manifest = serde_json::from_str(&m.manifest).map_err(|_| DomainError::NotFound)?;
    let evidence: Evidence = serde_json::from_str(&m.evidence_json).map_err(|_| DomainError::NotFound)?;
    Ok(Bundle {
        digest: m.digest,
        manifest,
        manifest_json: m.manifest,
        signature: m.signature,
        evidence,
        evidence_json: m.evidence_json,
        evidence_html: m.evidence_html,
    })
}

/// Exports the caller may see, newest first; `tenant`: only bundles limited
/// to that tenant (`None`: deployment-wide bundles, or a clinic admin's own).
pub async fn list(
    db: &DatabaseConnection,
    principal: &Principal,
    tenant: Option<&str>,
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
    tenant: Option<&str>,
) -> DomainResult<Option<String>> {
    let id = match (tenant.filter(|t| !t.is_empty()), principal.tenant_filter()) {
        (Some(slug), _) => Some(crate::registry::tenants::find(db, principal, slug).await?.id),
        (None, Some(own)) => Some(own.to_owned()),
        (None, None) => None,
    };
    principal.authorize(Permission::ExportEvidence, id.as_deref().map_or(Scope::Global, Scope::Tenant))?;
    Ok(id)
}
