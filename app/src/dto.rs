//! What crosses to the browser. Never a secret (except the one-time reveal),
//! never a password hash. Server-side conversions from domain views live in
//! `ssr::convert`.

use serde::{Deserialize, Serialize};

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

/// A quarantined event (metadata; never the body).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QuarantineDto {
    pub id: String,
    pub tenant: String,
    pub endpoint: String,
    pub event_id: String,
    pub event_type: Option<String>,
    pub reason: String,
    pub status: String,
    pub quarantined_at: String,
    pub key_id: Option<String>,
    pub body_sha256: Option<String>,
    pub body_stored: bool,
    pub resolved_at: Option<String>,
    pub resolved_by: Option<String>,
    pub resolution_note: Option<String>,
    pub last_release_error: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QuarantineListDto {
    pub total: u64,
    pub by_reason: Vec<(String, u64)>,
    pub items: Vec<QuarantineDto>,
}

/// A decrypted, redacted body (shown on an explicit click; audited).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RevealedBodyDto {
    pub json: bool,
    pub text: String,
    pub redacted_fields: Vec<String>,
    pub size_bytes: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PolicyVersionDto {
    pub version: i32,
    pub policy: String,
    pub actor: String,
    pub reason: String,
    pub created_at: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RetryPolicyDto {
    pub tenant: String,
    pub policy: String,
    pub version: i32,
    pub history: Vec<PolicyVersionDto>,
}

/// An outbox intent (metadata; never the payload).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OutboxDto {
    pub id: String,
    pub tenant: String,
    pub kind: String,
    pub idempotency_key: String,
    pub status: String,
    pub attempts: i32,
    pub next_attempt_at: String,
    pub created_at: String,
    pub delivered_at: Option<String>,
    pub last_error: Option<String>,
}

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

/// A background bulk release (mirrors
/// `domain::ops::bulk_release::BulkReleaseView`; the server converts through
/// serde, and a test checks the two stay in step).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BulkReleaseDto {
    pub id: String,
    pub filter: BulkFilterDto,
    pub reason: String,
    pub started_by: String,
    /// `running`, `finished`, `failed` or `interrupted`.
    pub status: String,
    pub total: u64,
    pub processed: u64,
    pub released: u64,
    pub still_failing: u64,
    pub already_resolved: u64,
    pub error: Option<String>,
    pub started_at: String,
    pub updated_at: String,
    pub finished_at: Option<String>,
    pub failures: Vec<BulkFailureDto>,
}

