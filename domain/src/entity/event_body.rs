//! `event_bodies` rows: a claim's sealed body, kept for the endpoint's body
//! retention (m20261207_000220; partitioned by day of `filed_at` on
//! PostgreSQL, `domain::retention::partitions`). The primary key, in field
//! order, is the table's only index.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "event_bodies")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub endpoint_id: String,
    /// The claim's `received_at`: body retention counts from it.
    #[sea_orm(primary_key, auto_increment = false)]
    pub received_at: i64,
    #[sea_orm(primary_key, auto_increment = false)]
    pub tenant_id: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub event_id: String,
    /// The day partition it is filed in: `received_at`, or when the purge
    /// carried an open quarantine entry's body forward past its day's drop.
    #[sea_orm(primary_key, auto_increment = false)]
    pub filed_at: i64,
    pub kek_version: i32,
    /// Sealed with `Aad::event_body(tenant, endpoint, event id)`.
    pub body_ciphertext: Vec<u8>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
