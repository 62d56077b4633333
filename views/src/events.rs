use serde::{Deserialize, Serialize};

/// A received event: metadata only.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EventView {
    pub event_id: String,
    pub endpoint: String,
    pub event_type: Option<String>,
    /// `applied`, `quarantined` or `stale_transition`.
    pub outcome: String,
    pub key_id: String,
    pub body_sha256: String,
    pub received_at: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReminderView {
    pub reminder_id: String,
    /// `scheduled` or `canceled`.
    pub status: String,
    pub send_at: String,
    pub created_at: String,
    pub updated_at: String,
}
