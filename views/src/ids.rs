//! Identifiers that cross layers: tenant and endpoint slugs, signing key ids,
//! event ids and bundle digests. Each is a newtype made only by parsing
//! (`parse`, `FromStr`, `TryFrom`, serde), so a value of the type follows its
//! rule and a slug can never be passed where a key id belongs. The rules are
//! written here once, checked by hand (this crate is built for wasm too:
//! no regex, no uuid); the patterns the OpenAPI document states are built
//! from the same bounds, and a test holds each pattern to its checker.
//!
//! The types deliberately do not implement `utoipa::ToSchema`: a field of
//! one names its schema function (`schema_with`), which utoipa inlines, so
//! the document carries no component for them and a forgotten attribute is
//! a compile error rather than a silent `$ref`.

use std::fmt;

/// Why a text is not an id: the code and the message a caller is answered
/// (the domain maps it to a 422 with the same two).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdError {
    pub code: &'static str,
    pub message: String,
}

impl fmt::Display for IdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for IdError {}

/// Declares an id newtype over `String` whose only constructor is `$check`
/// (`fn(String) -> Result<String, IdError>`, which may normalize).
macro_rules! id_type {
    ($(#[$meta:meta])* $name:ident, $check:path) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(String);

        impl $name {
            /// The id `text` names, or why it names none.
            pub fn parse(text: impl Into<String>) -> Result<Self, IdError> {
                $check(text.into()).map($name)
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }

            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl std::str::FromStr for $name {
            type Err = IdError;
            fn from_str(text: &str) -> Result<Self, IdError> {
                $name::parse(text)
            }
        }

        impl TryFrom<String> for $name {
            type Error = IdError;
            fn try_from(text: String) -> Result<Self, IdError> {
                $name::parse(text)
            }
        }

        impl TryFrom<&str> for $name {
            type Error = IdError;
            fn try_from(text: &str) -> Result<Self, IdError> {
                $name::parse(text)
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                &self.0 == other
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.0)
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = <String as serde::Deserialize>::deserialize(d)?;
                $name::parse(text).map_err(serde::de::Error::custom)
            }
        }
    };
}

/// The longest slug.
pub const SLUG_MAX_LEN: usize = 63;

/// The slug rule as a regular expression, `^[a-z0-9][a-z0-9-]{0,62}$`: what
/// error messages and the OpenAPI document state, built from the same
/// bound [`is_slug`] checks.
pub fn slug_pattern() -> String {
    format!("^[a-z0-9][a-z0-9-]{{0,{}}}$", SLUG_MAX_LEN - 1)
}

/// Whether `s` matches [`slug_pattern`] (docs/contract.md §2).
pub fn is_slug(s: &str) -> bool {
    let bytes = s.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= SLUG_MAX_LEN
        && bytes.first().is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && bytes.iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
}

fn slug(kind: &str, text: String) -> Result<String, IdError> {
    if is_slug(&text) {
        Ok(text)
    } else {
        Err(IdError { code: "invalid_slug", message: format!("{kind} must match {}, got {text:?}", slug_pattern()) })
    }
}

fn tenant_slug(text: String) -> Result<String, IdError> {
    slug("tenant", text)
}

fn endpoint_slug(text: String) -> Result<String, IdError> {
    slug("endpoint", text)
}

id_type! {
    /// A tenant's slug ([`slug_pattern`]), or the drills' synthetic tenant
    /// made by [`TenantSlug::synthetic`].
    TenantSlug, tenant_slug
}

id_type! {
    /// An endpoint's slug ([`slug_pattern`]), unique within its tenant.
    EndpointSlug, endpoint_slug
}

/// The drills' synthetic tenant: outside the slug syntax, so no real tenant
/// can ever be created under it.
pub const SYNTHETIC_TENANT: &str = "_drill";

impl TenantSlug {
    /// The drills' synthetic tenant ([`SYNTHETIC_TENANT`]). Its one
    /// constructor besides parsing: only the drills create it and only the
    /// receiver (`/hooks/_drill/…`) resolves it; the registry never finds it.
    pub fn synthetic() -> TenantSlug {
        TenantSlug(SYNTHETIC_TENANT.to_owned())
    }

    /// A tenant as `/hooks/{tenant}/…` names it: a slug or the synthetic
    /// tenant.
    pub fn parse_hook(text: &str) -> Result<TenantSlug, IdError> {
        if text == SYNTHETIC_TENANT { Ok(TenantSlug::synthetic()) } else { TenantSlug::parse(text) }
    }

    /// Whether this is the drills' synthetic tenant.
    pub fn is_synthetic(&self) -> bool {
        self.0 == SYNTHETIC_TENANT
    }
}

/// A signing key id's hex digits after [`KEY_ID_PREFIX`].
pub const KEY_ID_HEX_LEN: usize = 32;
/// What every signing key id starts with.
pub const KEY_ID_PREFIX: &str = "key_";

/// A signing key id as a regular expression: `key_` and 32 lower-case hex
/// digits (what the domain's generator makes).
pub fn key_id_pattern() -> String {
    format!("^{KEY_ID_PREFIX}[0-9a-f]{{{KEY_ID_HEX_LEN}}}$")
}

/// The length of every key id.
pub const KEY_ID_LEN: usize = KEY_ID_PREFIX.len() + KEY_ID_HEX_LEN;

fn is_lower_hex(b: &u8) -> bool {
    b.is_ascii_digit() || (b'a'..=b'f').contains(b)
}

fn key_id(text: String) -> Result<String, IdError> {
    match text.strip_prefix(KEY_ID_PREFIX) {
        Some(hex) if hex.len() == KEY_ID_HEX_LEN && hex.as_bytes().iter().all(is_lower_hex) => Ok(text),
        _ => Err(IdError { code: "invalid_key_id", message: format!("a key id must match {}", key_id_pattern()) }),
    }
}

id_type! {
    /// A signing key's id ([`key_id_pattern`]).
    KeyId, key_id
}

/// The longest event id: the longest any scheme or envelope carries.
pub const MAX_EVENT_ID_LEN: usize = 255;

/// [`EventId`]'s rule as a pattern (with at most [`MAX_EVENT_ID_LEN`]
/// characters).
pub const EVENT_ID_PATTERN: &str = "^[^\\u0000-\\u001f\\u007f-\\u009f/]+$";

fn event_id(text: String) -> Result<String, IdError> {
    if text.is_empty() || text.chars().count() > MAX_EVENT_ID_LEN || text.chars().any(|c| c.is_control() || c == '/') {
        return Err(IdError {
            code: "invalid_event_id",
            message: format!("an event id is 1-{MAX_EVENT_ID_LEN} characters without control characters or '/'"),
        });
    }
    Ok(text)
}

id_type! {
    /// An event id a path can carry: 1–255 characters, no control
    /// characters and no `/` (a path segment).
    EventId, event_id
}

/// A manifest digest as the document states it: 64 hex digits, either case.
pub const DIGEST_PATTERN: &str = "^[0-9a-fA-F]{64}$";

fn digest(text: String) -> Result<String, IdError> {
    if text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(text.to_ascii_lowercase())
    } else {
        Err(IdError {
            code: "invalid_digest",
            message: "digest must be the 64-hex-digit SHA-256 of manifest.json".into(),
        })
    }
}

