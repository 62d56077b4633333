//! Signature schemes (which of docs/contract.md §3's header formats a provider
//! signs with) and event-type sets. Parsing them from what a person typed, with
//! the domain's errors, lives with the registry.

use serde::{Deserialize, Serialize};

/// How an endpoint's providers sign (docs/contract.md §3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Hash)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "kebab-case")]
pub enum Scheme {
    StandardWebhooks,
    Stripe,
    Github,
    /// A sender's own HMAC format, described by the endpoint's profile
    /// (`hmac::HmacProfile`).
    Hmac,
}

impl Scheme {
    pub const ALL: [Scheme; 4] = [Scheme::StandardWebhooks, Scheme::Stripe, Scheme::Github, Scheme::Hmac];
    /// The schemes whose format is fixed (no profile). The drills cover
    /// these with one endpoint each and `hmac` with one per profile.
    pub const FIXED: [Scheme; 3] = [Scheme::StandardWebhooks, Scheme::Stripe, Scheme::Github];

    /// The scheme with this name (`standard-webhooks`, `stripe`, `github`,
    /// `hmac`).
    pub fn from_name(text: &str) -> Option<Scheme> {
        Scheme::ALL.into_iter().find(|s| s.as_str() == text)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::StandardWebhooks => "standard-webhooks",
            Scheme::Stripe => "stripe",
            Scheme::Github => "github",
            Scheme::Hmac => "hmac",
        }
    }
}

impl std::fmt::Display for Scheme {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A set of event types, sorted and de-duplicated. `["*"]` means any type.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EventTypes(Vec<String>);

pub const ANY_TYPE: &str = "*";

impl EventTypes {
    /// A set already checked, sorted and de-duplicated (the domain's
    /// `validate_event_types`).
    pub fn from_validated(types: Vec<String>) -> Self {
        EventTypes(types)
    }
    pub fn any() -> Self {
        EventTypes(vec![ANY_TYPE.to_owned()])
    }
    pub fn is_any(&self) -> bool {
        self.0.iter().any(|t| t == ANY_TYPE)
    }
    pub fn as_slice(&self) -> &[String] {
        &self.0
    }
    /// Whether an event of type `t` is within this set.
    pub fn permits(&self, t: &str) -> bool {
        self.is_any() || self.0.iter().any(|x| x == t)
    }
    /// Whether every type in `other` is within this set.
    pub fn covers(&self, other: &EventTypes) -> bool {
        self.is_any() || (!other.is_any() && other.0.iter().all(|t| self.permits(t)))
    }
    pub fn to_json(&self) -> String {
        serde_json::Value::from(self.0.clone()).to_string()
    }
    /// Reads the stored JSON form; a corrupt value permits nothing.
    pub fn from_json(text: &str) -> Self {
        EventTypes(serde_json::from_str(text).unwrap_or_default())
    }
    /// Human form: `any event type` or `a, b`.
    pub fn describe(&self) -> String {
        if self.is_any() { "any event type".to_owned() } else { self.0.join(", ") }
    }
}
