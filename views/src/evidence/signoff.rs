//! Reviewers' sign-offs on a bundle, what changed since the last approval,
//! and the record of every export.

use serde::{Deserialize, Serialize};

use crate::{
    decision::Decision,
    ids::{Digest, TenantSlug},
};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SignoffView {
    pub id: String,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub digest: Digest,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub tenant: Option<TenantSlug>,
    pub decision: Decision,
    pub comment: String,
    pub actor: String,
    pub actor_kind: String,
    pub at: String,
    /// The reviewer's word on findings of the bundle, by finding id: every
    /// critical finding of an approved bundle has one.
    #[serde(default)]
    pub acknowledged: Vec<Acknowledgement>,
}

/// A reviewer's acknowledgement of one finding (by its `id`) in a sign-off.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Acknowledgement {
    /// A finding `id` of the bundle signed off (for example `drill_failed`);
    /// it covers every finding of that id.
    pub finding: String,
    /// Why the reviewer accepts it.
    pub comment: String,
}

/// One difference between the approved bundle and a newer one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Difference {
    /// `credentials`, `constraints`, `retention`, `retry_policy`, `build`
    /// or `database`.
    pub section: String,
    pub subject: String,
    /// `None`: absent on that side.
    pub approved: Option<String>,
    pub now: Option<String>,
}

/// What changed since the last approved bundle of the same scope.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SinceApproval {
    /// The latest approval (`None`: nothing was approved yet).
    pub approval: Option<SignoffView>,
    pub differences: Vec<Difference>,
}

/// An export as listed (no contents).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ExportView {
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub digest: Digest,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub tenant: Option<TenantSlug>,
    pub actor: String,
    pub actor_kind: String,
    pub via: String,
    pub created_at: String,
    pub critical_findings: usize,
    pub warnings: usize,
}
