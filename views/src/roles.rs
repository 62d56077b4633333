//! The role matrix: the one place that says which role may do what
//! (docs/contract.md §4). Review changes here as security changes. The domain
//! authorizes by it; the console asks it what to show.

use serde::{Deserialize, Serialize};

/// A user's or token's role.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    Admin,
    Reviewer,
    ClinicAdmin,
    Oncall,
}

impl Role {
    pub const ALL: [Role; 4] = [Role::Admin, Role::Reviewer, Role::ClinicAdmin, Role::Oncall];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Reviewer => "reviewer",
            Role::ClinicAdmin => "clinic-admin",
            Role::Oncall => "oncall",
        }
    }

    pub fn parse(text: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.as_str() == text)
    }

    /// Clinic admins are bound to one tenant and see nothing of others.
    pub fn is_tenant_bound(self) -> bool {
        matches!(self, Role::ClinicAdmin)
    }

    /// Human label for the UI.
    pub fn label(self) -> &'static str {
        match self {
            Role::Admin => "Administrator",
            Role::Reviewer => "Security reviewer",
            Role::ClinicAdmin => "Clinic admin",
            Role::Oncall => "On-call engineer",
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Everything that is authorized somewhere.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Permission {
    /// See tenants, endpoints and keys (never secrets).
    ReadRegistry,
    /// Create or change tenants.
    ManageTenants,
    /// Create or change endpoints.
    ManageEndpoints,
    /// Provision, rotate, revoke keys and change their scope.
    ManageKeys,
    /// Approve or reject a key's scope.
    ReviewKeys,
    /// Read the audit log.
    ReadAudit,
    /// Read received events' metadata and the reminders they produced.
    ReadEvents,
    /// Create and change users, create and revoke API tokens.
    ManageUsers,
    /// Release or discard quarantined events (and retry dead outbox intents).
    TriageEvents,
    /// Decrypt a stored event body for inspection (always audited).
    RevealBodies,
    /// Change a tenant's retry policy or roll it back.
    ManageRetryPolicy,
    /// Set an endpoint's dedup and body retention (tenant scope), or a
    /// scheme's redelivery horizon (global scope, so admins only).
    ManageRetention,
    /// Run the drills and read their runs (they touch only the drill tenant).
    RunDrills,
    /// Export sign-off evidence (a clinic admin: its own tenant's).
    ExportEvidence,
    /// Approve or reject an exported evidence bundle.
    SignOffEvidence,
    /// See the KEK versions, rotate, rewrap and retire them.
    ManageKeks,
}

impl Permission {
    pub const ALL: [Permission; 16] = [
        Permission::ReadRegistry,
        Permission::ManageTenants,
        Permission::ManageEndpoints,
        Permission::ManageKeys,
        Permission::ReviewKeys,
        Permission::ReadAudit,
        Permission::ReadEvents,
        Permission::ManageUsers,
        Permission::TriageEvents,
        Permission::RevealBodies,
        Permission::ManageRetryPolicy,
        Permission::ManageRetention,
        Permission::RunDrills,
        Permission::ExportEvidence,
        Permission::SignOffEvidence,
        Permission::ManageKeks,
    ];

    /// The name shown in the evidence's access section.
    pub fn as_str(self) -> &'static str {
        match self {
            Permission::ReadRegistry => "read_registry",
            Permission::ManageTenants => "manage_tenants",
            Permission::ManageEndpoints => "manage_endpoints",
            Permission::ManageKeys => "manage_keys",
            Permission::ReviewKeys => "review_keys",
            Permission::ReadAudit => "read_audit",
            Permission::ReadEvents => "read_events",
            Permission::ManageUsers => "manage_users",
            Permission::TriageEvents => "triage_events",
            Permission::RevealBodies => "reveal_bodies",
            Permission::ManageRetryPolicy => "manage_retry_policy",
            Permission::ManageRetention => "manage_retention",
            Permission::RunDrills => "run_drills",
            Permission::ExportEvidence => "export_evidence",
            Permission::SignOffEvidence => "sign_off_evidence",
            Permission::ManageKeks => "manage_keks",
        }
    }
}

/// The matrix. A clinic admin's grants apply to its own tenant only; that is
/// enforced by the domain's `Principal::authorize`.
pub fn role_allows(role: Role, permission: Permission) -> bool {
    use Permission::*;
    match role {
        Role::Admin => true,
        Role::Reviewer => {
            matches!(
                permission,
                ReadRegistry | ReviewKeys | ReadAudit | ReadEvents | RunDrills | ExportEvidence | SignOffEvidence
            )
        }
        Role::ClinicAdmin => {
            matches!(
                permission,
                ReadRegistry
                    | ManageEndpoints
                    | ManageKeys
                    | ReadAudit
                    | ReadEvents
                    | ManageRetention
                    | RunDrills
                    | ExportEvidence
            )
        }
        Role::Oncall => matches!(permission, ReadRegistry | ReadAudit | ReadEvents | TriageEvents | RevealBodies),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_round_trip() {
        for r in Role::ALL {
            assert_eq!(Role::parse(r.as_str()), Some(r));
        }
        assert_eq!(Role::parse("root"), None);
    }

    #[test]
    fn separation_of_duties() {
        assert!(!role_allows(Role::ClinicAdmin, Permission::ReviewKeys));
        assert!(!role_allows(Role::Reviewer, Permission::ManageKeys));
        assert!(!role_allows(Role::Oncall, Permission::ManageKeys));
        assert!(!role_allows(Role::ClinicAdmin, Permission::ManageUsers));
        // Health data is decrypted only for the people who triage it.
        assert!(!role_allows(Role::Reviewer, Permission::RevealBodies));
        assert!(!role_allows(Role::ClinicAdmin, Permission::RevealBodies));
        assert!(!role_allows(Role::Oncall, Permission::ManageRetryPolicy));
        assert!(!role_allows(Role::Oncall, Permission::ManageRetention));
        assert!(!role_allows(Role::Reviewer, Permission::ManageRetention));
        // Evidence: on-call neither runs drills nor exports; only reviewers
        // (and admins) sign off.
        for p in [Permission::RunDrills, Permission::ExportEvidence, Permission::SignOffEvidence] {
            assert!(!role_allows(Role::Oncall, p));
        }
        assert!(!role_allows(Role::ClinicAdmin, Permission::SignOffEvidence));
    }

    #[test]
    fn every_permission_has_a_distinct_name() {
        let names: std::collections::HashSet<&str> = Permission::ALL.iter().map(|p| p.as_str()).collect();
        assert_eq!(names.len(), Permission::ALL.len());
    }
}
