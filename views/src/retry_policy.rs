use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PolicyVersionView {
    pub version: i32,
    pub policy: String,
    pub actor: String,
    pub reason: String,
    pub created_at: String,
}

/// The current policy and its full history, newest first.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RetryPolicyView {
    pub tenant: String,
    pub policy: String,
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
    /// `pending_approval`, `approved`, `rejected` or `expired`.
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
