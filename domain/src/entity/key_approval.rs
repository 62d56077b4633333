//! `key_approvals` rows.

use sea_orm::entity::prelude::*;
use views::decision::Decision;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "key_approvals")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub key_id: String,
    pub decision: Decision,
    pub reviewer: String,
    pub comment: String,
    pub scope_hash: String,
    /// JSON of the scope the reviewer saw.
    pub scope_summary: String,
    pub decided_at: i64,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
