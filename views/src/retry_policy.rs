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
