use serde::{Deserialize, Serialize};

use crate::{ids::TenantSlug, string_enum::string_enum};

string_enum! {
    /// An intent's delivery state, as stored in `outbox_intents.status`.
    pub enum OutboxStatus {
        /// Waiting for its next attempt.
        Pending = "pending",
        /// Leased to a worker until `lease_until`.
        Sending = "sending",
        Sent = "sent",
        /// Given up on; on-call may retry it by hand.
        Dead = "dead",
    }
}

/// An intent as on-call sees it: metadata, never the payload.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OutboxView {
    pub id: String,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub tenant: TenantSlug,
    pub kind: String,
    pub idempotency_key: String,
    pub status: OutboxStatus,
    pub attempts: i32,
    pub next_attempt_at: String,
    pub created_at: String,
    pub delivered_at: Option<String>,
    pub last_error: Option<String>,
}
