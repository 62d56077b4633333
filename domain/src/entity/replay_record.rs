//! `replay_records` rows.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "replay_records")]
pub struct Model {
    /// The endpoint's tenant: the key leads with it, as every key of a table
    /// distributed by tenant does (`migrations::distribution`).
    #[sea_orm(primary_key, auto_increment = false)]
    pub tenant_id: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub endpoint_id: String,
    /// SHA-256 of the exact signed message (timestamp, id, body).
    #[sea_orm(primary_key, auto_increment = false)]
    pub message_digest: String,
    /// The signed timestamp (ms), which the digest covers, or 0 where none
    /// is signed: the day partition on PostgreSQL
    /// (`receiver::verify::Verified::replay_signed_at`).
    #[sea_orm(primary_key, auto_increment = false)]
    pub signed_at: i64,
    pub expires_at: i64,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
