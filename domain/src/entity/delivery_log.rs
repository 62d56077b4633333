//! `delivery_log` rows: one per answer to a delivery whose event id was
//! readable. Never a body or a signature.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "delivery_log")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub tenant_id: String,
    pub endpoint_id: String,
    pub event_id: String,
    /// When Signet answered (ms).
    pub answered_at: i64,
    /// The HTTP status of the answer.
    pub status: i32,
    /// The answer's `status` or `error` code (`applied`, `duplicate`,
    /// `signature_mismatch`, …).
    pub answer: String,
    /// The key that verified, or the one a refusal is counted under.
    pub key_id: Option<String>,
    pub scheme: String,
    /// The signed message's digest when it verified: links the replay record.
    pub message_digest: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
