//! `key_use_rollups` rows: successful verifications per key and hour
//! (flushed with the other rollups), for the evidence bundle's per-credential
//! counts over its window.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "key_use_rollups")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub hour: i64,
    #[sea_orm(primary_key, auto_increment = false)]
    pub key_id: String,
    /// In the key (PostgreSQL since m20261206_000100, SQLite since
    /// m20261206_000190), as a table distributed by tenant needs; a key id
    /// names one tenant's key, so it holds the same rows as without it.
    #[sea_orm(primary_key, auto_increment = false)]
    pub tenant_id: String,
    pub endpoint_id: String,
    pub count: i64,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
