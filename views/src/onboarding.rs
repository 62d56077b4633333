//! Onboarding a provider: what an endpoint expects a provider to send, and
//! what a test delivery from the console or the API went through.

use serde::{Deserialize, Serialize};

use crate::{
    hmac::HmacProfile,
    ids::{EndpointSlug, EventId, KeyId, TenantSlug},
    scheme::Scheme,
};

/// How far a test delivery got at one gate of the receiver (docs/contract.md §3).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum GateResult {
    Passed,
    Failed,
    /// An earlier gate stopped the delivery.
    NotReached,
}

impl GateResult {
    pub fn as_str(self) -> &'static str {
        match self {
            GateResult::Passed => "passed",
            GateResult::Failed => "failed",
            GateResult::NotReached => "not_reached",
        }
    }
}

/// One gate's outcome, in the receiver's order.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GateView {
    /// 1 to 9 (docs/contract.md §3).
    pub gate: u8,
    /// What the gate checks: `endpoint`, `body_size`, `signature_headers`,
    /// `signature`, `timestamp`, `replay`, `envelope`, `scope`, `claim`.
    pub name: String,
    pub result: GateResult,
    /// The answer's code where this gate decided it (`signature_mismatch`,
    /// `applied`, …).
    pub code: Option<String>,
}

/// What a test delivery went through. Its claim, replay record, effect and
/// outbox intents ran in a transaction that was rolled back: nothing of it
/// is kept, and a later real event with the same id is not a duplicate.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TestDeliveryView {
    /// Always `true`: a test, counted apart from real traffic.
    pub test: bool,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub tenant: TenantSlug,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub endpoint: EndpointSlug,
    pub scheme: Scheme,
    /// The endpoint's own key that signed it.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub key_id: KeyId,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub event_id: EventId,
    pub event_type: String,
    /// Gates 1 to 9, in order.
    pub gates: Vec<GateView>,
    /// The HTTP status a provider would have been answered.
    pub status: u16,
    /// The answer's `status` or `error` code (`applied`, `signature_mismatch`, …).
    pub outcome: String,
    /// The JSON body a provider would have been answered.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub answer: serde_json::Value,
    /// Always `false`: nothing of a test delivery is kept.
    pub kept: bool,
}

/// One header a provider sends, with a placeholder value.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HeaderGuide {
    pub name: String,
    pub value: String,
}

/// Whether the console can send a test delivery, and if not, why.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TestAbility {
    pub possible: bool,
    /// The error code a test delivery would answer (`no_active_key`,
    /// `key_cannot_sign`).
    pub code: Option<String>,
    pub reason: Option<String>,
}

/// What an endpoint expects a provider to send.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OnboardingView {
    pub tenant: TenantSlug,
    pub endpoint: EndpointSlug,
    /// The public URL of `/hooks/{tenant}/{endpoint}`.
    pub url: String,
    pub scheme: Scheme,
    /// Scheme `hmac`: the endpoint's profile, every field of it.
    pub hmac_profile: Option<HmacProfile>,
    /// How far a signed timestamp may be from now, in seconds, either way.
    pub tolerance_secs: i64,
    pub headers: Vec<HeaderGuide>,
    /// The bytes the signature covers, as a template.
    pub signed_content: String,
    pub signature: String,
    /// Where the event id comes from.
    pub event_id_source: String,
    /// A sample body within the endpoint's event types.
    pub sample_body: String,
    /// A ready `curl` command, signed with a placeholder (`whsec_PLACEHOLDER`):
    /// the provider signs with its own secret.
    pub curl: String,
    /// The same delivery with `signet send`, which signs for itself.
    pub send_command: String,
    /// `v1a` public keys of the endpoint's accepted keys (`key_id`, `whpk_…`).
    pub public_keys: Vec<(String, String)>,
    pub test: TestAbility,
    /// The newest test delivery to this endpoint (from the audit log).
    pub last_test: Option<LastTestDelivery>,
}

/// A test delivery as the audit log recorded it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LastTestDelivery {
    pub at: String,
    pub actor: String,
    pub delivery: TestDeliveryView,
}
