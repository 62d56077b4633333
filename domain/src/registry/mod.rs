//! Tenants (clinics), their endpoints, and the signing keys scoped to them.
//!
//! Queries for tenant-owned rows go through finders that take the caller's
//! [`Principal`](crate::auth::Principal), so a resource outside the caller's
//! tenant is simply not found.

pub mod defaults;
pub mod endpoints;
pub mod event_key;
pub mod hmac_profile;
pub mod keys;
mod scheme;
pub mod tenants;

pub use scheme::{
    DEFAULT_TOLERANCE_SECS, MAX_EVENT_TYPE_LEN, MAX_TOLERANCE_SECS, event_type_pattern, parse_scheme,
    validate_event_types,
};
#[cfg(feature = "openapi")]
pub use scheme::{event_types_schema, optional_event_types_schema};
