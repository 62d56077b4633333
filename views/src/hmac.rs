//! HMAC profiles: how a sender outside the fixed schemes signs (issue 26
//! item 2). The request form ([`HmacProfileBody`]: a preset's name, or every
//! field) and the stored, resolved form ([`HmacProfile`]). Validation, the
//! presets and the OpenAPI schema live with the registry
//! (`domain::registry::hmac_profile`).

use serde::{Deserialize, Serialize};

/// A sender whose published format Signet knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Hash)]
#[serde(rename_all = "lowercase")]
pub enum HmacPreset {
    /// The dvir sender (docs/architecture.md#the-dvir-sender):
    /// `X-DVIR-Signature: t=<unix>,v1=<hex>` over `{t}.{body}`, the event id at
    /// `/event_id` in the body.
    Dvir,
    /// `X-Shopify-Hmac-Sha256`: base64 over the body, the id in
    /// `X-Shopify-Webhook-Id`, no timestamp.
    Shopify,
    /// `X-Slack-Signature: v0=<hex>` over `v0:{timestamp}:{body}`, the
    /// timestamp in `X-Slack-Request-Timestamp`.
    Slack,
}

impl HmacPreset {
    pub const ALL: [HmacPreset; 3] = [HmacPreset::Dvir, HmacPreset::Shopify, HmacPreset::Slack];

    pub fn as_str(self) -> &'static str {
        match self {
            HmacPreset::Dvir => "dvir",
            HmacPreset::Shopify => "shopify",
            HmacPreset::Slack => "slack",
        }
    }

    pub fn from_name(text: &str) -> Option<HmacPreset> {
        HmacPreset::ALL.into_iter().find(|p| p.as_str() == text)
    }
}

/// How the signature header carries the digest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Hash)]
#[serde(rename_all = "lowercase")]
pub enum SignatureFormat {
    /// The whole value is `prefix` + the digest.
    Digest,
    /// `t=<unix>,v1=<digest>[,v1=<digest>…]`: the timestamp is `t`; other
    /// keys are ignored; `prefix` is taken off each `v1` value.
    Pairs,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Hash)]
#[serde(rename_all = "lowercase")]
pub enum SignatureEncoding {
    Hex,
    /// Standard base64 with padding.
    Base64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Hash)]
#[serde(rename_all = "lowercase")]
pub enum HmacAlgorithm {
    Sha256,
    Sha512,
}

impl HmacAlgorithm {
    /// The MAC's length in bytes.
    pub fn mac_len(self) -> usize {
        match self {
            HmacAlgorithm::Sha256 => 32,
            HmacAlgorithm::Sha512 => 64,
        }
    }
}

/// `hmac_profile` in a request: `{"preset": "dvir"}`, or every field of a
/// custom profile. One flat object, so a strict reader names an unknown or
/// mistyped field; which combinations are valid is the OpenAPI schema's
/// `HmacProfileBody` and `domain::registry::hmac_profile::resolve`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HmacProfileBody {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<HmacPreset>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature_header: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature_format: Option<SignatureFormat>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<SignatureEncoding>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub algorithm: Option<HmacAlgorithm>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed_content: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp_header: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "crate::integral::optional")]
    pub tolerance_secs: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_id: Option<String>,
}

impl HmacProfileBody {
    pub fn preset(preset: HmacPreset) -> Self {
        HmacProfileBody { preset: Some(preset), ..Default::default() }
    }
}

/// A validated profile, as stored with its endpoint and shown. Immutable
/// once the endpoint exists (the endpoint's scheme is, too): the keys'
/// approvals were given for exactly this profile.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Hash)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HmacProfile {
    /// The preset it was made from, if any.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub preset: Option<HmacPreset>,
    pub signature_header: String,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub signature_format: SignatureFormat,
    pub prefix: String,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub encoding: SignatureEncoding,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub algorithm: HmacAlgorithm,
    /// A template over `{body}`, `{timestamp}` and `{id}`.
    pub signed_content: String,
    /// A separate timestamp header (`digest` format); `pairs` carry `t`.
    pub timestamp_header: Option<String>,
    /// `header:<name>` or `json:<JSON pointer>`; `None`: the envelope's `id`.
    pub event_id: Option<String>,
}

impl HmacProfile {
    /// Whether the sender signs a timestamp (then the window applies).
    pub fn has_timestamp(&self) -> bool {
        self.signature_format == SignatureFormat::Pairs || self.timestamp_header.is_some()
    }
    /// The header the event id is read from, if any.
    pub fn id_header(&self) -> Option<&str> {
        self.event_id.as_deref()?.strip_prefix("header:")
    }
    /// The JSON pointer the event id is read from (after verification).
    pub fn id_pointer(&self) -> Option<&str> {
        self.event_id.as_deref()?.strip_prefix("json:")
    }
    /// One line for people: `preset dvir` or the header and algorithm.
    pub fn describe(&self) -> String {
        match self.preset {
            Some(p) => format!("hmac preset {}", p.as_str()),
            None => {
                format!("hmac {} ({:?}, {:?})", self.signature_header, self.algorithm, self.encoding).to_lowercase()
            }
        }
    }
}
