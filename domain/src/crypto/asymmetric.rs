//! Standard Webhooks asymmetric credentials (`v1a`, Ed25519), serialised as
//! the spec writes them: `whpk_` + base64 of the 32-byte public key, and
//! `whsk_` + base64 of the private key.
//!
//! Threat model: for a provider's own pair Signet stores only the public
//! half. A leaked database or backup then holds nothing that can sign an
//! event. A private key exists in Signet only when it generates a pair for
//! a provider (shown once, then kept sealed by the vault, as HMAC secrets
//! are, for test deliveries) and in `signet send`.
//!
//! Verification is `verify_strict` (RFC 8032 with the small-order and
//! non-canonical checks), and weak (small-order) public keys are refused at
//! provisioning, so no signature can verify under a key anyone could sign
//! for.

use base64::{Engine, engine::general_purpose::STANDARD};
use ed25519_dalek::{SECRET_KEY_LENGTH, Signature, Signer, SigningKey, VerifyingKey};
use rand::RngCore;
use zeroize::Zeroizing;

/// Prefix of a serialised public key.
pub const PUBLIC_PREFIX: &str = "whpk_";
/// Prefix of a serialised private key.
pub const PRIVATE_PREFIX: &str = "whsk_";
/// What a serialised public key looks like: 44 base64 characters whose
/// last one before the `=` carries no stray bits (the decoder refuses them).
/// A string of this shape may still not be a curve point.
pub const PUBLIC_KEY_PATTERN: &str = "^whpk_[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=$";
/// Length of an Ed25519 signature.
pub const SIGNATURE_LEN: usize = 64;

/// Why a `whpk_…` string is not a usable public key. The messages name what
/// is wrong, never echo the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PublicKeyError {
    #[error("a v1a public key starts with whpk_")]
    Prefix,
    #[error("the text after whpk_ is not standard base64")]
    Encoding,
    #[error("an Ed25519 public key is 32 bytes")]
    Length,
    #[error("the 32 bytes are not an Ed25519 public key (not a point on the curve)")]
    NotAPoint,
    #[error("the key is a weak (small-order) Ed25519 point, which anyone could sign for")]
    Weak,
}

/// A provider's Ed25519 public key. Public material: it may be copied,
/// printed and stored in clear.
#[derive(Clone, PartialEq, Eq)]
pub struct PublicKey(VerifyingKey);

impl std::fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PublicKey({})", self.encode())
    }
}

impl PublicKey {
    /// Parses `whpk_<base64 of 32 bytes>` ([`PUBLIC_KEY_PATTERN`], then a
    /// point check).
    pub fn parse(text: &str) -> Result<Self, PublicKeyError> {
        let encoded = text.strip_prefix(PUBLIC_PREFIX).ok_or(PublicKeyError::Prefix)?;
        let raw = STANDARD.decode(encoded).map_err(|_| PublicKeyError::Encoding)?;
        let bytes: [u8; 32] = raw.as_slice().try_into().map_err(|_| PublicKeyError::Length)?;
        let key = VerifyingKey::from_bytes(&bytes).map_err(|_| PublicKeyError::NotAPoint)?;
        if key.is_weak() {
            return Err(PublicKeyError::Weak);
        }
        Ok(PublicKey(key))
    }

    /// `whpk_` + base64.
    pub fn encode(&self) -> String {
        format!("{PUBLIC_PREFIX}{}", STANDARD.encode(self.0.as_bytes()))
    }

    /// Whether `signature` is this key's signature over `message`.
    pub fn verify(&self, message: &[u8], signature: &[u8; SIGNATURE_LEN]) -> bool {
        self.0.verify_strict(message, &Signature::from_bytes(signature)).is_ok()
    }
}

/// An Ed25519 private key. No `Clone`/`Serialize`; redacting `Debug`;
/// `ed25519-dalek` zeroizes it on drop.
pub struct PrivateKey(SigningKey);

impl std::fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PrivateKey(<redacted>)")
    }
}

impl PrivateKey {
    /// A fresh key from the OS RNG.
    pub fn generate() -> Self {
        let mut seed = Zeroizing::new([0u8; SECRET_KEY_LENGTH]);
        rand::rngs::OsRng.fill_bytes(seed.as_mut());
        PrivateKey(SigningKey::from_bytes(&seed))
    }

    /// Parses `whsk_` + base64 of either the 32-byte seed (RFC 8032's
    /// private key, what Python's `cryptography` writes with
    /// `private_bytes_raw`) or the 64-byte seed ‖ public key (Go's
    /// `ed25519.PrivateKey`, libsodium), whose second half must match.
    pub fn parse(text: &str) -> Option<Self> {
        let encoded = text.trim().strip_prefix(PRIVATE_PREFIX)?;
        let raw = Zeroizing::new(STANDARD.decode(encoded).ok()?);
        let (seed, public) = match raw.len() {
            32 => (raw.as_slice(), None),
            64 => {
                let (s, p) = raw.split_at(32);
                (s, Some(p))
            }
            _ => return None,
        };
        let seed: Zeroizing<[u8; 32]> = Zeroizing::new(seed.try_into().ok()?);
        let key = SigningKey::from_bytes(&seed);
        if public.is_some_and(|p| p != key.verifying_key().as_bytes()) {
            return None;
        }
        Some(PrivateKey(key))
    }