id_type! {
    /// A hex SHA-256 (an evidence bundle's `manifest.json`), held in
    /// lower case whatever case it was given in.
    Digest, digest
}

/// Schemas for the document, from the same rules (feature `openapi`).
#[cfg(feature = "openapi")]
mod schemas {
    use utoipa::openapi::Object;

    use super::*;
    use crate::openapi::{nullable, string};

    /// A slug's schema.
    pub fn slug_schema() -> Object {
        string(&slug_pattern(), Some(SLUG_MAX_LEN))
    }

    /// An optional slug's schema.
    pub fn optional_slug_schema() -> Object {
        nullable(slug_schema())
    }

    /// A signing key id's schema.
    pub fn key_id_schema() -> Object {
        string(&key_id_pattern(), Some(KEY_ID_LEN))
    }

    /// An event id's schema.
    pub fn event_id_schema() -> Object {
        string(EVENT_ID_PATTERN, Some(MAX_EVENT_ID_LEN))
    }

    /// A manifest digest's schema.
    pub fn digest_schema() -> Object {
        string(DIGEST_PATTERN, None)
    }
}

#[cfg(feature = "openapi")]
pub use schemas::*;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_follow_the_contract() {
        for good in ["a", "clinic-a", "0", "a-b-c", "a-", &"a".repeat(63)] {
            assert_eq!(TenantSlug::parse(good).unwrap().as_str(), good);
            assert!(EndpointSlug::parse(good).is_ok(), "{good}");
        }
        for bad in ["", "-a", "A", "clinic_a", "clinic a", &"a".repeat(64), "é", "a\n", "_drill"] {
            let e = TenantSlug::parse(bad).unwrap_err();
            assert_eq!(e.code, "invalid_slug");
            assert_eq!(e.message, format!("tenant must match {}, got {bad:?}", slug_pattern()));
            assert!(EndpointSlug::parse(bad).unwrap_err().message.starts_with("endpoint must match"));
        }
    }

    #[test]
    fn the_synthetic_tenant_is_made_on_purpose() {
        assert!(TenantSlug::parse(SYNTHETIC_TENANT).is_err());
        assert!(TenantSlug::synthetic().is_synthetic() && TenantSlug::synthetic() == SYNTHETIC_TENANT);
        assert_eq!(TenantSlug::parse_hook(SYNTHETIC_TENANT).unwrap(), TenantSlug::synthetic());
        assert!(!TenantSlug::parse_hook("clinic-a").unwrap().is_synthetic());
        assert!(TenantSlug::parse_hook("_drill-missing-x").is_err());
        assert!(serde_json::from_str::<TenantSlug>("\"_drill\"").is_err(), "serde parses, as `parse` does");
    }

    #[test]
    fn key_ids_are_key_and_32_lower_hex_digits() {
        let good = format!("key_{}", "0123456789abcdef".repeat(2));
        assert_eq!(KeyId::parse(good.clone()).unwrap().as_str(), good);
        assert_eq!(good.len(), KEY_ID_LEN);
        for bad in [
            String::new(),
            "key_".into(),
            format!("key_{}", "a".repeat(31)),
            format!("key_{}", "a".repeat(33)),
            format!("key_{}", "A".repeat(32)),
            format!("key_{}", "g".repeat(32)),
            format!("kez_{}", "a".repeat(32)),
            "a".repeat(36),
            "0193a1b2-0000-7000-8000-000000000000".into(),
        ] {
            assert_eq!(KeyId::parse(bad.clone()).unwrap_err().code, "invalid_key_id", "{bad}");
        }
    }

    #[test]
    fn event_ids_are_path_segments() {
        for good in ["e", "evt_1", "a b", "ü", "\u{a0}x", &"é".repeat(MAX_EVENT_ID_LEN)] {
            assert_eq!(EventId::parse(good).unwrap().as_str(), good);
        }
        for bad in ["", "a/b", "a\nb", "\u{7f}", "\u{85}", &"a".repeat(MAX_EVENT_ID_LEN + 1)] {
            assert_eq!(EventId::parse(bad).unwrap_err().code, "invalid_event_id", "{bad:?}");
        }
    }

    #[test]
    fn digests_are_64_hex_digits_held_in_lower_case() {
        let upper = "AB".repeat(32);
        assert_eq!(Digest::parse(upper).unwrap().as_str(), "ab".repeat(32));
        assert!(Digest::parse("0".repeat(64)).is_ok());
        for bad in ["0".repeat(63), "0".repeat(65), "g".repeat(64), String::new(), format!("{} ", "0".repeat(63))] {
            assert_eq!(Digest::parse(bad.clone()).unwrap_err().code, "invalid_digest", "{bad}");
        }
    }

    #[test]
    fn ids_are_plain_strings_on_the_wire() {
        let slug = EndpointSlug::parse("hooks").unwrap();
        assert_eq!(serde_json::to_string(&slug).unwrap(), "\"hooks\"");
        assert_eq!(serde_json::from_str::<EndpointSlug>("\"hooks\"").unwrap(), slug);
        let err = serde_json::from_str::<EndpointSlug>("\"Hooks\"").unwrap_err().to_string();
        assert!(err.starts_with("endpoint must match"), "{err}");
        assert_eq!(slug.to_string(), "hooks");
        assert_eq!("hooks".parse::<EndpointSlug>().unwrap(), slug);
        assert_eq!(String::from(slug), "hooks");
    }
}
