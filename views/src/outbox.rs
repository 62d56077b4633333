use serde::{Deserialize, Serialize};

/// An intent as on-call sees it: metadata, never the payload.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OutboxView {
    pub id: String,
    pub tenant: String,
    pub kind: String,
    pub idempotency_key: String,
    /// `pending`, `sending`, `sent` or `dead`.
    pub status: String,
    pub attempts: i32,
    pub next_attempt_at: String,
    pub created_at: String,
    pub delivered_at: Option<String>,
    pub last_error: Option<String>,
}
