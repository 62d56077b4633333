//! `evidence_signoffs` rows: a reviewer's approval or rejection of one
//! exported bundle (by its manifest digest).

use sea_orm::entity::prelude::*;
use views::decision::Decision;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "evidence_signoffs")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub digest: String,
    pub tenant_id: Option<String>,
    pub decision: Decision,
    pub comment: String,
    pub actor: String,
    pub actor_kind: String,
    pub at: i64,
    /// JSON array of `{finding, comment}`: the reviewer's acknowledgements.
    pub acknowledged: String,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
