use serde::{Deserialize, Serialize};

use crate::{ids::TenantSlug, string_enum::string_enum};

string_enum! {
    /// A tenant's retry policy (docs/contract.md §3), as stored in
    /// `tenants.retry_policy` and `retry_policy_versions.policy`: whether a
    /// transient failure answers 503 (`enabled`, the provider retries) or
    /// quarantines the event (`disabled`).
    pub enum RetryPolicy {
        Enabled = "enabled",
        Disabled = "disabled",
    }
}

string_enum! {
    /// A break-glass override's state, as stored in `rollout_overrides.status`.
    pub enum OverrideStatus {
        PendingApproval = "pending_approval",
        Approved = "approved",
        Rejected = "rejected",
        /// Never stored: a pending request past `expires_at` reads so.
        Expired = "expired",
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PolicyVersionView {
    pub version: i32,
    /// A [`RetryPolicy`] word. Text, as every string of the evidence bundle
    /// that embeds the history is (its page's escaping test marks each one).
    pub policy: String,
    pub actor: String,
    pub reason: String,
    pub created_at: String,
}

/// The current policy and its full history, newest first.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RetryPolicyView {
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub tenant: TenantSlug,
    pub policy: RetryPolicy,
    pub version: i32,
    pub history: Vec<PolicyVersionView>,
}

/// A break-glass request to enable a tenant's retries before the rollout
/// order is met (issue 23 item 3), and its one decision.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RolloutOverrideView {
    pub id: String,
    pub tenant: String,
    /// An [`OverrideStatus`] word: `pending_approval`, `approved`,
    /// `rejected` or `expired`. Text, as every string of the evidence bundle
    /// that lists open overrides is (its page's escaping test marks each one).
    pub status: String,
    pub requested_by: String,
    /// The break-glass justification.
    pub override_reason: String,
    /// The change reason the new policy version records.
    pub reason: String,
    /// What the rollout gate named as missing when it was requested.
    pub missing: Vec<String>,
    pub created_at: String,
    /// A pending request can no longer be decided after this.
    pub expires_at: String,
    pub decided_by: Option<String>,
    pub decided_at: Option<String>,
    pub comment: Option<String>,
    /// The retry policy version the approval appended.
    pub policy_version: Option<i32>,
}
