//! `retention_versions` rows: one per retention decision for an endpoint,
//! with the horizon that was in force when it was made.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "retention_versions")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub endpoint_id: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub version: i32,
    pub dedup_secs: i64,
    pub body_secs: i64,
    pub horizon_secs: i64,
    pub actor: String,
    pub reason: String,
    pub created_at: i64,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
