//! Identifiers: validated slugs (docs/contract.md §2) and generated ids.

use crate::error::DomainError;

/// The longest slug.
pub const SLUG_MAX_LEN: usize = 63;

/// The slug rule as a regular expression, `^[a-z0-9][a-z0-9-]{0,62}$`: what
/// error messages and the OpenAPI document state, built from the same
/// bound [`is_slug`] checks.
pub fn slug_pattern() -> String {
    format!("^[a-z0-9][a-z0-9-]{{0,{}}}$", SLUG_MAX_LEN - 1)
}

/// Tenant and endpoint slugs: [`slug_pattern`].
pub fn validate_slug(kind: &str, slug: &str) -> Result<(), DomainError> {
    if is_slug(slug) {
        Ok(())
    } else {
        Err(DomainError::invalid("invalid_slug", format!("{kind} must match {}, got {slug:?}", slug_pattern())))
    }
}

/// A slug's schema.
#[cfg(feature = "openapi")]
pub fn slug_schema() -> utoipa::openapi::Object {
    views::openapi::string(&slug_pattern(), Some(SLUG_MAX_LEN))
}

/// An optional slug's schema.
#[cfg(feature = "openapi")]
pub fn optional_slug_schema() -> utoipa::openapi::Object {
    views::openapi::nullable(slug_schema())
}

/// Whether `s` matches [`slug_pattern`].
pub fn is_slug(s: &str) -> bool {
    let bytes = s.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= SLUG_MAX_LEN
        && bytes.first().is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && bytes.iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
}

/// The drills' synthetic tenant: outside the slug syntax, so no real tenant
/// can ever be created under it.
pub const SYNTHETIC_TENANT: &str = "_drill";

/// Whether `/hooks/{tenant}/{endpoint}` could name an endpoint at all: both
/// are slugs (the tenant may be the synthetic one). Anything else is unknown
/// without asking the database or taking a cache slot.
pub fn could_be_endpoint(tenant: &str, endpoint: &str) -> bool {
    (is_slug(tenant) || tenant == SYNTHETIC_TENANT) && is_slug(endpoint)
}

/// A new opaque row id: a UUID, hyphenated and lower-case ([`id_pattern`]).
pub fn new_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// What [`new_id`] makes, as a regular expression.
pub fn id_pattern() -> String {
    "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$".to_owned()
}

/// A row id's schema (a path parameter).
#[cfg(feature = "openapi")]
pub fn id_schema() -> utoipa::openapi::Object {
    views::openapi::string(&id_pattern(), Some(36))
}

/// A new signing key id: `key_` + 32 hex characters ([`key_id_pattern`]).
pub fn new_key_id() -> String {
    format!("key_{}", uuid::Uuid::new_v4().simple())
}

/// What [`new_key_id`] makes, as a regular expression.
pub fn key_id_pattern() -> String {
    "^key_[0-9a-f]{32}$".to_owned()
}

/// A signing key id's schema (a path parameter).
#[cfg(feature = "openapi")]
pub fn key_id_schema() -> utoipa::openapi::Object {
    views::openapi::string(&key_id_pattern(), Some(36))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_follow_the_contract() {
        for good in ["a", "clinic-a", "0", "a-b-c", &"a".repeat(63)] {
            assert!(validate_slug("tenant", good).is_ok(), "{good}");
        }
        for bad in ["", "-a", "A", "clinic_a", "clinic a", &"a".repeat(64), "é"] {
            assert!(validate_slug("tenant", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_slug_pattern_is_the_validator() {
        let pattern = regex::Regex::new(&slug_pattern()).unwrap();
        for s in ["a", "clinic-a", "0", "-a", "A", "a_b", "", "a\n", &"a".repeat(63), &"a".repeat(64), "é"] {
            assert_eq!(pattern.is_match(s), is_slug(s), "{s:?}");
        }
    }

    #[test]
    fn key_ids_are_unique() {
        assert_ne!(new_key_id(), new_key_id());
        assert!(new_key_id().starts_with("key_"));
    }

    #[test]
    fn generated_ids_match_their_documented_patterns() {
        let id = regex::Regex::new(&id_pattern()).unwrap();
        let key = regex::Regex::new(&key_id_pattern()).unwrap();
        for _ in 0..100 {
            let (i, k) = (new_id(), new_key_id());
            assert!(id.is_match(&i) && i.len() == 36, "{i}");
            assert!(key.is_match(&k) && k.len() == 36, "{k}");
        }
        assert!(!id.is_match("key_0123") && !key.is_match(&new_id()));
    }
}
