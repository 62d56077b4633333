//! Gates 3–5: signature headers, a matching accepted key, the timestamp
//! window. [`Verified`] can only be made here.

use std::sync::Arc;

use sha2::{Digest, Sha256};

use super::{
    cache::{EndpointCtx, Verifier},
    outcome::Refusal,
};
use crate::crypto::{
    profile,
    signature::{HeaderError, HeaderSource, ParsedSignature, parse_headers, verify_with_key, verify_with_public_key},
};
use views::scheme::Scheme;

/// A delivery whose signature matched one of the endpoint's accepted keys
/// over the exact received bytes, inside the timestamp window. Only
/// [`verify`] constructs it.
#[derive(Debug)]
pub struct Verified {
    endpoint: Arc<EndpointCtx>,
    key_index: usize,
    message_id: Option<String>,
    /// SHA-256 of the signed message for the replay store: timestamp, id and
    /// body where the scheme signs a timestamp; the body alone for GitHub.
    message_digest: Option<String>,
    body: bytes::Bytes,
    body_digest: String,
    /// When the sender signed it (ms); the receipt time for schemes that
    /// sign no timestamp.
    signed_at: i64,
    /// Whether `signed_at` is a signed timestamp (which the digest covers).
    timestamped: bool,
}

impl Verified {
    pub fn endpoint(&self) -> &Arc<EndpointCtx> {
        &self.endpoint
    }
    pub fn key_id(&self) -> &str {
        self.endpoint.keys.get(self.key_index).map(|k| k.key_id.as_str()).unwrap_or_default()
    }
    pub fn key_scope(&self) -> Option<&views::scheme::EventTypes> {
        self.endpoint.keys.get(self.key_index).map(|k| &k.scope)
    }
    /// The provider's message id from headers (standard-webhooks, github).
    pub fn message_id(&self) -> Option<&str> {
        self.message_id.as_deref()
    }
    pub fn message_digest(&self) -> Option<&str> {
        self.message_digest.as_deref()
    }
    /// Whether the signed message carries no timestamp (GitHub, an `hmac`
    /// profile without one), so the sender's own redelivery repeats it
    /// exactly: then the same signed bytes under another id are a replay,
    /// and under the same id, with the same body, a duplicate.
    pub fn signed_without_id(&self) -> bool {
        match &self.endpoint.hmac {
            Some(c) => !c.profile.has_timestamp(),
            None => self.endpoint.scheme == Scheme::Github,
        }
    }
    /// The exact bytes received.
    pub fn body(&self) -> &[u8] {
        &self.body
    }
    pub fn body_digest(&self) -> &str {
        &self.body_digest
    }
    /// When the sender signed it (ms), or when it arrived (GitHub).
    pub fn signed_at(&self) -> i64 {
        self.signed_at
    }
    /// The replay record's `signed_at` (ms), its partition on PostgreSQL:
    /// the signed timestamp, which the message digest covers, so every copy
    /// of one message names the same day. 0 (kept by expiry) where no
    /// timestamp is signed, and for a message signed before the endpoint's
    /// records were partitioned: it may have been recorded before, with 0
    /// (`EndpointCtx::replay_partitioned_from`).
    pub fn replay_signed_at(&self) -> i64 {
        let partitioned = self.endpoint.replay_partitioned_from.is_none_or(|from| self.signed_at >= from * 1000);
        if self.timestamped && partitioned { self.signed_at } else { 0 }
    }
}

/// A delivery refused at gates 3–5, and the key it is counted under when
/// one is known: the key whose signature matched (a timestamp outside the
/// window), or the accepted key the `signet-key-id` header named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    pub refusal: Refusal,
    pub key_id: Option<String>,
}

/// Runs gates 3, 4 and 5. `key_hint` is the optional `signet-key-id`
/// header: when present, only that key may verify, and an id outside the
/// accepted set is `unknown_key`.
pub fn verify<H: HeaderSource + ?Sized>(
    endpoint: &Arc<EndpointCtx>,
    headers: &H,
    key_hint: Option<&str>,
    body: bytes::Bytes,
    now_secs: i64,
) -> Result<Verified, Rejected> {
    let named = key_hint.filter(|id| endpoint.keys.iter().any(|k| k.key_id == *id)).map(str::to_owned);
    let reject = |refusal: Refusal, key_id: Option<String>| Rejected { refusal, key_id };
    verify_inner(endpoint, headers, key_hint, body, now_secs)
        .map_err(|(refusal, matched)| reject(refusal, matched.or(named)))
}

