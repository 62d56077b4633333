//! `kek_versions` rows.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "kek_versions")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub version: i32,
    pub wrapped_key: Vec<u8>,
    pub created_at: i64,
    /// Values sealed under this version, counted ahead: never below the
    /// true number (`vault::Vault::reserve_seals`).
    pub seals: i64,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
