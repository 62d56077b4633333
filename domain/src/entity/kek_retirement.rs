//! `kek_retirements` rows: KEK versions removed from the ring once no row
//! used them (see `kek::retire`).

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "kek_retirements")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub version: i32,
    /// When the version was created.
    pub created_at: i64,
    pub retired_at: i64,
    pub retired_by: String,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
