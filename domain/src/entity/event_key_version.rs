//! `event_key_versions` rows: each decision about an endpoint's compound
//! event key (the envelope fields that identify an event without an id).

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "event_key_versions")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub endpoint_id: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub version: i32,
    /// JSON array of field paths, or `None`: no compound key (quarantine).
    pub fields: Option<String>,
    pub actor: String,
    pub reason: String,
    pub created_at: i64,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
