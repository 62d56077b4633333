//! One signing function per scheme, for deliveries Signet signs itself
//! (test deliveries) and for the examples shown to providers. A scheme
//! added later (an `hmac` profile) plugs in here with its own arm.

use crate::{
    crypto::{SigningSecret, signature},
    registry::Scheme,
};

/// The headers a provider of `scheme` sends for `body`, signed with
/// `secret` (an HMAC `whsec_…` secret, or a `v1a` `whsk_…` private key for
/// standard-webhooks). `None` when the secret does not fit the scheme.
pub fn sign_for(
    scheme: Scheme,
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
    }
}

/// The signed content of `scheme`, as a template over `{id}`,
/// `{timestamp}` and `{body}`, and how the signature is written.
pub fn describe(scheme: Scheme) -> (&'static str, &'static str, &'static str) {
    match scheme {
        Scheme::StandardWebhooks => (
            "{id}.{timestamp}.{body}",
            "webhook-signature: v1,<base64 HMAC-SHA256> (or v1a,<base64 Ed25519> with a v1a key)",
            "the webhook-id header",
        ),
        Scheme::Stripe => ("{timestamp}.{body}", "Stripe-Signature: t=<unix>,v1=<hex HMAC-SHA256>", "the body's id"),
        Scheme::Github => ("{body}", "X-Hub-Signature-256: sha256=<hex HMAC-SHA256>", "the X-GitHub-Delivery header"),
    }
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
        for scheme in Scheme::ALL {
            let headers = sign_for(scheme, &secret, "msg_1", 1_700_000_000, "x", body).unwrap();
            let pairs: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let parsed = parse_headers(scheme, pairs.as_slice()).unwrap();
            let key = signature::hmac_key(scheme, &secret).unwrap();
            assert!(verify_with_key(&parsed, body, &key), "{scheme}");
            assert!(!verify_with_key(&parsed, b"tampered", &key), "{scheme}");
        }
    }
}
