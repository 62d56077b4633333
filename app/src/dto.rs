//! What crosses to the browser. Never a secret (except the one-time reveal),
//! never a password hash. Server-side conversions from domain views live in
//! `ssr::convert`.

use serde::{Deserialize, Serialize};
pub use views::evidence::{
    AuditEvidence, ConstraintRow, CredentialRow, Difference, DrillEvidence, DrillResult, DrillRunView, Evidence,
    Finding, Holder, MetricsEvidence, RetentionEvidence, RetentionRow, RetryPolicyEvidence, RoleAccess, SignoffView,
    SinceApproval,
};
pub use views::kek::{KekOverview, KekVersionView, RetiredView, RewrapView};
pub use views::outbox::OutboxView;
pub use views::quarantine::{
    BulkFailure, BulkReleaseView, QuarantineFilter, QuarantineList, QuarantineView, RevealedBody,
};
pub use views::retry_policy::{PolicyVersionView, RetryPolicyView};
pub use views::stats::{
    FailingEndpoint, KeyFailureCount, LatencyStats, OutboxStats, OutcomeSeries, OverlapKey, PolicyState, ReasonCount,
    StatsView,
};

/// The signed-in user, for navigation and for hiding actions the role lacks
/// (hiding is cosmetic: every server function authorizes on its own).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Me {
    pub username: String,
    /// `admin`, `reviewer`, `clinic-admin` or `oncall`.
    pub role: String,
    pub role_label: String,
    /// Clinic admins: their tenant's slug.
    pub tenant: Option<String>,
}

