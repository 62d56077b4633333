//! `delivery_log` rows: one per answer to a delivery whose event id was
//! readable, except the answer that made the event's claim, which the claim
//! itself records (`inbox_claims.first_answer`): duplicates, refusals,
//! replays and 503s. Never a body or a signature.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "delivery_log")]
pub struct Model {
    /// The key is (tenant_id, id, answered_at), as a table partitioned by
    /// `answered_at` and distributed by tenant needs (PostgreSQL since
    /// m20261206_000100, SQLite since m20261206_000190). The id is a fresh
    /// UUID; the purge deletes by it.
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub tenant_id: String,
    pub endpoint_id: String,
    pub event_id: String,
    /// When Signet answered (ms): the partition key on PostgreSQL.
    #[sea_orm(primary_key, auto_increment = false)]
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
