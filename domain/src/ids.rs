//! Generated ids. The ids that cross layers (slugs, key ids, event ids,
//! digests) and their rules are `views::ids`'s newtypes; the domain only
//! makes new ones here.

use views::ids::KeyId;

use sea_orm::DbErr;

use crate::error::{DomainError, DomainResult};

/// An id given as a name to look something up (a path segment, a listing's
/// filter): one outside its rule names nothing, so it is `NotFound`, as an
/// unknown one is (a 404 at the API, never a 422). Input that creates
/// something parses with the type's own error instead.
pub fn named<T: std::str::FromStr>(text: &str) -> DomainResult<T> {
    text.parse().map_err(|_| DomainError::NotFound)
}

/// An optional filter naming an id, as a query string or a form gives it:
/// absent or empty filters nothing; anything else is [`named`] (outside its
/// rule: `NotFound`). The edges parse filters with it, so the domain's
/// filters carry the typed id.
pub fn named_filter<T: std::str::FromStr>(text: Option<&str>) -> DomainResult<Option<T>> {
    text.filter(|s| !s.is_empty()).map(named).transpose()
}

/// An id read back from the database: one that does not parse is a corrupt
/// row, reported as an internal error (`DbErr::Type`, as sea-orm reports a
/// column it cannot convert), never a panic or a "not found".
pub fn stored<T: std::str::FromStr<Err = views::ids::IdError>>(text: &str) -> DomainResult<T> {
    text.parse().map_err(|e: views::ids::IdError| DomainError::Db(DbErr::Type(format!("stored id: {e}"))))
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

/// A new signing key id: `key_` + 32 hex characters
/// (`views::ids::key_id_pattern`), through the parser like any other.
pub fn new_key_id() -> KeyId {
    KeyId::parse(format!("key_{}", uuid::Uuid::new_v4().simple())).expect("a simple UUID is 32 lower-case hex digits")
}

#[cfg(test)]
mod tests {
    use views::ids::{EVENT_ID_PATTERN, EventId, TenantSlug, is_slug, key_id_pattern, slug_pattern};

    use super::*;

    #[test]
    fn the_slug_pattern_is_the_validator() {
        let pattern = regex::Regex::new(&slug_pattern()).unwrap();
        for s in ["a", "clinic-a", "0", "-a", "A", "a_b", "", "a\n", &"a".repeat(63), &"a".repeat(64), "é"] {
            assert_eq!(pattern.is_match(s), is_slug(s), "{s:?}");
            assert_eq!(pattern.is_match(s), TenantSlug::parse(s).is_ok(), "{s:?}");
        }
    }

    #[test]
    fn the_key_id_and_event_id_patterns_are_their_parsers() {
        let key = regex::Regex::new(&key_id_pattern()).unwrap();
        let event = regex::Regex::new(EVENT_ID_PATTERN).unwrap();
        let hex = "0123456789abcdef".repeat(2);
        for s in [format!("key_{hex}"), format!("key_{}", hex.to_uppercase()), format!("key_{hex}0"), "key_".into()] {
            assert_eq!(key.is_match(&s), KeyId::parse(s.clone()).is_ok(), "{s:?}");
        }
        for s in ["e", "a b", "a/b", "a\nb", "\u{7f}", "\u{85}", "\u{a0}", "ü"] {
            assert_eq!(event.is_match(s), EventId::parse(s).is_ok(), "{s:?}");
        }
    }

    #[test]
    fn a_filter_is_named_once_and_an_empty_one_filters_nothing() {
        let filter = |text| named_filter::<TenantSlug>(text);
        assert!(matches!(filter(None), Ok(None)));
        assert!(matches!(filter(Some("")), Ok(None)));
        assert_eq!(filter(Some("clinic-a")).unwrap(), Some(TenantSlug::parse("clinic-a").unwrap()));
        // Outside the rule it names nothing, as an unknown tenant: not a 422.
        for bad in ["Clinic", " clinic-a", "_drill", "a_b", &"a".repeat(64)] {
            assert!(matches!(filter(Some(bad)), Err(DomainError::NotFound)), "{bad:?}");
        }
    }

    #[test]
    fn key_ids_are_unique() {
        assert_ne!(new_key_id(), new_key_id());
        assert!(new_key_id().as_str().starts_with("key_"));
    }

    #[test]
    fn generated_ids_match_their_documented_patterns() {
        let id = regex::Regex::new(&id_pattern()).unwrap();
        let key = regex::Regex::new(&key_id_pattern()).unwrap();
        for _ in 0..100 {
            let (i, k) = (new_id(), new_key_id());
            assert!(id.is_match(&i) && i.len() == 36, "{i}");
            assert!(key.is_match(k.as_str()) && k.as_str().len() == 36, "{k}");
        }
        assert!(!id.is_match("key_0123") && !key.is_match(&new_id()));
    }
}
