//! Free text fields (names, reasons, comments): at most so many characters
//! as sent, not all whitespace when required, stored trimmed. The length is
//! counted before trimming so the rule is one a JSON Schema can state
//! exactly (`maxLength` and a pattern), and the OpenAPI document states it.

use crate::error::{DomainError, DomainResult};

/// Whether `text` has a character that is not whitespace. As a pattern:
/// [`NON_BLANK`].
pub fn is_blank(text: &str) -> bool {
    text.trim().is_empty()
}

/// The characters `str::trim` removes (Unicode `White_Space`), as the body
/// of an ECMA-262 character class (the regex dialect of JSON Schema, whose
/// `\s` differs from Rust's in two characters).
pub const WHITESPACE: &str = r"\t-\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000";

/// A character `str::trim` keeps.
pub const NON_BLANK: &str = r"[^\t-\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]";

/// Whether `text` is at most `max` characters as sent.
pub fn fits(text: &str, max: usize) -> bool {
    text.chars().count() <= max
}

/// A required text field's schema: at most `max` characters, not blank.
#[cfg(feature = "openapi")]
pub fn schema(max: usize) -> utoipa::openapi::Object {
    views::openapi::string(NON_BLANK, Some(max))
}

/// An optional text field's schema: at most `max` characters, anything else
/// goes (blank means none).
#[cfg(feature = "openapi")]
pub fn optional_schema(max: usize) -> utoipa::openapi::Object {
    let mut s = views::openapi::nullable(schema(max));
    s.pattern = None;
    s
}

/// The longest reason, in characters as sent.
pub const MAX_REASON_CHARS: usize = 500;

/// A required free-text justification (audited): not blank, at most
/// [`MAX_REASON_CHARS`]; stored trimmed.
pub fn require_reason(reason: &str) -> DomainResult<String> {
    if is_blank(reason) {
        return Err(DomainError::invalid("reason_required", "a reason is required"));
    }
    if !fits(reason, MAX_REASON_CHARS) {
        return Err(DomainError::invalid(
            "reason_too_long",
            format!("the reason must be at most {MAX_REASON_CHARS} characters"),
        ));
    }
    Ok(reason.trim().to_owned())
}

/// A reason's schema ([`require_reason`]).
#[cfg(feature = "openapi")]
pub fn reason_schema() -> utoipa::openapi::Object {
    schema(MAX_REASON_CHARS)
}

/// An optional reason's schema: absent or null, else as [`reason_schema`].
#[cfg(feature = "openapi")]
pub fn optional_reason_schema() -> utoipa::openapi::Object {
    views::openapi::nullable(schema(MAX_REASON_CHARS))
}
