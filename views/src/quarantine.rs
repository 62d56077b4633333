use serde::{Deserialize, Serialize};

use crate::{
    ids::{EndpointSlug, KeyId},
    string_enum::string_enum,
};

string_enum! {
    /// An entry's triage state, as stored in `quarantine.status`.
    pub enum QuarantineStatus {
        Open = "open",
        Released = "released",
        Discarded = "discarded",
    }
}

string_enum! {
    /// Why the receiver kept an authenticated event in quarantine, as stored in
    /// `quarantine_entries.reason` and answered in its 202.
    pub enum QuarantineReason {
        /// The body is not Signet's envelope.
        MalformedEnvelope = "malformed_envelope",
        /// The envelope has no event id (claimed per signed message instead).
        MissingEventId = "missing_event_id",
        /// No handler for the event type.
        UnknownEventType = "unknown_event_type",
        /// A field the handler needs is missing or malformed.
        InvalidData = "invalid_data",
        /// `reminder.created` for an id that exists.
        ReminderExists = "reminder_exists",
        /// A transition for a reminder that does not exist.
        ReminderNotFound = "reminder_not_found",
        /// A reminder transition whose order against the reminder's state is
        /// unknown (no `occurred_at`, and it contradicts a state applied since
        /// creation). Releasing such an entry applies it.
        AmbiguousOrder = "ambiguous_order",
        /// Transient failures ran out under a tenant whose retry policy is
        /// `disabled`: kept rather than answered 503; a release retries it.
        Transient = "transient",
    }
}

string_enum! {
    /// What a bulk release did with one entry, as stored in
    /// `bulk_release_items.outcome` (`NULL` while pending).
    pub enum BulkItemOutcome {
        Released = "released",
        /// Its handler still could not apply it; it stays open.
        StillFailing = "still_failing",
        /// Someone else released or discarded it first.
        AlreadyResolved = "already_resolved",
    }
}

/// The `status` filter's values (empty: `open`).
pub const STATUS_FILTERS: [&str; 5] = [
    "",
    QuarantineStatus::Open.as_str(),
    QuarantineStatus::Released.as_str(),
    QuarantineStatus::Discarded.as_str(),
    "all",
];

/// The `age` filter's values (empty: any age).
pub const AGES: [&str; 4] = ["", "1h", "24h", "7d"];

#[cfg(feature = "openapi")]
fn status_param() -> utoipa::openapi::Object {
    crate::openapi::one_of(&STATUS_FILTERS)
}

#[cfg(feature = "openapi")]
fn status_schema() -> utoipa::openapi::Object {
    crate::openapi::nullable_one_of(&STATUS_FILTERS)
}

#[cfg(feature = "openapi")]
fn age_param() -> utoipa::openapi::Object {
    crate::openapi::one_of(&AGES)
}

#[cfg(feature = "openapi")]
fn age_schema() -> utoipa::openapi::Object {
    crate::openapi::nullable_one_of(&AGES)
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema, utoipa::IntoParams), into_params(parameter_in = Query))]
pub struct QuarantineFilter {
    /// Tenant slug.
    pub tenant: Option<String>,
    /// Endpoint slug (needs `tenant`).
    pub endpoint: Option<String>,
    /// A quarantine reason (see `QuarantineView.reason`), e.g. `ambiguous_order`.
    pub reason: Option<String>,
    /// `open` (default), `released`, `discarded` or `all`.
    #[cfg_attr(feature = "openapi", schema(schema_with = status_schema), param(schema_with = status_param))]
    pub status: Option<String>,
    /// Only entries quarantined within the last `1h`, `24h` or `7d`.
    #[cfg_attr(feature = "openapi", schema(schema_with = age_schema), param(schema_with = age_param))]
    pub age: Option<String>,
    /// 1–500, default 100.
    #[cfg_attr(
        feature = "openapi",
        schema(schema_with = crate::paging::optional_list_schema),
        param(schema_with = crate::paging::list_schema)
    )]
    #[serde(default, deserialize_with = "crate::integral::optional")]
    pub limit: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct QuarantineView {
    pub id: String,
    pub tenant: String,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub endpoint: EndpointSlug,
    pub event_id: String,
    pub event_type: Option<String>,
    /// Why the receiver kept it: `malformed_envelope`, `missing_event_id`, `unknown_event_type`,
    /// `invalid_data`, `reminder_exists`, `reminder_not_found`, `ambiguous_order` (a reminder
    /// transition whose order is unknown: releasing it applies it as the newest) or `transient`.
    pub reason: QuarantineReason,
    pub status: QuarantineStatus,
    pub quarantined_at: String,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub key_id: Option<KeyId>,
    pub body_sha256: Option<String>,
    /// False once body retention has purged it.
    pub body_stored: bool,
    pub resolved_at: Option<String>,
    pub resolved_by: Option<String>,
    pub resolution_note: Option<String>,
    pub last_release_error: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct QuarantineReasonCount {
    pub reason: QuarantineReason,
    pub count: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct QuarantineList {
    /// Entries matching the whole filter (the listing shows at most `limit`).
    pub total: u64,
    /// Matching entries by reason, ignoring the reason filter.
    pub by_reason: Vec<QuarantineReasonCount>,
    pub items: Vec<QuarantineView>,
}

/// A decrypted body, redacted for display.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RevealedBody {
    /// Whether the body parsed as JSON. Only a JSON body can be redacted, so
    /// only a JSON body is shown: for any other, `text` is empty.
    pub json: bool,
    /// The redacted JSON, pretty-printed; empty when the body is not JSON.
    pub text: String,
    pub redacted_fields: Vec<String>,
    /// The stored body's size in bytes.
    pub size_bytes: u64,
}

use crate::jobs::RunStatus;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BulkReleaseView {
    pub id: String,
    /// The filter the entries were selected by (always `open` entries).
    pub filter: QuarantineFilter,
    /// Recorded on every released entry and in the audit log.
    pub reason: String,
    pub started_by: String,
    /// `failed`: see `error`; `interrupted`: the runner stopped reporting
    /// (resume it); `canceled`: what was released stays released, the rest
    /// stays open.
    pub status: RunStatus,
    /// Entries snapshotted at the start.
    pub total: u64,
    pub processed: u64,
    pub released: u64,
    /// Entries whose handler still could not apply; they stay open.
    pub still_failing: u64,
    /// Entries someone else released or discarded first.
    pub already_resolved: u64,
    pub error: Option<String>,
    pub started_at: String,
    pub updated_at: String,
    /// When it finished or was canceled.
    pub finished_at: Option<String>,
    /// Up to 100 still-failing entries and why (only in single-job views).
    pub failures: Vec<BulkFailure>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BulkFailure {
    /// The quarantine entry id.
    pub id: String,
    /// The provider's event id.
    pub event_id: String,
    pub error: String,
}

impl BulkReleaseView {
    pub fn is_running(&self) -> bool {
        self.status == RunStatus::Running
    }
    /// Progress in whole percent (0–100).
    pub fn percent(&self) -> u64 {
        (self.processed * 100).checked_div(self.total).unwrap_or(100).min(100)
    }
}

#[cfg(test)]
mod tests {
    use super::BulkItemOutcome;

    #[test]
    fn bulk_item_outcomes_keep_the_stored_words() {
        let words: Vec<&str> = BulkItemOutcome::ALL.iter().map(|o| o.as_str()).collect();
        assert_eq!(words, ["released", "still_failing", "already_resolved"]);
    }
}
