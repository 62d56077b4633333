//! What crosses to the browser besides the `views` crate's types (which the
//! pages import from `views` itself; the API sends the very same): the
//! console's own compositions of them. Never a secret (except the one-time
//! reveal), never a password hash.

use serde::{Deserialize, Serialize};
use views::{
    audit::AuditView,
    evidence::{DrillRunView, Evidence, SignoffView, SinceApproval},
    keys::KeyView,
    onboarding::OnboardingView,
    registry::{EndpointView, TenantView},
    roles::{Permission, Role, role_allows},
};

/// The signed-in user, for navigation and for hiding actions the role lacks
/// (hiding is cosmetic: every server function authorizes on its own).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Me {
    pub username: String,
    pub role: Role,
    /// Clinic admins: their tenant's slug.
    pub tenant: Option<String>,
}

impl Me {
    /// What the role matrix allows this user (hiding only; the server
    /// authorizes every call).
    pub fn may(&self, permission: Permission) -> bool {
        role_allows(self.role, permission)
    }
    pub fn is_admin(&self) -> bool {
        self.role == Role::Admin
    }
    pub fn can_review(&self) -> bool {
        self.may(Permission::ReviewKeys)
    }
    /// On-call engineers and admins release, discard and read bodies.
    pub fn can_triage(&self) -> bool {
        self.may(Permission::TriageEvents)
    }
    /// Everyone but on-call reads sign-off evidence and runs drills.
    pub fn can_read_evidence(&self) -> bool {
        self.may(Permission::ExportEvidence)
    }
    /// Admins anywhere; clinic admins in their own tenant.
    pub fn can_manage_tenant(&self, slug: &str) -> bool {
        self.may(Permission::ManageKeys) && (!self.role.is_tenant_bound() || self.tenant.as_deref() == Some(slug))
    }
}

/// A tenant with the counts the tenant list shows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TenantSummary {
    pub tenant: TenantView,
    pub endpoint_count: usize,
    pub active_keys: usize,
    pub pending_keys: usize,
}

/// An endpoint with its keys.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EndpointKeys {
    pub endpoint: EndpointView,
    pub keys: Vec<KeyView>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TenantOverview {
    pub tenant: TenantSummary,
    pub endpoints: Vec<EndpointKeys>,
    /// Whether the viewer may create endpoints and manage keys here.
    pub can_manage: bool,
    /// Server time (unix ms) when this was read, for countdowns.
    pub now_ms: i64,
}

/// An endpoint's onboarding page: what its providers send, and whether the
/// viewer may send a test delivery.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OnboardingPage {
    pub guide: OnboardingView,
    /// Clinic admins of the tenant and admins (hiding is cosmetic: the
    /// server function authorizes on its own).
    pub can_send: bool,
}

/// A secret being shown for the first and only time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RevealDto {
    pub key: KeyView,
    pub secret: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AuditPage {
    pub entries: Vec<AuditRow>,
    /// Pass as `before_seq` for the next (older) page.
    pub next_before: Option<i64>,
    pub chain_ok: Option<bool>,
}

/// An audit entry with its tenant's slug (the entry names the tenant by id).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AuditRow {
    pub entry: AuditView,
    pub tenant: Option<String>,
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
    /// The signature schemes the run verified.
    pub schemes: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CohortContextDto {
    pub tenants: Vec<CohortTenantDto>,
    pub latest_drills: Option<CohortDrillsDto>,
}
