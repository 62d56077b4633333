//! `bulk_release_items` rows: the entries a bulk release snapshotted when it
//! started, in order, each with its outcome once processed.

use sea_orm::entity::prelude::*;
use views::quarantine::BulkItemOutcome;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "bulk_release_items")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub job_id: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub position: i32,
    pub entry_id: String,
    /// `None` while pending.
    pub outcome: Option<BulkItemOutcome>,
    pub error: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
