//! Path parameters: one type per shape, read by the handler's `Path`
//! extractor and stated in the OpenAPI document, so the two cannot differ.
//! Each pattern is the one its parser follows (`views::ids`' newtypes,
//! `domain::ids`, `domain::auth::users`). The fields stay text: the handler
//! parses an id where it calls the domain, with `domain::ids::named`, so a
//! value outside its rule names nothing and answers 404, as any unknown name
//! does (after the query and body are checked, as before).

use serde::Deserialize;
use utoipa::IntoParams;

/// `{tenant}`.
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Path)]
pub struct TenantPath {
    /// Tenant slug.
    #[param(schema_with = views::ids::slug_schema)]
    pub tenant: String,
}

/// `{tenant}/…/{endpoint}`.
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Path)]
pub struct EndpointPath {
    /// Tenant slug.
    #[param(schema_with = views::ids::slug_schema)]
    pub tenant: String,
    /// Endpoint slug.
    #[param(schema_with = views::ids::slug_schema)]
    pub endpoint: String,
}

/// `{tenant}/reminders/{reminder_id}`.
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Path)]
pub struct ReminderPath {
    /// Tenant slug.
    #[param(schema_with = views::ids::slug_schema)]
    pub tenant: String,
    /// The provider's reminder id, as its events carry it.
    pub reminder_id: String,
}

/// `{tenant}/endpoints/{endpoint}/events/{event_id}`.
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Path)]
pub struct EventPath {
    /// Tenant slug.
    #[param(schema_with = views::ids::slug_schema)]
    pub tenant: String,
    /// Endpoint slug.
    #[param(schema_with = views::ids::slug_schema)]
    pub endpoint: String,
    /// The event id as its claim records it (1-255 bytes, no control characters or `/`; else 422).
    #[param(schema_with = views::ids::event_id_schema)]
    pub event_id: String,
}

/// `{key_id}`.
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Path)]
pub struct KeyPath {
    /// `key_` and 32 hex characters.
    #[param(schema_with = views::ids::key_id_schema)]
    pub key_id: String,
}

/// `{id}`: a quarantine entry, a bulk release or an outbox intent.
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Path)]
pub struct IdPath {
    /// A UUID, lower-case and hyphenated.
    #[param(schema_with = domain::ids::id_schema)]
    pub id: String,
}

/// `{run_id}`: a drill run.
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Path)]
pub struct RunPath {
    /// A UUID, lower-case and hyphenated.
    #[param(schema_with = domain::ids::id_schema)]
    pub run_id: String,
}

/// `{username}`.
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Path)]
pub struct UserPath {
    #[param(schema_with = domain::auth::users::username_schema)]
    pub username: String,
}

/// `{scheme}`: a signature scheme's name.
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Path)]
pub struct SchemePath {
    #[param(value_type = views::scheme::Scheme)]
    pub scheme: String,
}

/// `{digest}`: an exported evidence bundle.
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Path)]
pub struct DigestPath {
    /// Hex SHA-256 of the bundle's `manifest.json`.
    #[param(schema_with = views::ids::digest_schema)]
    pub digest: String,
}

/// `{tenant}/retry-policy/overrides/{id}`: a break-glass request.
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Path)]
pub struct OverridePath {
    /// Tenant slug.
    #[param(schema_with = views::ids::slug_schema)]
    pub tenant: String,
    /// A UUID, lower-case and hyphenated.
    #[param(schema_with = domain::ids::id_schema)]
    pub id: String,
}
