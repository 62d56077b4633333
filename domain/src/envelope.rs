//! Gate 7: the body is a JSON object `{"id"?, "type", "tenant"?,
//! "occurred_at"?, "data"}`.
//! Parsed only after verification.

use serde::Deserialize;
use serde_json::Value;

/// A well-formed envelope.
#[derive(Debug, Clone, Deserialize)]
pub struct Envelope {
    pub id: Option<String>,
    #[serde(rename = "type")]
    pub event_type: String,
    pub tenant: Option<String>,
    /// When the event happened (RFC 3339), if the sender says: it orders
    /// reminder transitions (see `receiver::effects`).
    pub occurred_at: Option<String>,
    pub data: Value,
}

/// Parses the envelope; `None` when the body is not one (not JSON, not an
/// object, missing `type` or `data`, or fields of the wrong type).
pub fn parse(body: &[u8]) -> Option<Envelope> {
    let value: Value = serde_json::from_slice(body).ok()?;
    if !value.is_object() {
        return None;
    }
    let env: Envelope = serde_json::from_value(value).ok()?;
    if env.event_type.is_empty() || env.id.as_deref().is_some_and(|i| i.is_empty() || i.len() > 255) {
        return None;
    }
    Some(env)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelopes() {
        assert!(parse(br#"{"type":"reminder.created","data":{}}"#).is_some());
        let e = parse(br#"{"id":"evt_1","type":"x","tenant":"clinic-a","data":{"a":1}}"#);
        assert_eq!(e.as_ref().and_then(|e| e.id.as_deref()), Some("evt_1"));
        for bad in [
            &b"not json"[..],
            b"[]",
            b"{}",
            br#"{"type":"x"}"#,
            br#"{"type":1,"data":{}}"#,
            br#"{"type":"x","data":{},"id":5}"#,
            &[0xff, 0xfe],
        ] {
            assert!(parse(bad).is_none(), "{:?}", String::from_utf8_lossy(bad));
        }
    }
}
