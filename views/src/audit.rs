use serde::{Deserialize, Serialize};
use serde_json::Value;

/// An entry as shown in the UI and API.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AuditView {
    pub seq: i64,
    pub at: String,
    pub actor: String,
    pub actor_kind: String,
    pub action: String,
    pub target_kind: String,
    pub target_id: String,
    pub tenant_id: Option<String>,
    pub before: Option<Value>,
    pub after: Option<Value>,
    pub hash: String,
}

/// Result of [`verify_chain`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ChainReport {
    pub entries: i64,
    pub ok: bool,
    /// The first entry that does not verify, and why.
    pub first_broken: Option<BrokenEntry>,
    /// The head as stored: its sequence number and link.
    pub head_seq: i64,
    pub head_hash: String,
    /// The first entry whose link is an HMAC under the vault-sealed key
    /// (entries before it carry plain SHA-256 links from before keying).
    pub keyed_since_seq: Option<i64>,
    /// 0: every entry was recomputed. Otherwise the entries after this one
    /// were; it and those before it were verified earlier (the verification
    /// mark), and it still carries the link it had then.
    #[serde(default)]
    pub verified_from_seq: i64,
    /// How many entries this verification recomputed.
    #[serde(default)]
    pub checked: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BrokenEntry {
    pub seq: i64,
    pub reason: String,
}

/// The head of the chain at a moment: what a signed checkpoint records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Checkpoint {
    pub seq: i64,
    pub head: String,
    /// RFC 3339.
    pub at: String,
}

impl Checkpoint {
    /// The exact bytes a checkpoint signature covers.
    pub fn signed_bytes(&self) -> Vec<u8> {
        format!("signet-audit-checkpoint-v1\n{}\n{}\n{}", self.seq, self.head, self.at).into_bytes()
    }
}
