//! `outbox_intents` rows.

use sea_orm::entity::prelude::*;
use views::outbox::OutboxStatus;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "outbox_intents")]
pub struct Model {
    /// The key is (tenant, id), as every key of a table distributed by
    /// tenant is (`migrations::distribution`).
    #[sea_orm(primary_key, auto_increment = false)]
    pub tenant_id: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    /// `reminder_notice` or `otp`.
    pub kind: String,
    /// Unique per tenant: at most one intent per key, ever.
    pub idempotency_key: String,
    /// Sealed JSON (for OTPs it holds the code minted once at creation).
    pub payload_ciphertext: Vec<u8>,
    pub kek_version: i32,
    pub status: OutboxStatus,
    pub attempts: i32,
    pub next_attempt_at: i64,
    pub created_at: i64,
    /// While `sending`: when another worker may take the intent over.
    pub lease_until: Option<i64>,
    pub delivered_at: Option<i64>,
    pub last_error: Option<String>,
    /// The W3C `traceparent` of the webhook that created the intent, while
    /// traces are exported (`NULL` otherwise): the relay's send continues
    /// that trace.
    pub trace_context: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