impl BulkReleaseDto {
    pub fn is_running(&self) -> bool {
        self.status == "running"
    }
    /// Progress in whole percent (0–100).
    pub fn percent(&self) -> u64 {
        (self.processed * 100).checked_div(self.total).unwrap_or(100).min(100)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BulkFilterDto {
    pub tenant: Option<String>,
    pub endpoint: Option<String>,
    pub reason: Option<String>,
    pub status: Option<String>,
    pub age: Option<String>,
    pub limit: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BulkFailureDto {
    /// The quarantine entry id.
    pub id: String,
    pub event_id: String,
    pub error: String,
}

/// The dashboard's figures (mirrors `domain::ops::stats::StatsView`; the
/// server converts through serde, and a test checks the two stay in step).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StatsDto {
    pub window: String,
    pub tenant: Option<String>,
    pub bucket_secs: i64,
    pub start: String,
    pub end: String,
    pub now_ms: i64,
    pub bucket_starts: Vec<String>,
    pub series: Vec<SeriesDto>,
    pub latency: LatencyDto,
    pub quarantine_open: u64,
    pub outbox: OutboxStatsDto,
    pub keys_in_overlap: Vec<OverlapKeyDto>,
    pub failing_endpoints: Vec<FailingEndpointDto>,
    pub retry_policies: Vec<PolicyStateDto>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReasonCountDto {
    pub reason: String,
    pub count: i64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SeriesDto {
    pub outcome: String,
    pub total: i64,
    pub points: Vec<i64>,
    pub reasons: Vec<ReasonCountDto>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LatencyDto {
    pub samples: i64,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub p50_points: Vec<Option<f64>>,
    pub p99_points: Vec<Option<f64>>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OutboxStatsDto {
    pub backlog: u64,
    pub oldest_pending_age_secs: Option<i64>,
    pub dead: u64,
    pub backlog_points: Vec<i64>,
    pub oldest_age_points: Vec<i64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OverlapKeyDto {
    pub key_id: String,
    pub tenant: String,
    pub endpoint: String,
    pub expires_at: Option<String>,
    pub expires_at_ms: Option<i64>,
    pub replaced_by: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FailingEndpointDto {
    pub tenant: String,
    pub endpoint: String,
    pub failures: i64,
    pub reasons: Vec<ReasonCountDto>,
    pub accepted_keys: Vec<String>,
    pub by_key: Vec<KeyFailureCountDto>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KeyFailureCountDto {
    pub key_id: String,
    pub failures: i64,
    pub reasons: Vec<ReasonCountDto>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PolicyStateDto {
    pub tenant: String,
    pub policy: String,
    pub version: i32,
}

// ---- Sign-off evidence (`/evidence`): the domain's evidence views, field
// for field (mirrored with `ssr::convert::mirror`; fields the page does not
// show are left out, never renamed).

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DrillResultDto {
    pub name: String,
    pub passed: bool,
    pub observed: std::collections::BTreeMap<String, serde_json::Value>,
    pub expected: std::collections::BTreeMap<String, serde_json::Value>,
    pub failures: Vec<String>,
    pub duration_ms: i64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DrillRunDto {
    pub run_id: String,
    pub passed: Option<bool>,
    /// `running`, `finished` or `interrupted`.
    pub status: String,
    pub actor: String,
    pub engine: String,
    pub started_at: String,
    pub finished_at: Option<String>,
    pub total: usize,
    pub done: usize,
    pub error: Option<String>,
    pub drills: Vec<DrillResultDto>,
}

impl DrillRunDto {
    pub fn is_running(&self) -> bool {
        self.status == "running"
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FindingDto {
    pub severity: String,
    pub code: String,
    pub subject: String,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CredentialDto {
    pub tenant: String,
    pub endpoint: String,
    pub key_id: String,
    pub status: String,
    pub scheme: String,
    pub event_types: Vec<String>,
    pub owner: String,
    pub rotation_owner: String,
    pub approved_by: Option<String>,
    pub approved_at: Option<String>,
    pub scope_hash: String,
    pub scope_approved: bool,
    pub kek_version: i32,
    pub age_days: i64,
    pub last_verified_at: Option<String>,
    pub overlap_ends_at: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HolderDto {
    pub kind: String,
    pub name: String,
    pub tenant: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RoleAccessDto {
    pub role: String,
    pub permissions: Vec<String>,
    pub holders: Vec<HolderDto>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConstraintDto {
    pub id: String,
    pub table: String,
    pub kind: String,
    pub columns: Vec<String>,
    pub references: Option<String>,
    pub guarantees: String,
    pub present: bool,
    pub enforced_by: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DrillEvidenceDto {
    pub latest: Option<DrillRunDto>,
    pub stale: bool,
    pub stale_reasons: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RetentionRowDto {
    pub tenant: String,
    pub endpoint: String,
    pub scheme: String,
    pub dedup_secs: i64,
    pub body_secs: i64,
    pub horizon_secs: i64,
    pub decided_by: String,
    pub decided_at: String,
    pub reason: String,
    pub guard_holds: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RetentionEvidenceDto {
    pub endpoints: Vec<RetentionRowDto>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RetryPolicyEvidenceDto {
    pub tenant: String,
    pub policy: String,
    pub version: i32,
    pub may_roll_back: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MetricsEvidenceDto {
    pub window: String,
    pub applied: i64,
    pub duplicate_acks: i64,
    pub verification_failures: Vec<ReasonCountDto>,
    pub rollbacks: i64,
    pub quarantined: Vec<ReasonCountDto>,
    pub quarantine_open: u64,
    pub outbox_backlog: u64,
    pub outbox_oldest_pending_age_secs: Option<i64>,
    pub outbox_dead: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AuditEvidenceDto {
    pub chain_verified: bool,
    pub entries: i64,
    pub head_seq: i64,
    pub head_hash: String,
    pub keyed_since_seq: Option<i64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EvidenceDto {
    pub generated_at: String,
    pub tenant: Option<String>,
    pub credentials: Vec<CredentialDto>,
    pub access: Vec<RoleAccessDto>,
    pub constraints: Vec<ConstraintDto>,
    pub drills: DrillEvidenceDto,
    pub retention: RetentionEvidenceDto,
    pub retry_policy: Vec<RetryPolicyEvidenceDto>,
    pub metrics: MetricsEvidenceDto,
    pub audit: AuditEvidenceDto,
    pub findings: Vec<FindingDto>,
}

impl EvidenceDto {
    pub fn critical(&self) -> usize {
        self.findings.iter().filter(|f| f.severity == "critical").count()
    }
}

/// The latest exported bundle of a scope.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BundleDto {
    pub digest: String,
    pub actor: String,
    pub via: String,
    pub created_at: String,
    pub evidence: EvidenceDto,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SignoffDto {
    pub id: String,
    pub digest: String,
    pub decision: String,
    pub comment: String,
    pub actor: String,
    pub at: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DifferenceDto {
    pub section: String,
    pub subject: String,
    pub approved: Option<String>,
    pub now: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SinceApprovalDto {
    pub approval: Option<SignoffDto>,
    pub differences: Vec<DifferenceDto>,
}

/// Everything `/evidence` shows for one scope.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EvidencePageDto {
    /// The tenant the page is limited to (`None`: the whole deployment).
    pub tenant: Option<String>,
    /// Tenants to choose from (global roles only).
    pub tenants: Vec<String>,
    pub can_sign_off: bool,
    pub runs: Vec<DrillRunDto>,
    pub bundle: Option<BundleDto>,
    pub since: Option<SinceApprovalDto>,
    pub signoffs: Vec<SignoffDto>,
    pub public_key: String,
    pub public_key_pem: String,
}

/// `domain::kek::KekVersionView`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KekVersionDto {
    pub version: u32,
    pub created_at: String,
    pub newest: bool,
    pub rows: std::collections::BTreeMap<String, u64>,
    pub total_rows: u64,
    pub retirable: bool,
}

/// `domain::kek::RetiredView`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RetiredKekDto {
    pub version: u32,
    pub created_at: String,
    pub retired_at: String,
    pub retired_by: String,
}

/// `domain::kek::RewrapView`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RewrapDto {
    pub id: String,
    pub target_version: u32,
    pub status: String,
    pub started_by: String,
    pub source: String,
    pub total: u64,
    pub scanned: u64,
    pub rewrapped: u64,
    pub error: Option<String>,
    pub started_at: String,
    pub updated_at: String,
    pub finished_at: Option<String>,
}

impl RewrapDto {
    pub fn is_running(&self) -> bool {
        self.status == "running"
    }
    /// Resealed of those under another version at the start, 0–100.
    pub fn percent(&self) -> u64 {
        if self.total == 0 { 100 } else { (self.rewrapped * 100 / self.total).min(100) }
    }
}

/// `domain::kek::KekOverview`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KekOverviewDto {
    pub versions: Vec<KekVersionDto>,
    pub retired: Vec<RetiredKekDto>,
    pub stale_rows: u64,
    pub latest_rewrap: Option<RewrapDto>,
    pub counted: bool,
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
