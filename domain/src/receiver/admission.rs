//! Gates 7 and 8, and the event's identity. They are decided as soon as the
//! signature verified, because they are pure; the claim applies them in
//! contract order, after the replay check (gate 6), inside its transaction.

use views::quarantine::QuarantineReason;

use super::{outcome::Refusal, verify::Verified};
use crate::envelope::{self, Envelope};

/// A verified delivery, its event id and its envelope: expected to apply.
pub struct Job {
    pub verified: Verified,
    pub event_id: String,
    pub envelope: Envelope,
    /// The delivery's W3C `traceparent`, stored with its outbox intents.
    pub trace_context: Option<String>,
}

/// A verified delivery that will not apply, with what its claim records.
pub struct Held {
    pub verified: Verified,
    pub event_id: String,
    pub event_type: Option<String>,
}

/// What gates 7 and 8 concluded.
pub enum Admission {
    /// A well-formed envelope whose type the key permits, with an id.
    Admitted(Job),
    /// Authenticated but kept for on-call: `malformed_envelope` (gate 7) or
    /// `missing_event_id`.
    Quarantine(Held, QuarantineReason),
    /// Gate 8: the key may not send this type, or the envelope names
    /// another tenant.
    Refused(Held, Refusal),
}

impl Admission {
    pub fn verified(&self) -> &Verified {
        match self {
            Admission::Admitted(job) => &job.verified,
            Admission::Quarantine(held, _) | Admission::Refused(held, _) => &held.verified,
        }
    }

    /// The id the claim (or a refusal) is recorded under.
    pub fn event_id(&self) -> &str {
        match self {
            Admission::Admitted(job) => &job.event_id,
            Admission::Quarantine(held, _) | Admission::Refused(held, _) => &held.event_id,
        }
    }
}

/// Gates 7 and 8 for a verified delivery (`trace_context`: see [`Job`]).
pub fn admit(verified: Verified, trace_context: Option<String>) -> Admission {
    let Some(envelope) = envelope::parse(verified.body()) else {
        // Gate 7. A body that is no envelope keeps its digest as its id.
        let event_id =
            verified.message_id().map_or_else(|| format!("sha256:{}", verified.body_digest()), str::to_owned);
        return Admission::Quarantine(
            Held { verified, event_id, event_type: None },
            QuarantineReason::MalformedEnvelope,
        );
    };
    // An event without an id (and no compound key for its endpoint) is kept
    // in quarantine, claimed under its signed message: the very same request
    // again is a replay (gate 6), and a re-signed copy is an entry of its
    // own, because identical bodies can be two events
    // (docs/architecture.md#one-transaction-claim-effect-outbox); on-call
    // decides.
    let (event_id, identified) = match event_id(&verified, &envelope) {
        Some(id) => (id, true),
        None => (format!("message:{}", verified.message_digest().unwrap_or(verified.body_digest())), false),
    };
    let held = |verified| Held { verified, event_id: event_id.clone(), event_type: Some(envelope.event_type.clone()) };
    if let Err(refusal) = check_scope(&verified, &envelope) {
        return Admission::Refused(held(verified), refusal);
    }
    if !identified {
        return Admission::Quarantine(held(verified), QuarantineReason::MissingEventId);
    }
    Admission::Admitted(Job { verified, event_id, envelope, trace_context })
}

/// Gate 8: the verifying key's scope permits the type, and an envelope
/// tenant (if any) is the path's tenant.
fn check_scope(v: &Verified, env: &Envelope) -> Result<(), Refusal> {
    if env.tenant.as_deref().is_some_and(|t| t != v.endpoint().tenant_slug.as_str()) {
        return Err(Refusal::TenantMismatch);
    }
    if !v.key_scope().is_some_and(|s| s.permits(&env.event_type)) {
        return Err(Refusal::EventTypeNotPermitted);
    }
    Ok(())
}

/// The event id: the provider's message id header, or where an `hmac`
/// profile points in the (verified) body, or (Stripe) the envelope's `id`,
/// or the endpoint's documented compound key over envelope fields
/// (`registry::event_key`). `None`: the event has no stable id.
fn event_id(v: &Verified, env: &Envelope) -> Option<String> {
    if let Some(pointer) = v.endpoint().hmac.as_ref().and_then(|c| c.profile.id_pointer()) {
        return id_at_pointer(v.body(), pointer);
    }
    if let Some(id) = v.message_id() {
        return Some(id.to_owned());
    }
    if let Some(id) = &env.id {
        return Some(id.clone());
    }
    crate::registry::event_key::compound_id(v.endpoint().event_key.as_deref()?, env)
}

/// The id at a JSON pointer in a verified body: a non-empty string of at
/// most 255 characters without control characters, or an integer.
fn id_at_pointer(body: &[u8], pointer: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    let id = match value.pointer(pointer)? {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Number(n) if n.is_i64() || n.is_u64() => n.to_string(),
        _ => return None,
    };
    (!id.is_empty() && id.len() <= 255 && !id.chars().any(char::is_control)).then_some(id)
}

#[cfg(test)]
mod tests {
    use super::id_at_pointer;

    #[test]
    fn ids_at_pointers() {
        let body = br#"{"event_id":"e1","n":{"a/b":7},"f":1.5,"e":"","o":{}}"#;
        assert_eq!(id_at_pointer(body, "/event_id").as_deref(), Some("e1"));
        assert_eq!(id_at_pointer(body, "/n/a~1b").as_deref(), Some("7"));
        for missing in ["/f", "/e", "/o", "/nope", "/event_id/x"] {
            assert_eq!(id_at_pointer(body, missing), None, "{missing}");
        }
        assert_eq!(id_at_pointer(b"not json", "/event_id"), None);
    }
}
