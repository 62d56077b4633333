//! What the pipeline decided: the contract's answer table (docs/contract.md §3:
//! status and JSON body, which the server sends and the drills read), its
//! error codes and the metrics' reasons.

use views::{events::ClaimOutcome, quarantine::QuarantineReason};

/// A request refused before anything was stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Refusal {
    UnknownEndpoint,
    BodyTooLarge,
    /// The client stopped sending before the body was complete.
    BodyIncomplete,
    /// The server holds as many body bytes as it may at once; nothing was
    /// read further (503 with `Retry-After`, like the in-flight limit).
    Overloaded,
    SignatureMissing,
    SignatureMalformed,
    SignatureMismatch,
    UnknownKey,
    TimestampStale,
    TimestampFuture,
    Replay,
    EventTypeNotPermitted,
    TenantMismatch,
}

impl Refusal {
    /// The contract's `{"error": code}`.
    pub fn code(self) -> &'static str {
        match self {
            Refusal::UnknownEndpoint => "unknown_endpoint",
            Refusal::BodyTooLarge => "body_too_large",
            Refusal::BodyIncomplete => "body_incomplete",
            Refusal::Overloaded => "overloaded",
            Refusal::SignatureMissing => "signature_missing",
            Refusal::SignatureMalformed => "signature_malformed",
            Refusal::SignatureMismatch => "signature_mismatch",
            Refusal::UnknownKey => "unknown_key",
            Refusal::TimestampStale | Refusal::TimestampFuture => "timestamp_outside_window",
            Refusal::Replay => "replay",
            Refusal::EventTypeNotPermitted => "event_type_not_permitted",
            Refusal::TenantMismatch => "tenant_mismatch",
        }
    }

    /// The metrics reason (finer than the code: stale and future differ).
    pub fn reason(self) -> &'static str {
        match self {
            Refusal::UnknownEndpoint => "unknown_endpoint",
            Refusal::BodyTooLarge => "too_large",
            Refusal::BodyIncomplete => "incomplete",
            Refusal::Overloaded => "overloaded",
            Refusal::SignatureMissing => "missing",
            Refusal::SignatureMalformed => "malformed",
            Refusal::SignatureMismatch => "mismatch",
            Refusal::UnknownKey => "unknown_key",
            Refusal::TimestampStale => "stale",
            Refusal::TimestampFuture => "future",
            Refusal::Replay => "replay",
            Refusal::EventTypeNotPermitted => "type_not_permitted",
            Refusal::TenantMismatch => "tenant_mismatch",
        }
    }
}

/// The pipeline's decision for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Committed now.
    Applied { event_id: String },
    /// Committed now, but the reminder's state refused the transition (an
    /// older `scheduled`, or anything after `canceled`): nothing changed.
    StaleTransition { event_id: String },
    /// The claim existed with the same body digest; nothing repeated.
    Duplicate { event_id: String, original: ClaimOutcome },
    /// The claim existed with a different body; nothing overwritten.
    IdentityConflict { event_id: String },
    /// Authenticated but the effect cannot apply; kept in quarantine.
    Quarantined { event_id: String, reason: QuarantineReason },
    /// Refused before anything was stored.
    Refused(Refusal),
    /// Transient failure; nothing was claimed; the provider should retry.
    Unavailable,
}

impl Outcome {
    /// The HTTP status of the contract's answer.
    pub fn status(&self) -> u16 {
        match self {
            Outcome::Applied { .. } | Outcome::StaleTransition { .. } | Outcome::Duplicate { .. } => 200,
            Outcome::Quarantined { .. } => 202,
            Outcome::IdentityConflict { .. } => 409,
            Outcome::Refused(r) => match r {
                Refusal::UnknownEndpoint => 404,
                Refusal::BodyTooLarge => 413,
                Refusal::BodyIncomplete => 400,
                Refusal::Overloaded => 503,
                Refusal::SignatureMissing
                | Refusal::SignatureMalformed
                | Refusal::SignatureMismatch
                | Refusal::UnknownKey
                | Refusal::TimestampStale
                | Refusal::TimestampFuture => 401,
                Refusal::Replay => 409,
                Refusal::EventTypeNotPermitted | Refusal::TenantMismatch => 403,
            },
            Outcome::Unavailable => 503,
        }
    }

    /// The JSON body of the contract's answer.
    pub fn body(&self) -> serde_json::Value {
        use serde_json::json;
        match self {
            Outcome::Applied { event_id } => json!({"status": "applied", "event_id": event_id}),
            Outcome::StaleTransition { event_id } => json!({"status": "stale_transition", "event_id": event_id}),
            Outcome::Duplicate { event_id, original } => {
                json!({"status": "duplicate", "original": original.as_str(), "event_id": event_id})
            }
            Outcome::IdentityConflict { .. } => json!({"error": "identity_conflict"}),
            Outcome::Quarantined { reason, .. } => json!({"status": "quarantined", "reason": reason.as_str()}),
            Outcome::Refused(r) => json!({"error": r.code()}),
            Outcome::Unavailable => json!({"error": "unavailable"}),
        }
    }

    /// Whether this answer is the one a claim made now records as its
    /// `first_answer` (the event's first accepted delivery). The delivery
    /// log keeps every other answer; the story reads this one from the claim.
    pub fn recorded_by_claim(&self) -> bool {
        matches!(self, Outcome::Applied { .. } | Outcome::StaleTransition { .. } | Outcome::Quarantined { .. })
    }

    /// The answer's `status` or `error` code, as the delivery log keeps it.
    pub fn answer(&self) -> &'static str {
        match self {
            Outcome::Applied { .. } => "applied",
            Outcome::StaleTransition { .. } => "stale_transition",
            Outcome::Duplicate { .. } => "duplicate",
            Outcome::IdentityConflict { .. } => "identity_conflict",
            Outcome::Quarantined { .. } => "quarantined",
            Outcome::Refused(r) => r.code(),
            Outcome::Unavailable => "unavailable",
        }
    }

    /// `(outcome, reason)` labels for metrics and rollups.
    pub fn labels(&self) -> (&'static str, String) {
        match self {
            Outcome::Applied { .. } => ("applied", String::new()),
            Outcome::StaleTransition { .. } => ("stale_transition", String::new()),
            Outcome::Duplicate { .. } => ("duplicate", String::new()),
            Outcome::IdentityConflict { .. } => ("identity_conflict", String::new()),
            Outcome::Quarantined { reason, .. } => ("quarantined", reason.as_str().to_owned()),
            Outcome::Refused(Refusal::Replay) => ("replay", String::new()),
            Outcome::Refused(Refusal::Overloaded) => ("overloaded", String::new()),
            Outcome::Refused(r) => ("verification_failed", r.reason().to_owned()),
            Outcome::Unavailable => ("unavailable", String::new()),
        }
    }
}
