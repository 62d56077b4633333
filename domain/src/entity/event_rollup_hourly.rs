//! `event_rollups_hourly` rows: the per-minute rollups summed per hour.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "event_rollups_hourly")]
pub struct Model {
    /// Unix hour (ms / 3 600 000).
    #[sea_orm(primary_key, auto_increment = false)]
    pub hour: i64,
    #[sea_orm(primary_key, auto_increment = false)]
    pub tenant_id: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub endpoint_id: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub outcome: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub reason: String,
    pub count: i64,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
