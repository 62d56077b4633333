//! The people and comments a key's lifecycle records: owner and reviewer
//! names, approval comments and revocation reasons.

use crate::error::{DomainError, DomainResult};

/// The longest owner or reviewer name, in characters as sent.
pub const MAX_PERSON_CHARS: usize = 200;

/// The longest approval comment or revocation reason, in characters as sent.
pub const MAX_COMMENT_CHARS: usize = 1000;

/// An owner's or reviewer's name: not blank, at most [`MAX_PERSON_CHARS`].
pub fn validate_person(field: &'static str, text: &str) -> DomainResult<String> {
    if crate::text::is_blank(text) || !crate::text::fits(text, MAX_PERSON_CHARS) {
        return Err(DomainError::invalid("invalid_field", format!("{field} must be 1–{MAX_PERSON_CHARS} characters")));
    }
    Ok(text.trim().to_owned())
}

/// A comment (or reason): at most [`MAX_COMMENT_CHARS`]; not blank when
/// `required`.
pub fn validate_comment(field: &'static str, text: &str, required: bool) -> DomainResult<String> {
    if required && crate::text::is_blank(text) {
        return Err(DomainError::invalid("reason_required", format!("a {field} is required")));
    }
    if !crate::text::fits(text, MAX_COMMENT_CHARS) {
        return Err(DomainError::invalid(
            "invalid_field",
            format!("{field} must be at most {MAX_COMMENT_CHARS} characters"),
        ));
    }
    Ok(text.trim().to_owned())
}

/// An optional owner's or reviewer's name ([`validate_person`]).
#[cfg(feature = "openapi")]
pub fn person_schema() -> utoipa::openapi::Object {
    views::openapi::nullable(crate::text::schema(MAX_PERSON_CHARS))
}

/// An optional comment ([`validate_comment`]).
#[cfg(feature = "openapi")]
pub fn comment_schema() -> utoipa::openapi::Object {
    crate::text::optional_schema(MAX_COMMENT_CHARS)
}

/// A required comment or reason ([`validate_comment`]).
#[cfg(feature = "openapi")]
pub fn required_comment_schema() -> utoipa::openapi::Object {
    crate::text::schema(MAX_COMMENT_CHARS)
}

/// An optional `v1a` public key (`whpk_…`); the schema states its shape,
/// and provisioning also checks that it is a curve point.
#[cfg(feature = "openapi")]
pub fn public_key_schema() -> utoipa::openapi::Object {
    views::openapi::nullable(views::openapi::string(crate::crypto::asymmetric::PUBLIC_KEY_PATTERN, Some(49)))
}
