//! The bundle's files, their manifest and its Ed25519 signature, and the
//! offline check of a bundle on disk (`signet evidence verify`), which needs
//! no database: only the files and the deployment's public key.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::crypto::{
    service::{SignatureCheck, verify_signature},
    sha256_hex,
};

pub const EVIDENCE_JSON: &str = "evidence.json";
pub const EVIDENCE_HTML: &str = "evidence.html";
pub const MANIFEST_JSON: &str = "manifest.json";
pub const MANIFEST_SIG: &str = "manifest.sig";
/// Every file of a bundle, in the order they are written.
pub const FILES: [&str; 4] = [EVIDENCE_JSON, EVIDENCE_HTML, MANIFEST_JSON, MANIFEST_SIG];

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ManifestFile {
    pub name: String,
    pub sha256: String,
    pub bytes: u64,
}

/// `manifest.json`. Its SHA-256 (of the exact bytes written) is the
/// bundle's digest, which sign-offs name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// `signet-evidence-manifest/1`.
    pub format: String,
    pub generated_at: String,
    pub tenant: Option<String>,
    /// `ed25519`.
    pub algorithm: String,
    /// Base64 of the signer's 32-byte public key.
    pub public_key: String,
    pub files: Vec<ManifestFile>,
}

impl Manifest {
    pub fn new(generated_at: &str, tenant: Option<&str>, public_key: &str, files: &[(&str, &[u8])]) -> Manifest {
        Manifest {
            format: "signet-evidence-manifest/1".into(),
            generated_at: generated_at.into(),
            tenant: tenant.map(str::to_owned),
            algorithm: "ed25519".into(),
            public_key: public_key.into(),
            files: files
                .iter()
                .map(|(n, b)| ManifestFile { name: (*n).into(), sha256: sha256_hex(b), bytes: b.len() as u64 })
                .collect(),
        }
    }

    /// The exact bytes of `manifest.json`.
    pub fn to_file(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }
}

/// One file's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileCheck {
    pub name: String,
    /// `ok`, `mismatch`, `missing` or `unexpected`.
    pub status: String,
}

/// What `signet evidence verify` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyReport {
    pub ok: bool,
    /// SHA-256 of `manifest.json` as found.
    pub digest: String,
    pub files: Vec<FileCheck>,
    /// `ok`, or why the signature does not verify.
    pub signature: String,
    /// Which public key the signature was checked against: `given` (from
    /// `--public-key`) or `manifest` (the one the bundle names, which only
    /// shows integrity, not who signed).
    pub signer: String,
    /// Every problem, one line each.
    pub problems: Vec<String>,
}

/// Checks a bundle: `files` holds every file in the bundle's directory by
/// name (including `manifest.json` and `manifest.sig`).
pub fn verify(files: &BTreeMap<String, Vec<u8>>, public_key: Option<&str>) -> VerifyReport {
    let mut problems = Vec::new();
    let mut checks = Vec::new();
    let manifest_bytes = files.get(MANIFEST_JSON);
    let digest = manifest_bytes.map(|b| sha256_hex(b)).unwrap_or_default();
    let manifest: Option<Manifest> = match manifest_bytes {
        None => {
            problems.push(format!("{MANIFEST_JSON} is missing"));
            None
        }
        Some(b) => match serde_json::from_slice(b) {
            Ok(m) => Some(m),
            Err(e) => {
                problems.push(format!("{MANIFEST_JSON} is not a Signet manifest: {e}"));
                None
            }
        },
    };
    if let Some(m) = &manifest {
        for f in &m.files {
            let status = match files.get(&f.name) {
                None => "missing",
                Some(b) if sha256_hex(b) != f.sha256 || b.len() as u64 != f.bytes => "mismatch",
                Some(_) => "ok",
            };
            if status != "ok" {
                problems.push(match status {
                    "missing" => format!("{} is missing", f.name),
                    _ => format!("{} does not match its SHA-256 in the manifest", f.name),
                });
            }
            checks.push(FileCheck { name: f.name.clone(), status: status.into() });
        }
        for name in files.keys() {
            let listed = m.files.iter().any(|f| &f.name == name) || name == MANIFEST_JSON || name == MANIFEST_SIG;
            if !listed {
                problems.push(format!("{name} is not part of the bundle"));
                checks.push(FileCheck { name: name.clone(), status: "unexpected".into() });
            }
        }
    }
    let signer = if public_key.is_some() { "given" } else { "manifest" };
    let key = public_key.map(str::to_owned).or_else(|| manifest.as_ref().map(|m| m.public_key.clone()));
    let signature = match (files.get(MANIFEST_SIG), manifest_bytes, key) {
        (None, ..) => {
            problems.push(format!("{MANIFEST_SIG} is missing"));
            "missing".to_owned()
        }
        (_, None, _) | (_, _, None) => "not checked".to_owned(),
        // Exactly base64 and one newline, as written: any other byte in the
        // file is tampering too.
        (Some(sig), Some(m), Some(k)) => {
            match verify_signature(&k, m, String::from_utf8_lossy(sig.strip_suffix(b"\n").unwrap_or(sig)).as_ref()) {
                Ok(()) => "ok".to_owned(),
                Err(e) => {
                    problems.push(match &e {
                        SignatureCheck::Mismatch => format!("{MANIFEST_SIG} does not verify: {e}"),
                        other => format!("{MANIFEST_SIG}: {other}"),
                    });
                    e.to_string()
                }
            }
        }
    };
    VerifyReport { ok: problems.is_empty(), digest, files: checks, signature, signer: signer.into(), problems }
}