impl Me {
    pub fn is_admin(&self) -> bool {
        self.role == "admin"
    }
    pub fn can_review(&self) -> bool {
        matches!(self.role.as_str(), "admin" | "reviewer")
    }
    /// On-call engineers and admins release, discard and read bodies.
    pub fn can_triage(&self) -> bool {
        matches!(self.role.as_str(), "admin" | "oncall")
    }
    /// Everyone but on-call reads sign-off evidence and runs drills.
    pub fn can_read_evidence(&self) -> bool {
        self.role != "oncall"
    }
    pub fn can_manage_tenant(&self, slug: &str) -> bool {
        self.is_admin() || (self.role == "clinic-admin" && self.tenant.as_deref() == Some(slug))
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TenantDto {
    pub slug: String,
    pub name: String,
    pub notify_url: Option<String>,
    pub created_at: String,
    pub endpoint_count: usize,
    pub active_keys: usize,
    pub pending_keys: usize,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EndpointDto {
    pub slug: String,
    pub scheme: String,
    /// `["*"]` means any type.
    pub event_types: Vec<String>,
    pub tolerance_secs: i64,
    pub max_body_bytes: i64,
    pub enabled: bool,
    pub created_at: String,
    /// Envelope fields that identify an event without an id; `None`: such
    /// events are quarantined.
    pub event_key: Option<Vec<String>>,
    pub keys: Vec<KeyDto>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KeyDto {
    pub key_id: String,
    pub tenant: String,
    pub endpoint: String,
    pub scheme: String,
    /// `pending_approval`, `active`, `retiring`, `expired`, `revoked`, `rejected`.
    pub status: String,
    pub event_types: Vec<String>,
    pub scope_approved: bool,
    pub owner: String,
    pub rotation_owner: String,
    pub created_by: String,
    pub created_at: String,
    pub activated_at: Option<String>,
    pub expires_at: Option<String>,
    pub expires_at_ms: Option<i64>,
    pub revoked_at: Option<String>,
    pub revoked_reason: Option<String>,
    pub replaces_key_id: Option<String>,
    pub last_verified_at: Option<String>,
    pub verified_count: i64,
    pub failure_count: i64,
    pub last_failure_at: Option<String>,
    pub last_failure_reason: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TenantOverview {
    pub tenant: TenantDto,
    pub endpoints: Vec<EndpointDto>,
    /// Whether the viewer may create endpoints and manage keys here.
    pub can_manage: bool,
    /// Server time (unix ms) when this was read, for countdowns.
    pub now_ms: i64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApprovalDto {
    pub key_id: String,
    pub decision: String,
    pub reviewer: String,
    pub comment: String,
    pub scope_hash: String,
    pub tenant: String,
    pub endpoint: String,
    pub scheme: String,
    pub event_types: Vec<String>,
    pub decided_at: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReviewItemDto {
    pub key: KeyDto,
    /// For a rotation: the key being replaced.
    pub replaces: Option<KeyDto>,
    pub history: Vec<ApprovalDto>,
}

/// A secret being shown for the first and only time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RevealDto {
    pub key: KeyDto,
    pub secret: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UserDto {
    pub username: String,
    pub role: String,
    pub role_label: String,
    pub tenant: Option<String>,
    pub disabled: bool,
    pub created_at: String,
    pub last_login_at: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AuditDto {
    pub seq: i64,
    pub at: String,
    pub actor: String,
    pub actor_kind: String,
    pub action: String,
    pub target_kind: String,
    pub target_id: String,
    pub tenant: Option<String>,
    pub before: Option<String>,
    pub after: Option<String>,
    pub hash: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AuditPage {
    pub entries: Vec<AuditDto>,
    /// Pass as `before_seq` for the next (older) page.
    pub next_before: Option<i64>,
    pub chain_ok: Option<bool>,
}

/// Role choices for forms.
pub const ROLES: [(&str, &str); 4] = [
    ("admin", "Administrator"),
    ("reviewer", "Security reviewer"),
    ("clinic-admin", "Clinic admin"),
    ("oncall", "On-call engineer"),
];

pub const SCHEMES: [&str; 3] = ["standard-webhooks", "stripe", "github"];

/// A scheme's redelivery horizon (durations already worded for people).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HorizonDto {
    pub scheme: String,
    pub horizon: String,
    pub version: i32,
    pub actor: String,
    pub reason: String,
    pub created_at: String,
    /// Where the value comes from (the sender's published schedule).
    pub source: Option<String>,
}

/// One endpoint's current retention decision.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RetentionDto {
    pub tenant: String,
    pub endpoint: String,
    pub scheme: String,
    /// What the purge applies: the decision, floored by the horizon.
    pub claims: String,
    pub claims_decided: String,
    pub horizon: String,
    /// The decision is below the horizon (raised since): flagged, not
    /// changed silently.
    pub below_horizon: bool,
    pub bodies: String,
    pub version: i32,
    pub actor: String,
    pub reason: String,
    pub created_at: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RetentionOverviewDto {
    pub horizons: Vec<HorizonDto>,
    pub endpoints: Vec<RetentionDto>,
}

/// The latest exported bundle of a scope.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BundleDto {
    pub digest: String,
    pub actor: String,
    pub via: String,
    pub created_at: String,
    pub evidence: Evidence,
}

/// Everything `/evidence` shows for one scope.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EvidencePageDto {
    /// The tenant the page is limited to (`None`: the whole deployment).
    pub tenant: Option<String>,
    /// Tenants to choose from (global roles only).
    pub tenants: Vec<String>,
    pub can_sign_off: bool,
    pub runs: Vec<DrillRunView>,
    pub bundle: Option<BundleDto>,
    pub since: Option<SinceApproval>,
    pub signoffs: Vec<SignoffView>,
    pub public_key: String,
    pub public_key_pem: String,
}

/// A tenant as the cohort form lists it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CohortTenantDto {
    pub slug: String,
    pub retries_enabled: bool,
}

/// The latest drill run, as the cohort form shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CohortDrillsDto {
    pub passed: Option<bool>,
    pub status: String,
    pub finished_at: Option<String>,
    pub failed: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CohortContextDto {
    pub tenants: Vec<CohortTenantDto>,
    pub latest_drills: Option<CohortDrillsDto>,
}
