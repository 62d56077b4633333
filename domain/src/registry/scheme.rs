//! Parsing signature schemes and event-type sets from what a person typed.

use crate::error::{DomainError, DomainResult};

use views::scheme::{ANY_TYPE, EventTypes, Scheme};

/// A scheme by its name, or a clear error naming them.
pub fn parse_scheme(text: &str) -> DomainResult<Scheme> {
    Scheme::from_name(text).ok_or_else(|| {
        DomainError::invalid(
            "invalid_scheme",
            format!("scheme must be standard-webhooks, stripe, github or hmac, got {text:?}"),
        )
    })
}

/// The timestamp tolerance of an endpoint whose scheme signs a timestamp,
/// unless it asks for another: seconds either side of now.
pub const DEFAULT_TOLERANCE_SECS: i64 = 300;
/// The largest timestamp tolerance an endpoint may ask for.
pub const MAX_TOLERANCE_SECS: i64 = 3600;

/// The longest event type.
pub const MAX_EVENT_TYPE_LEN: usize = 100;
/// The most entries a list of event types may have (repeats count).
pub const MAX_EVENT_TYPES: usize = 256;

/// An event type as a regular expression ([`validate_event_types`]).
pub fn event_type_pattern() -> String {
    format!("^[a-z0-9][a-z0-9._-]{{0,{}}}$", MAX_EVENT_TYPE_LEN - 1)
}

/// A list of event types: `["*"]` (repeats allowed), or one or more types;
/// at most [`MAX_EVENT_TYPES`] entries.
#[cfg(feature = "openapi")]
pub fn event_types_schema() -> utoipa::openapi::Schema {
    use views::openapi::{array, one_of, string};
    let capped = |mut a: utoipa::openapi::Array| {
        a.max_items = Some(MAX_EVENT_TYPES);
        a
    };
    utoipa::openapi::schema::OneOfBuilder::new()
        .item(capped(array(one_of(&[ANY_TYPE]), 1)))
        .item(capped(array(string(&event_type_pattern(), Some(MAX_EVENT_TYPE_LEN)), 1)))
        .into()
}

/// An optional list of event types.
#[cfg(feature = "openapi")]
pub fn optional_event_types_schema() -> utoipa::openapi::Schema {
    let mut s = event_types_schema();
    if let utoipa::openapi::Schema::OneOf(o) = &mut s {
        o.items.push(utoipa::openapi::ObjectBuilder::new().schema_type(utoipa::openapi::Type::Null).into());
    }
    s
}

/// Validates and normalises a list of event types: `*` alone, or names like
/// `reminder.created` ([`event_type_pattern`]), sorted and de-duplicated.
/// A list longer than [`MAX_EVENT_TYPES`] is refused before any entry is
/// looked at; the rest is linear in the list's size.
pub fn validate_event_types<S: AsRef<str>>(types: &[S]) -> DomainResult<EventTypes> {
    if types.len() > MAX_EVENT_TYPES {
        return Err(DomainError::invalid(
            "too_many_event_types",
            format!("at most {MAX_EVENT_TYPES} event types may be listed, got {}", types.len()),
        ));
    }
    let mut out = std::collections::BTreeSet::new();
    for raw in types {
        let t = raw.as_ref();
        let ok = t == ANY_TYPE
            || (t.len() <= MAX_EVENT_TYPE_LEN
                && t.as_bytes().first().is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
                && t.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b)));
        if !ok {
            return Err(DomainError::invalid(
                "invalid_event_type",
                format!("event type {t:?} must be '*' or match {} (like 'reminder.created')", event_type_pattern()),
            ));
        }
        out.insert(t);
    }
    if out.is_empty() {
        return Err(DomainError::invalid("invalid_event_type", "at least one event type is needed"));
    }
    if out.len() > 1 && out.contains(ANY_TYPE) {
        return Err(DomainError::invalid("invalid_event_type", "'*' already permits every type; list it alone"));
    }
    Ok(EventTypes::from_validated(out.into_iter().map(str::to_owned).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_type_sets() {
        let a = validate_event_types(&["reminder.created", "otp.requested", "reminder.created"]).unwrap();
        assert_eq!(a.as_slice(), ["otp.requested", "reminder.created"]);
        assert!(a.permits("otp.requested") && !a.permits("reminder.canceled"));
        let narrower = validate_event_types(&["otp.requested"]).unwrap();
        assert!(a.covers(&narrower) && !narrower.covers(&a));
        assert!(EventTypes::any().covers(&a) && !a.covers(&EventTypes::any()));
        assert!(validate_event_types(&["Bad Type"]).is_err());
        assert!(validate_event_types::<&str>(&[]).is_err());
        assert!(validate_event_types(&["*", "a"]).is_err());
        assert_eq!(EventTypes::from_json(&a.to_json()), a);
    }

    #[test]
    fn event_type_lists_are_capped() {
        let most: Vec<String> = (0..MAX_EVENT_TYPES).map(|i| format!("t{i}")).collect();
        assert_eq!(validate_event_types(&most).unwrap().as_slice().len(), MAX_EVENT_TYPES);
        let repeats = vec!["a"; MAX_EVENT_TYPES + 1];
        let err = validate_event_types(&repeats).unwrap_err();
        assert_eq!(err.code(), "too_many_event_types", "repeats count: the cap is on what was sent");
        let huge: Vec<String> = (0..100_000).map(|i| format!("t{i}")).collect();
        assert_eq!(validate_event_types(&huge).unwrap_err().code(), "too_many_event_types");
    }

    #[test]
    fn the_event_type_pattern_is_the_validator() {
        let pattern = regex::Regex::new(&event_type_pattern()).unwrap();
        for t in ["reminder.created", "a", "0_a-b.c", " a", "", "A", "*", "a b", &"a".repeat(100), &"a".repeat(101)] {
            let valid = validate_event_types(&[t]).is_ok() && t != ANY_TYPE;
            assert_eq!(pattern.is_match(t), valid, "{t:?}");
        }
    }

    #[test]
    fn schemes_parse() {
        for s in Scheme::ALL {
            assert_eq!(parse_scheme(s.as_str()).unwrap(), s);
        }
        assert!(parse_scheme("HMAC").is_err());
    }
}
