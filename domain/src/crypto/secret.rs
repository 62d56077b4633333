//! Webhook signing secrets: `whsec_` + base64 of 32 random bytes, for every
//! scheme. How the secret string becomes HMAC key bytes is per scheme
//! (docs/contract.md §3) and lives with the verifiers.

use base64::{Engine, engine::general_purpose::STANDARD};
use rand::RngCore;
use zeroize::Zeroizing;

const PREFIX: &str = "whsec_";

/// A signing secret in plaintext. Exists only between generation and
/// sealing, and between opening and HMAC key derivation.
pub struct SigningSecret(Zeroizing<String>);

impl SigningSecret {
    /// A fresh secret from the OS RNG.
    pub fn generate() -> Self {
        let mut raw = Zeroizing::new([0u8; 32]);
        rand::rngs::OsRng.fill_bytes(raw.as_mut());
        SigningSecret(Zeroizing::new(format!("{PREFIX}{}", STANDARD.encode(raw.as_ref()))))
    }

    /// Rebuilds a secret from the bytes the vault opened. Fails on bytes that
    /// are not a secret string (which would mean the vault row is corrupt).
    pub fn from_opened(bytes: Zeroizing<Vec<u8>>) -> Option<Self> {
        let text = std::str::from_utf8(&bytes).ok()?;
        Self::parse(text)
    }

    /// Parses a secret given by a provider-side user (`signet send --secret`).
    /// Any non-empty string is accepted: GitHub secrets are free-form.
    pub fn parse(text: &str) -> Option<Self> {
        (!text.is_empty()).then(|| SigningSecret(Zeroizing::new(text.to_owned())))
    }

    /// The secret text, for showing exactly once or for sealing.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The bytes after `whsec_`, base64-decoded (Standard Webhooks' HMAC key).
    /// `None` when the secret is not of that form.
    pub fn decoded_whsec(&self) -> Option<Zeroizing<Vec<u8>>> {
        let encoded = self.0.strip_prefix(PREFIX)?;
        STANDARD.decode(encoded).ok().map(Zeroizing::new)
    }
}

impl std::fmt::Debug for SigningSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SigningSecret(<redacted>)")
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn generated_secrets_have_the_contract_shape() {
        let s = SigningSecret::generate();
        assert!(s.expose().starts_with("whsec_"));
        assert_eq!(s.decoded_whsec().unwrap().len(), 32);
        assert_ne!(s.expose(), SigningSecret::generate().expose());
        assert!(!format!("{s:?}").contains(s.expose()));
    }

    #[test]
    fn opened_bytes_round_trip_and_garbage_is_rejected() {
        let s = SigningSecret::generate();
        let again = SigningSecret::from_opened(Zeroizing::new(s.expose().as_bytes().to_vec())).unwrap();
        assert_eq!(again.expose(), s.expose());
        assert!(SigningSecret::from_opened(Zeroizing::new(vec![0xff, 0xfe])).is_none());
        assert!(SigningSecret::parse("").is_none());
        assert!(SigningSecret::parse("It's a Secret to Everybody").unwrap().decoded_whsec().is_none());
    }
}
