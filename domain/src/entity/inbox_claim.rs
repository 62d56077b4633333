//! `inbox_claims` rows. The sealed body is an `event_bodies` row
//! ([`super::event_body`]): retention never updates a claim.

use sea_orm::entity::prelude::*;
use views::events::ClaimOutcome;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "inbox_claims")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub tenant_id: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub endpoint_id: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub event_id: String,
    /// SHA-256 (hex) of the exact received body.
    pub body_digest: String,
    pub event_type: Option<String>,
    pub key_id: String,
    /// A release rewrites it (`quarantined` to `applied` or `stale_transition`).
    pub outcome: ClaimOutcome,
    pub received_at: i64,
    /// The answer the event's first accepted delivery got (`applied`,
    /// `stale_transition`, `quarantined`): unlike `outcome`, never rewritten
    /// by a release. The story reads that delivery from here, not from the
    /// delivery log (m20261206_000140). `NULL` on older claims and on the
    /// compound-key claims a release takes.
    pub first_answer: Option<ClaimOutcome>,
    /// That delivery's signed-message digest: names its replay record.
    pub message_digest: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
