//! What exports and sign-offs leave behind, read back: a stored bundle
//! rebuilt and re-verified, and the decisions a sign-off records. The
//! rollout gate and break-glass read these without the code that makes
//! them (`export`, `signoff`), whose bundle in turn reports the retry
//! policy and break-glass.

use sea_orm::DatabaseConnection;
use views::evidence::Evidence;

use super::manifest::{self, EVIDENCE_HTML, EVIDENCE_JSON, MANIFEST_JSON, MANIFEST_SIG, Manifest};
use crate::{
    entity::evidence_export,
    error::{DomainError, DomainResult},
    service_keys,
    vault::Vault,
};

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

/// A stored export rebuilt and re-verified (digest and signature), for a
/// caller already allowed to read it (or the rollout gate).
pub(crate) async fn verified(
    db: &DatabaseConnection,
    vault: &Vault,
    m: evidence_export::Model,
) -> DomainResult<Bundle> {
    let tampered = |why: String| {
        tracing::error!(digest = %m.digest, problem = %why, "a stored evidence bundle fails its own check");
        DomainError::conflict(
            "bundle_tampered",
            format!("the stored bundle {} fails its digest or signature check ({why}); it is not shown", m.digest),
        )
    };
    let manifest: Manifest = serde_json::from_str(&m.manifest).map_err(|e| tampered(e.to_string()))?;
    let evidence: Evidence = serde_json::from_str(&m.evidence_json).map_err(|e| tampered(e.to_string()))?;
    let bundle = Bundle {
        digest: m.digest.clone(),
        manifest,
        manifest_json: m.manifest.clone(),
        signature: m.signature.clone(),
        evidence,
        evidence_json: m.evidence_json.clone(),
        evidence_html: m.evidence_html.clone(),
    };
    // The row is the database's word only: the digest names the manifest,
    // the manifest the files, and the signature must be this deployment's.
    let files = bundle.files().into_iter().map(|(n, b)| (n.to_owned(), b)).collect();
    let report = manifest::verify(&files, Some(&bundle.manifest.public_key));
    if let Some(problem) = report.problems.first() {
        return Err(tampered(problem.clone()));
    }
    if report.digest != bundle.digest {
        return Err(tampered("manifest.json does not hash to the stored digest".into()));
    }
    if service_keys::evidence_signer(db, vault).await?.public_key_base64() != bundle.manifest.public_key {
        return Err(tampered("it is signed by another key than this deployment's evidence key".into()));
    }
    Ok(bundle)
}
