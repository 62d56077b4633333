use serde::{Deserialize, Serialize};

use crate::ids::{EndpointSlug, TenantSlug};

const HOUR: i64 = 3_600;
const DAY: i64 = 86_400;

/// One version of a scheme's redelivery horizon.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HorizonView {
    pub scheme: String,
    pub horizon_secs: i64,
    pub version: i32,
    pub actor: String,
    pub reason: String,
    pub created_at: String,
    /// Where the value comes from (the sender's published retry schedule),
    /// when recorded.
    pub source: Option<String>,
    /// The sender's manual resend window: how far back a person can resend
    /// an event by hand (0 where none is recorded). `horizon_secs` is the
    /// automatic retry window (with margin).
    #[serde(default)]
    pub manual_resend_secs: i64,
    /// Where the manual resend window comes from.
    #[serde(default)]
    pub manual_resend_source: Option<String>,
}

/// One retention decision for an endpoint.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RetentionVersionView {
    pub version: i32,
    pub dedup_secs: i64,
    pub body_secs: i64,
    /// The scheme's horizon when this decision was made.
    pub horizon_secs: i64,
    pub actor: String,
    pub reason: String,
    pub created_at: String,
}

/// An endpoint's retention as the purge applies it, with its history
/// (newest first; empty in the overview).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RetentionView {
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub tenant: TenantSlug,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub endpoint: EndpointSlug,
    pub scheme: String,
    /// The current decision.
    pub current: RetentionVersionView,
    /// The scheme's horizon now.
    pub horizon_secs: i64,
    /// What the purge uses: never less than the current horizon.
    pub effective_dedup_secs: i64,
    /// The decision keeps claims for less than the scheme's horizon now (the
    /// horizon was raised since): the purge keeps them for the horizon
    /// anyway, but the decision on record should be raised, by a person.
    pub below_horizon: bool,
    /// The scheme's manual resend window now (0: none recorded).
    #[serde(default)]
    pub manual_resend_secs: i64,
    /// The decision keeps claims for less than the manual resend window: a
    /// person resending an older event would apply it twice. Only set with
    /// the risk accepted on record (or decided before the window was).
    #[serde(default)]
    pub below_manual_resend: bool,
    pub history: Vec<RetentionVersionView>,
}

/// Every visible endpoint's retention and every scheme's horizon: the
/// retention part of the evidence export.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RetentionOverview {
    /// Current horizon per scheme.
    pub horizons: Vec<HorizonView>,
    /// Every horizon version, newest first.
    pub horizon_history: Vec<HorizonView>,
    pub endpoints: Vec<RetentionView>,
}

/// "30 d", "1 d 3 h", "90 min": for error messages and the UI.
pub fn human(secs: i64) -> String {
    let (d, h, m) = (secs / DAY, secs % DAY / HOUR, secs % HOUR / 60);
    match (d, h, m) {
        (0, 0, m) => format!("{m} min"),
        (0, h, 0) => format!("{h} h"),
        (d, 0, 0) => format!("{d} d"),
        (0, h, m) => format!("{h} h {m} min"),
        (d, h, _) => format!("{d} d {h} h"),
    }
}
