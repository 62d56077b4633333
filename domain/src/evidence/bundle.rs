//! `evidence.json`: everything a reviewer signs off on, read live from the
//! deployment at the moment of export (docs/contract.md §5). Nothing here is
//! written by hand; [`Finding`]s are computed from the sections.

mod access;
mod credentials;
mod findings;
mod operations;

use sea_orm::{DatabaseConnection, EntityTrait};

use super::{catalog, cohort, durability, files, identity};
use crate::{
    audit,
    auth::{Principal, Scope},
    clock,
    entity::tenant,
    error::DomainResult,
    registry::tenants,
    service_keys,
    vault::Vault,
};
use views::{
    evidence::{AuditEvidence, Deployment, Evidence, SignedCheckpoint},
    ids::TenantSlug,
    roles::Permission,
};

pub use findings::{MAX_KEY_AGE_DAYS, findings};
pub use operations::DRILL_STALE_DAYS;

/// The tenant a bundle is limited to: the one asked for, or a clinic
/// admin's own.
async fn scope_tenant(
    db: &DatabaseConnection,
    principal: &Principal,
    slug: Option<&TenantSlug>,
) -> DomainResult<Option<tenant::Model>> {
    Ok(match (slug, principal.tenant_filter()) {
        (Some(slug), _) => Some(tenants::find(db, principal, slug).await?),
        (None, Some(own)) => {
            Some(tenant::Entity::find_by_id(own.to_owned()).one(db).await?.ok_or(crate::DomainError::NotFound)?)
        }
        (None, None) => None,
    })
}

/// Reads everything for the bundle. `tenant`: limit every section to it.
pub async fn collect(
    db: &DatabaseConnection,
    vault: &Vault,
    principal: &Principal,
    tenant: Option<&TenantSlug>,
) -> DomainResult<Evidence> {
    let scope = scope_tenant(db, principal, tenant).await?;
    principal.authorize(Permission::ExportEvidence, scope.as_ref().map_or(Scope::Global, |t| Scope::Tenant(&t.id)))?;
    let now = clock::now_ms();
    let signer = service_keys::evidence_signer(db, vault).await?;
    let scope_slug: Option<TenantSlug> = scope.as_ref().map(|t| crate::ids::stored(&t.slug)).transpose()?;
    let tenant_slug = scope.as_ref().map(|t| t.slug.clone());
    let build = identity::current().await;
    let database = durability::read(db).await?;
    let mut files = files::read(db, vault.files()).await?;
    if scope.is_some() {
        // A tenant's bundle shows the modes, not where the host keeps things.
        for f in files.iter_mut().filter(|f| f.path.is_some()) {
            f.path = None;
            f.note = Some("path shown in deployment-wide bundles".into());
        }
    }

    let credentials = credentials::credentials(db, principal, scope_slug.as_ref(), now).await?;
    let access = access::access(db, scope.as_ref()).await?;
    let constraints = catalog::constraints(db).await?;
    let drills = operations::drill_evidence(db, scope.as_ref(), &build, now).await?;
    let retention = operations::retention_evidence(db, principal, scope.as_ref()).await?;
    let retry_policy = operations::retry_evidence(db, principal, scope.as_ref(), &access).await?;
    let cohort_check = cohort::check(db, scope.as_ref()).await?;
    let metrics = operations::metrics_evidence(db, principal, scope_slug.as_ref()).await?;
    // Exports are POSTs: the mark may move (the next export starts there).
    let chain = audit::verify_new(db, true).await?;
    let cp = audit::checkpoint(db).await?;
    let audit = AuditEvidence {
        chain_verified: chain.ok,
        entries: chain.entries,
        head_seq: chain.head_seq,
        head_hash: chain.head_hash,
        keyed_since_seq: chain.keyed_since_seq,
        first_broken: chain.first_broken,
        verified_from_seq: chain.verified_from_seq,
        checkpoint: SignedCheckpoint {
            signature: signer.sign_base64(&cp.signed_bytes()),
            public_key: signer.public_key_base64(),
            checkpoint: cp,
        },
    };
    let mut e = Evidence {
        format: "signet-evidence/1".into(),
        generated_at: clock::rfc3339(now),
        deployment: Deployment {
            version: build.version.clone(),
            engine: database.engine.clone(),
            schema_version: database.schema_version.clone(),
            evidence_public_key: signer.public_key_base64(),
            kek_seals: credentials::kek_seals(db).await?,
        },
        build,
        database,
        files,
        tenant: tenant_slug,
        credentials,
        access,
        constraints,
        drills,
        retention,
        retry_policy,
        cohort_check,
        metrics,
        audit,
        findings: Vec::new(),
    };
    e.findings = findings(&e);
    Ok(e)
}