    /// `whsk_` + base64 of the 32-byte seed, to show exactly once.
    pub fn encode(&self) -> Zeroizing<String> {
        let seed = Zeroizing::new(self.0.to_bytes());
        Zeroizing::new(format!("{PRIVATE_PREFIX}{}", STANDARD.encode(seed.as_ref())))
    }

    /// The matching public key.
    pub fn public_key(&self) -> PublicKey {
        PublicKey(self.0.verifying_key())
    }

    /// The signature over `message`.
    pub fn sign(&self, message: &[u8]) -> [u8; SIGNATURE_LEN] {
        self.0.sign(message).to_bytes()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn public_keys_are_validated() {
        let k = PrivateKey::generate();
        let pk = k.public_key();
        assert_eq!(PublicKey::parse(&pk.encode()).unwrap(), pk);
        assert_eq!(PublicKey::parse(&format!(" {}", pk.encode())), Err(PublicKeyError::Prefix));
        let b64 = |b: &[u8]| format!("whpk_{}", STANDARD.encode(b));
        assert_eq!(PublicKey::parse(&pk.encode().replace("whpk_", "whsec_")), Err(PublicKeyError::Prefix));
        assert_eq!(PublicKey::parse("whpk_not base64!"), Err(PublicKeyError::Encoding));
        assert_eq!(PublicKey::parse(&b64(&[7u8; 31])), Err(PublicKeyError::Length));
        assert_eq!(PublicKey::parse(&b64(&[7u8; 33])), Err(PublicKeyError::Length));
        // The identity point (y = 1) has small order.
        let mut identity = [0u8; 32];
        identity[0] = 1;
        assert_eq!(PublicKey::parse(&b64(&identity)), Err(PublicKeyError::Weak));
        // y = 2 is not the y-coordinate of any curve point.
        let mut off_curve = [0u8; 32];
        off_curve[0] = 2;
        assert_eq!(PublicKey::parse(&b64(&off_curve)), Err(PublicKeyError::NotAPoint));
    }

    /// The documented pattern admits exactly the strings whose shape
    /// `parse` accepts: what still fails is the point check.
    #[test]
    fn the_public_key_pattern_is_the_shape_check() {
        let pattern = regex::Regex::new(PUBLIC_KEY_PATTERN).unwrap();
        for _ in 0..50 {
            assert!(pattern.is_match(&PrivateKey::generate().public_key().encode()));
        }
        let b64 = |b: &[u8]| format!("whpk_{}", STANDARD.encode(b));
        let mut last_bits = b64(&[0u8; 32]).into_bytes();
        last_bits[47] = b'B'; // stray bits in the last character
        let last_bits = String::from_utf8(last_bits).unwrap();
        for s in [b64(&[7u8; 31]), b64(&[7u8; 33]), "whpk_x".into(), last_bits, format!(" {}", b64(&[0u8; 32]))] {
            assert!(!pattern.is_match(&s), "{s}");
            assert!(
                matches!(
                    PublicKey::parse(&s),
                    Err(PublicKeyError::Length | PublicKeyError::Encoding | PublicKeyError::Prefix)
                ),
                "{s}"
            );
        }
    }

    #[test]
    fn private_keys_round_trip_in_both_lengths() {
        let k = PrivateKey::generate();
        let again = PrivateKey::parse(&k.encode()).unwrap();
        assert_eq!(again.public_key(), k.public_key());
        let mut long = k.0.to_bytes().to_vec();
        long.extend_from_slice(k.public_key().0.as_bytes());
        let go_style = format!("whsk_{}", STANDARD.encode(&long));
        assert_eq!(PrivateKey::parse(&go_style).unwrap().public_key(), k.public_key());
        let other = PrivateKey::generate();
        long.truncate(32);
        long.extend_from_slice(other.public_key().0.as_bytes());
        assert!(PrivateKey::parse(&format!("whsk_{}", STANDARD.encode(&long))).is_none(), "mismatched halves");
        assert!(PrivateKey::parse("whsk_AAAA").is_none());
        assert!(PrivateKey::parse(&k.public_key().encode()).is_none());
        assert!(!format!("{k:?}").contains(k.encode().as_str()));
    }

    #[test]
    fn signatures_verify_only_under_their_key_and_message() {
        let k = PrivateKey::generate();
        let sig = k.sign(b"msg.1.body");
        assert!(k.public_key().verify(b"msg.1.body", &sig));
        assert!(!k.public_key().verify(b"msg.1.bodz", &sig));
        assert!(!PrivateKey::generate().public_key().verify(b"msg.1.body", &sig));
        let mut flipped = sig;
        flipped[10] ^= 1;
        assert!(!k.public_key().verify(b"msg.1.body", &flipped));
    }
}
