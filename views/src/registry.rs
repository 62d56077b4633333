use serde::{Deserialize, Serialize};

use crate::{
    ids::{EndpointSlug, TenantSlug},
    retry_policy::RetryPolicy,
    scheme::Scheme,
};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TenantView {
    pub id: String,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub slug: TenantSlug,
    pub name: String,
    pub notify_url: Option<String>,
    pub created_at: String,
    /// New tenants start `disabled`: see `retry_policy`.
    pub retry_policy: RetryPolicy,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EndpointView {
    pub id: String,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub tenant: TenantSlug,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub slug: EndpointSlug,
    pub scheme: Scheme,
    pub event_types: Vec<String>,
    pub tolerance_secs: i64,
    pub max_body_bytes: i64,
    pub enabled: bool,
    pub created_at: String,
    /// The compound event key for events without an id (envelope fields),
    /// or `None`: such events are quarantined (`registry::event_key`).
    pub event_key: Option<Vec<String>>,
    /// The signing profile of an `hmac` endpoint (`None` for the others).
    pub hmac_profile: Option<crate::hmac::HmacProfile>,
}

/// One decision about an endpoint's compound key.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EventKeyVersionView {
    pub version: i32,
    /// The fields, or `None`: events without an id are quarantined.
    pub fields: Option<Vec<String>>,
    pub actor: String,
    pub reason: String,
    pub created_at: String,
}

/// An endpoint's compound key now, with its history (newest first).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EventKeyView {
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub tenant: TenantSlug,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub endpoint: EndpointSlug,
    pub fields: Option<Vec<String>>,
    pub history: Vec<EventKeyVersionView>,
}
