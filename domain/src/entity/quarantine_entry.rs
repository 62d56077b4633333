//! `quarantine` rows.

use sea_orm::entity::prelude::*;
use views::quarantine::{QuarantineReason, QuarantineStatus};

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "quarantine")]
pub struct Model {
    /// The key is (tenant, id), as every key of a table distributed by
    /// tenant is (`migrations::distribution`).
    #[sea_orm(primary_key, auto_increment = false)]
    pub tenant_id: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub endpoint_id: String,
    pub event_id: String,
    pub reason: QuarantineReason,
    pub status: QuarantineStatus,
    pub created_at: i64,
    /// When, by whom and why it was released or discarded.
    pub resolved_at: Option<i64>,
    pub resolved_by: Option<String>,
    pub resolution_note: Option<String>,
    /// Why the latest release attempt could not apply (it stays open).
    pub last_release_error: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
