use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{
    decision::Decision,
    ids::{EndpointSlug, KeyId, TenantSlug},
    scheme::Scheme,
    string_enum::string_enum,
};

string_enum! {
    /// Lifecycle state as stored (`expired` is also derived on read from
    /// `retiring` + `expires_at`).
    pub enum KeyStatus {
        PendingApproval = "pending_approval",
        Active = "active",
        Retiring = "retiring",
        Expired = "expired",
        Revoked = "revoked",
        Rejected = "rejected",
    }
}

impl KeyStatus {
    /// States a key can still leave (revocable).
    pub fn is_live(self) -> bool {
        matches!(self, KeyStatus::PendingApproval | KeyStatus::Active | KeyStatus::Retiring)
    }
}

/// What a key holds: a shared HMAC secret (`v1`, and every scheme's HMAC),
/// or a Standard Webhooks `v1a` Ed25519 public key, which verifies but
/// cannot sign.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, Hash)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum CredentialKind {
    #[default]
    Hmac,
    Ed25519,
}

impl CredentialKind {
    pub fn as_str(self) -> &'static str {
        match self {
            CredentialKind::Hmac => "hmac",
            CredentialKind::Ed25519 => "ed25519",
        }
    }
    pub fn parse(text: &str) -> Option<CredentialKind> {
        [CredentialKind::Hmac, CredentialKind::Ed25519].into_iter().find(|k| k.as_str() == text)
    }
    /// Whether what Signet stores could sign an event (a leaked HMAC secret
    /// can; a public key cannot).
    pub fn can_sign(self) -> bool {
        self == CredentialKind::Hmac
    }
}

impl std::fmt::Display for CredentialKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A key as shown anywhere after creation: never the secret.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct KeyView {
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub key_id: KeyId,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub tenant: TenantSlug,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub endpoint: EndpointSlug,
    pub scheme: Scheme,
    pub status: KeyStatus,
    pub event_types: Vec<String>,
    /// Whether the current scope is the approved one.
    pub scope_approved: bool,
    pub scope_hash: String,
    pub owner: String,
    pub rotation_owner: String,
    pub created_by: String,
    pub created_at: String,
    pub activated_at: Option<String>,
    pub expires_at: Option<String>,
    /// Unix ms, for countdowns.
    pub expires_at_ms: Option<i64>,
    pub revoked_at: Option<String>,
    pub revoked_reason: Option<String>,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub replaces_key_id: Option<KeyId>,
    pub overlap_secs: Option<i64>,
    pub last_verified_at: Option<String>,
    pub verified_count: i64,
    /// Verification failures counted under this key (it was named by
    /// `signet-key-id` or matched, or it was the endpoint's last key to
    /// verify), and the latest one's time and reason.
    pub failure_count: i64,
    pub last_failure_at: Option<String>,
    pub last_failure_reason: Option<String>,
    /// `hmac` or `ed25519` (a `v1a` public key).
    #[serde(default)]
    pub credential: CredentialKind,
    /// The `whpk_…` public key of an `ed25519` key (public material).
    #[serde(default)]
    pub public_key: Option<String>,
}

/// One reviewer decision.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ApprovalView {
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub key_id: KeyId,
    pub decision: Decision,
    pub reviewer: String,
    pub comment: String,
    pub scope_hash: String,
    pub scope: Value,
    pub decided_at: String,
}

/// A pending key with what the reviewer needs to decide.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReviewItem {
    pub key: KeyView,
    pub scope: Value,
    /// For a rotation: the key it replaces.
    pub replaces: Option<KeyView>,
    pub history: Vec<ApprovalView>,
}

impl ApprovalView {
    /// A text field of the approved scope (`tenant`, `endpoint`, `scheme`);
    /// empty when absent.
    pub fn scope_text(&self, field: &str) -> &str {
        self.scope.get(field).and_then(Value::as_str).unwrap_or_default()
    }
    /// The approved scope's event types.
    pub fn scope_event_types(&self) -> Vec<String> {
        self.scope
            .get("event_types")
            .and_then(Value::as_array)
            .map(|xs| xs.iter().filter_map(|x| x.as_str().map(str::to_owned)).collect())
            .unwrap_or_default()
    }
}
