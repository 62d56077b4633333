//! One signing function per scheme, for deliveries Signet signs itself
//! (test deliveries) and for the examples shown to providers. An `hmac`
//! endpoint signs as its profile says.

use views::{hmac::HmacProfile, scheme::Scheme};

use crate::crypto::{SigningSecret, profile, signature};

/// The headers a provider of `scheme` sends for `body`, signed with
/// `secret` (an HMAC `whsec_…` secret, or a `v1a` `whsk_…` private key for
/// standard-webhooks). `None` when the secret does not fit the scheme, or
/// an `hmac` endpoint has no readable profile.
pub fn sign_for(
    scheme: Scheme,
    hmac: Option<&HmacProfile>,
    secret: &SigningSecret,
    id: &str,
    timestamp: i64,
    event_type: &str,
    body: &[u8],
) -> Option<Vec<(String, String)>> {
    match scheme {
        Scheme::StandardWebhooks | Scheme::Stripe => signature::sign(scheme, secret, body, timestamp, id),
        Scheme::Github => {
            let mut headers = signature::sign(scheme, secret, body, timestamp, id)?;
            headers.push(("X-GitHub-Event".into(), event_type.into()));
            Some(headers)
        }
        Scheme::Hmac => profile::sign_for(hmac?, secret, id, timestamp, body),
    }
}

/// The signed content of `scheme` (for `hmac`, of its profile), as a
/// template over `{id}`, `{timestamp}` and `{body}`, how the signature is
/// written and where the event id comes from.
pub fn describe(scheme: Scheme, hmac: Option<&HmacProfile>) -> (String, String, String) {
    let fixed = |a: &str, b: &str, c: &str| (a.to_owned(), b.to_owned(), c.to_owned());
    match scheme {
        Scheme::StandardWebhooks => fixed(
            "{id}.{timestamp}.{body}",
            "webhook-signature: v1,<base64 HMAC-SHA256> (or v1a,<base64 Ed25519> with a v1a key)",
            "the webhook-id header",
        ),
        Scheme::Stripe => {
            fixed("{timestamp}.{body}", "Stripe-Signature: t=<unix>,v1=<hex HMAC-SHA256>", "the body's id")
        }
        Scheme::Github => {
            fixed("{body}", "X-Hub-Signature-256: sha256=<hex HMAC-SHA256>", "the X-GitHub-Delivery header")
        }
        Scheme::Hmac => match hmac {
            Some(p) => (
                p.signed_content.clone(),
                format!(
                    "{}: {}<{:?} {:?}> ({:?})",
                    p.signature_header, p.prefix, p.encoding, p.algorithm, p.signature_format
                )
                .to_lowercase(),
                match (p.id_header(), p.id_pointer()) {
                    (Some(h), _) => format!("the {h} header"),
                    (None, Some(ptr)) => format!("the body at JSON pointer {ptr}"),
                    (None, None) => "none: duplicates are told apart by the signed content".to_owned(),
                },
            ),
            None => fixed("", "no readable profile", ""),
        },
    }
}

/// The endpoint's `hmac` profile as stored (none for the fixed schemes).
pub(super) fn stored_profile(e: &crate::entity::endpoint::Model) -> Option<HmacProfile> {
    e.hmac_profile.as_deref().and_then(|p| serde_json::from_str(p).ok())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::crypto::signature::{parse_headers, verify_with_key};

    #[test]
    fn every_scheme_signs_what_its_parser_verifies() {
        let secret = SigningSecret::generate();
        let body = br#"{"type":"x","data":{}}"#;
        for scheme in Scheme::FIXED {
            let headers = sign_for(scheme, None, &secret, "msg_1", 1_700_000_000, "x", body).unwrap();
            let pairs: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let parsed = parse_headers(scheme, pairs.as_slice()).unwrap();
            let key = signature::hmac_key(scheme, &secret).unwrap();
            assert!(verify_with_key(&parsed, body, &key), "{scheme}");
            assert!(!verify_with_key(&parsed, b"tampered", &key), "{scheme}");
        }
    }
}
