//! `retry_policy_versions` rows: one per change of a tenant's retry policy.

use sea_orm::entity::prelude::*;
use views::retry_policy::RetryPolicy;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "retry_policy_versions")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub tenant_id: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub version: i32,
    pub policy: RetryPolicy,
    pub actor: String,
    pub reason: String,
    pub created_at: i64,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
