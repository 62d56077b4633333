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

/// A required free-text justification (audited), trimmed, 1–500 characters.
pub(crate) fn require_reason(reason: &str) -> DomainResult<String> {
    let r = reason.trim();
    if r.is_empty() {
        return Err(DomainError::invalid("reason_required", "a reason is required"));
    }
    if r.chars().count() > 500 {
        return Err(DomainError::invalid("reason_too_long", "the reason must be at most 500 characters"));
    }
    Ok(r.to_owned())
}
