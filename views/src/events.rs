use serde::{Deserialize, Serialize};

use crate::{
    ids::{EndpointSlug, KeyId},
    string_enum::string_enum,
};

/// A received event: metadata only.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EventView {
    pub event_id: String,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub endpoint: EndpointSlug,
    pub event_type: Option<String>,
    pub outcome: ClaimOutcome,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub key_id: KeyId,
    pub body_sha256: String,
    pub received_at: String,
}

string_enum! {
    /// How a claim was resolved, as stored in `inbox_claims.outcome` (a
    /// release rewrites it) and `first_answer` (never rewritten), and as a
    /// duplicate's answer names the original (`"original"`).
    pub enum ClaimOutcome {
        Applied = "applied",
        Quarantined = "quarantined",
        /// Claimed, but the reminder's state refused the transition.
        StaleTransition = "stale_transition",
    }
}

string_enum! {
    /// A reminder's state, as stored in `reminders.status`.
    pub enum ReminderStatus {
        Scheduled = "scheduled",
        Canceled = "canceled",
    }
}

string_enum! {
    /// How the transition that set a reminder's state was ordered, as stored
    /// in `reminders.state_order` (`NULL`: no transition since creation).
    pub enum StateOrder {
        /// By the sender's `occurred_at` (then in `reminders.state_at`).
        OccurredAt = "occurred_at",
        /// Without a sender order.
        Unordered = "none",
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReminderView {
    pub reminder_id: String,
    pub status: ReminderStatus,
    pub send_at: String,
    pub created_at: String,
    pub updated_at: String,
}

/// One event's whole story (`GET …/events/{event_id}`): metadata only, never
/// the body. Exactly these keys.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EventStory {
    /// The claim, while dedup retention keeps it (`None`: never claimed, or purged).
    pub claim: Option<StoryClaim>,
    /// Every answer Signet gave to a delivery naming this event, oldest first.
    pub deliveries: Vec<StoryDelivery>,
    /// The replay records of the signed messages that verified.
    pub replay: Vec<StoryReplay>,
    pub quarantine: Option<StoryQuarantine>,
    pub reminder: Option<StoryReminder>,
    /// The outbox intents the event created, with their send attempts.
    pub outbox: Vec<crate::outbox::OutboxView>,
    /// Audit entries that name the event, its quarantine entry or its intents, oldest first.
    pub audit: Vec<crate::audit::AuditView>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StoryClaim {
    pub event_type: Option<String>,
    pub outcome: ClaimOutcome,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub key_id: KeyId,
    pub body_sha256: String,
    /// False once body retention has cleared it.
    pub body_stored: bool,
    pub received_at: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StoryDelivery {
    pub answered_at: String,
    /// The HTTP status answered.
    pub status: u16,
    /// The answer's `status` or `error` code: `applied`, `duplicate`, `quarantined`,
    /// `signature_mismatch`, `replay`, `unavailable`, …
    pub answer: String,
    /// The key that verified, or the one a refusal is counted under.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub key_id: Option<KeyId>,
    pub scheme: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StoryReplay {
    pub message_sha256: String,
    /// When the replay window this record guards ends: a copy of a signed
    /// message is stale by then anyway; where nothing is signed with a
    /// timestamp (GitHub), the same signed bytes are accepted again after.
    pub expires_at: String,
    /// When the purge removes the record: `expires_at`, or on PostgreSQL,
    /// for a signed record, when its signed day's partition is dropped,
    /// which may come before `expires_at` (a record received long after
    /// it was signed): the timestamp gate refuses a copy from then on.
    pub kept_until: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StoryQuarantine {
    pub entry: crate::quarantine::QuarantineView,
    /// Its triage history (audit entries on the entry), oldest first.
    pub triage: Vec<crate::audit::AuditView>,
    /// The audited reveal of its body (API; the console page is `/quarantine/{id}`).
    pub reveal: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StoryReminder {
    pub reminder_id: String,
    /// The transition the event asked for (its type: `reminder.scheduled`, …).
    pub transition: String,
    /// What became of it.
    pub outcome: ClaimOutcome,
    /// The reminder now.
    pub current: Option<ReminderView>,
}

/// Where an event's story is: the console page `/events/{tenant}/{endpoint}/{event_id}`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EventRef {
    pub tenant: String,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub endpoint: EndpointSlug,
    pub event_id: String,
}
