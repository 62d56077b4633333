//! `key_failure_rollups` rows: verification failures per key, reason and
//! hour (flushed with the other rollups).

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "key_failure_rollups")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub hour: i64,
    #[sea_orm(primary_key, auto_increment = false)]
    pub key_id: String,
    /// In the key on PostgreSQL (m20261206_000100); a key id names one
    /// tenant's key, so the key is as unique on SQLite without it.
    #[sea_orm(primary_key, auto_increment = false)]
    pub tenant_id: String,
    pub endpoint_id: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub reason: String,
    pub count: i64,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
