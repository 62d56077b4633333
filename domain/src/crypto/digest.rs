//! Digests and random tokens for sessions, API tokens and setup links.
//!
//! Tokens are 32 random bytes; only their SHA-256 digest is ever stored, so a
//! database leak does not yield usable sessions or tokens.

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use rand::RngCore;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use zeroize::Zeroizing;

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Constant-time equality for secrets of possibly different lengths.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.ct_eq(b).into()
}

/// A freshly minted bearer token: the plaintext (shown once) and its digest
/// (stored).
pub struct RandomToken {
    plaintext: Zeroizing<String>,
    digest: String,
}

impl RandomToken {
    /// The token to hand to its holder exactly once.
    pub fn expose(&self) -> &str {
        &self.plaintext
    }
    /// The value to store and look up by.
    pub fn digest(&self) -> &str {
        &self.digest
    }
}

impl std::fmt::Debug for RandomToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RandomToken").field("plaintext", &"<redacted>").field("digest", &self.digest).finish()
    }
}

/// A new random token `<prefix><base64url(32 bytes)>`.
pub fn random_token(prefix: &str) -> RandomToken {
    let mut raw = Zeroizing::new([0u8; 32]);
    rand::rngs::OsRng.fill_bytes(raw.as_mut());
    let plaintext = Zeroizing::new(format!("{prefix}{}", URL_SAFE_NO_PAD.encode(raw.as_ref())));
    let digest = sha256_hex(plaintext.as_bytes());
    RandomToken { plaintext, digest }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_known_answer() {
        assert_eq!(sha256_hex(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }

    #[test]
    fn tokens_are_unique_and_digest_matches() {
        let a = random_token("sgt_");
        let b = random_token("sgt_");
        assert_ne!(a.expose(), b.expose());
        assert!(a.expose().starts_with("sgt_"));
        assert_eq!(a.digest(), sha256_hex(a.expose().as_bytes()));
        assert!(!format!("{a:?}").contains(a.expose()));
    }

    #[test]
    fn constant_time_eq_handles_lengths() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
    }
}
