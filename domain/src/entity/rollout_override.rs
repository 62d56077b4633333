//! `rollout_overrides` rows: break-glass requests to enable a tenant's
//! retries before the rollout order is met, each decided once by a second
//! person.

use sea_orm::entity::prelude::*;
use views::retry_policy::OverrideStatus;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "rollout_overrides")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub tenant_id: String,
    pub requested_by: String,
    /// `user`, `token` or `cli`.
    pub requested_by_kind: String,
    /// The break-glass justification (`--override-reason`).
    pub reason: String,
    /// The ordinary change reason (`--reason`), for the policy version.
    pub policy_reason: String,
    /// JSON array of what the rollout gate named as missing at request time.
    pub missing: String,
    /// Never `expired`: a pending row past `expires_at` reads so.
    pub status: OverrideStatus,
    pub created_at: i64,
    pub expires_at: i64,
    pub decided_by: Option<String>,
    pub decided_at: Option<i64>,
    pub comment: Option<String>,
    /// The policy version the approval appended.
    pub policy_version: Option<i32>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
