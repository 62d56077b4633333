//! `tenants` rows.

use sea_orm::entity::prelude::*;
use views::retry_policy::RetryPolicy;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "tenants")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub slug: String,
    pub name: String,
    pub notify_url: Option<String>,
    pub created_at: i64,
    /// docs/contract.md §3: transient failures answer 503 when enabled,
    /// quarantine when disabled.
    pub retry_policy: RetryPolicy,
    /// The drills' reserved tenant: hidden from lists, metrics, rollups,
    /// gauges and the outbox worker.
    pub synthetic: bool,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