fn verify_inner<H: HeaderSource + ?Sized>(
    endpoint: &Arc<EndpointCtx>,
    headers: &H,
    key_hint: Option<&str>,
    body: bytes::Bytes,
    now_secs: i64,
) -> Result<Verified, (Refusal, Option<String>)> {
    // Gate 3.
    let parsed = match &endpoint.hmac {
        Some(c) => profile::parse_headers(c, headers),
        None => parse_headers(endpoint.scheme, headers),
    };
    let parsed = parsed.map_err(|e| match e {
        HeaderError::Missing => (Refusal::SignatureMissing, None),
        HeaderError::Malformed => (Refusal::SignatureMalformed, None),
    })?;
    // Gate 4: every accepted key (or only the named one) is tried, each
    // against the signatures of its kind (`v1` HMAC or `v1a` Ed25519).
    let candidates: Vec<usize> = match key_hint {
        Some(id) => {
            let i = endpoint.keys.iter().position(|k| k.key_id == id).ok_or((Refusal::UnknownKey, None))?;
            vec![i]
        }
        None => (0..endpoint.keys.len()).collect(),
    };
    let mut matched = None;
    for i in candidates {
        if let Some(k) = endpoint.keys.get(i)
            && match &k.verifier {
                Verifier::Hmac(key) => match &endpoint.hmac {
                    Some(c) => profile::verify(c, &parsed, &body, key),
                    None => verify_with_key(&parsed, &body, key),
                },
                Verifier::Ed25519(pk) => verify_with_public_key(&parsed, &body, pk),
            }
            && matched.is_none()
        {
            matched = Some(i);
        }
    }
    let key_index = matched.ok_or((Refusal::SignatureMismatch, None))?;
    let matched_key = || endpoint.keys.get(key_index).map(|k| k.key_id.clone());
    // Gate 5. After a tolerance was raised, a message that had already left
    // the old window stays out (`EndpointCtx::timestamp_floor`): its replay
    // record may be gone.
    if let Some(ts) = parsed.timestamp {
        if ts < now_secs - endpoint.tolerance_secs || endpoint.timestamp_floor.is_some_and(|floor| ts < floor) {
            return Err((Refusal::TimestampStale, matched_key()));
        }
        if ts > now_secs + endpoint.tolerance_secs {
            return Err((Refusal::TimestampFuture, matched_key()));
        }
    }
    let message_digest = match &endpoint.hmac {
        // A profile's replay record is its signed content: the template
        // filled in, whatever it covers.
        Some(c) => {
            let mut h = Sha256::new();
            h.update(b"hmac\n");
            h.update(profile::signed_content(c, &parsed, &body));
            Some(hex::encode(h.finalize()))
        }
        None => fixed_scheme_digest(endpoint.scheme, &parsed, &body),
    };
    let body_digest = hex::encode(Sha256::digest(&body));
    let signed_at = parsed.timestamp.unwrap_or(now_secs).saturating_mul(1000);
    let timestamped = parsed.timestamp.is_some();
    Ok(Verified {
        endpoint: endpoint.clone(),
        key_index,
        message_id: parsed.message_id,
        message_digest,
        body,
        body_digest,
        signed_at,
        timestamped,
    })
}

/// The replay record of a fixed scheme's signed message: timestamp, id and
/// body where it signs a timestamp; the body alone for GitHub.
fn fixed_scheme_digest(scheme: Scheme, parsed: &ParsedSignature, body: &[u8]) -> Option<String> {
    match parsed.timestamp {
        Some(ts) => {
            let mut h = Sha256::new();
            h.update(ts.to_string().as_bytes());
            h.update(b"\n");
            h.update(parsed.message_id.as_deref().unwrap_or_default().as_bytes());
            h.update(b"\n");
            h.update(body);
            Some(hex::encode(h.finalize()))
        }
        // GitHub signs the body alone: the delivery id is not signed, so the
        // signed message is the body, and its replay record is the body's.
        None if scheme == Scheme::Github => {
            let mut h = Sha256::new();
            h.update(b"body\n");
            h.update(body);
            Some(hex::encode(h.finalize()))
        }
        None => None,
    }
}
