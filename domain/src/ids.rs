//! Identifiers: validated slugs (CONTRACT §2) and generated ids.

use crate::error::DomainError;

/// `[a-z0-9][a-z0-9-]{0,62}`: tenant and endpoint slugs.
pub fn validate_slug(kind: &str, slug: &str) -> Result<(), DomainError> {
    if is_slug(slug) {
        Ok(())
    } else {
        Err(DomainError::invalid("invalid_slug", format!("{kind} must match [a-z0-9][a-z0-9-]{{0,62}}, got {slug:?}")))
    }
}

/// Whether `s` matches `[a-z0-9][a-z0-9-]{0,62}`.
pub fn is_slug(s: &str) -> bool {
    let bytes = s.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
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

/// A new opaque row id.
pub fn new_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// A new signing key id: `key_` + 32 hex characters.
pub fn new_key_id() -> String {
    format!("key_{}", uuid::Uuid::new_v4().simple())
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
    fn key_ids_are_unique() {
        assert_ne!(new_key_id(), new_key_id());
        assert!(new_key_id().starts_with("key_"));
    }
}
