//! Day-to-day operations: quarantine triage, the per-tenant retry policy,
//! retention decisions and the purge that applies them.

mod bulk_item;
pub mod bulk_release;
pub mod gauges;
pub mod purge;
pub mod quarantine;
pub mod redact;
pub mod retention;
pub mod retry_policy;
pub mod stats;

use crate::error::{DomainError, DomainResult};

/// The longest reason, in characters as sent.
pub const MAX_REASON_CHARS: usize = 500;

/// A required free-text justification (audited): not blank, at most
/// [`MAX_REASON_CHARS`]; stored trimmed.
pub(crate) fn require_reason(reason: &str) -> DomainResult<String> {
    if crate::text::is_blank(reason) {
        return Err(DomainError::invalid("reason_required", "a reason is required"));
    }
    if !crate::text::fits(reason, MAX_REASON_CHARS) {
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
    crate::text::schema(MAX_REASON_CHARS)
}
