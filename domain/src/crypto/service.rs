//! Signet's own keys: the evidence-signing key (Ed25519) and the audit MAC
//! key (HMAC-SHA256). Both are generated here, stored sealed in the vault
//! (`service_keys`), and exist in memory only inside these types.

use base64::{Engine, engine::general_purpose::STANDARD};
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey, pkcs8::DecodePublicKey};
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;
use zeroize::{Zeroize, ZeroizeOnDrop, Zeroizing};

use super::CryptoError;

/// An HMAC-SHA256 key for the audit chain. Never cloned, printed or
/// serialised; wiped on drop.
#[derive(Zeroize, ZeroizeOnDrop)]
pub struct MacKey([u8; 32]);

impl std::fmt::Debug for MacKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MacKey(<redacted>)")
    }
}

impl MacKey {
    /// A new random key and its bytes, to be sealed.
    pub fn generate() -> (MacKey, Zeroizing<Vec<u8>>) {
        let mut k = MacKey([0u8; 32]);
        rand::rngs::OsRng.fill_bytes(&mut k.0);
        let bytes = Zeroizing::new(k.0.to_vec());
        (k, bytes)
    }

    /// The key from opened (unsealed) bytes.
    pub fn from_opened(bytes: &[u8]) -> Result<MacKey, CryptoError> {
        let raw: [u8; 32] = bytes.try_into().map_err(|_| CryptoError::Malformed)?;
        Ok(MacKey(raw))
    }

    /// Lowercase hex HMAC-SHA256 of `data`.
    pub fn mac_hex(&self, data: &[u8]) -> String {
        // HMAC accepts keys of any length, so this cannot fail.
        let mut m = <Hmac<Sha256> as Mac>::new_from_slice(&self.0)
            .unwrap_or_else(|_| unreachable!("HMAC takes any key length"));
        m.update(data);
        hex::encode(m.finalize().into_bytes())
    }

    /// Constant-time check of a hex MAC.
    pub fn verify_hex(&self, data: &[u8], mac: &str) -> bool {
        super::constant_time_eq(self.mac_hex(data).as_bytes(), mac.as_bytes())
    }
}

/// The deployment's Ed25519 evidence-signing key.
pub struct EvidenceSigner(SigningKey);

impl std::fmt::Debug for EvidenceSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("EvidenceSigner").field(&self.public_key_base64()).finish()
    }
}

impl EvidenceSigner {
    /// A new key: the signer and its 32-byte seed, to be sealed.
    pub fn generate() -> (EvidenceSigner, Zeroizing<Vec<u8>>) {
        let mut seed = Zeroizing::new([0u8; 32]);
        rand::rngs::OsRng.fill_bytes(seed.as_mut());
        let signer = EvidenceSigner(SigningKey::from_bytes(&seed));
        (signer, Zeroizing::new(seed.to_vec()))
    }

    /// The signer from its opened (unsealed) seed.
    pub fn from_opened(seed: &[u8]) -> Result<EvidenceSigner, CryptoError> {
        let raw: Zeroizing<[u8; 32]> = Zeroizing::new(seed.try_into().map_err(|_| CryptoError::Malformed)?);
        Ok(EvidenceSigner(SigningKey::from_bytes(&raw)))
    }

    /// The public key, base64 of its 32 bytes.
    pub fn public_key_base64(&self) -> String {
        STANDARD.encode(self.0.verifying_key().as_bytes())
    }

    /// Base64 of the Ed25519 signature over `message`.
    pub fn sign_base64(&self, message: &[u8]) -> String {
        STANDARD.encode(self.0.sign(message).to_bytes())
    }
}

/// Why a signature did not verify.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SignatureCheck {
    #[error("the public key is neither base64 of 32 bytes nor an Ed25519 PEM public key")]
    BadPublicKey,
    #[error("the signature is not base64 of 64 bytes")]
    BadSignature,
    #[error("the signature does not match the message under this public key")]
    Mismatch,
}

/// Parses a public key given as base64 of its 32 bytes or as a PEM
/// `PUBLIC KEY` (SubjectPublicKeyInfo).
pub fn parse_public_key(text: &str) -> Result<VerifyingKey, SignatureCheck> {
    let t = text.trim();
    if t.starts_with("-----BEGIN") {
        return VerifyingKey::from_public_key_pem(t).map_err(|_| SignatureCheck::BadPublicKey);
    }
    let raw = STANDARD.decode(t).map_err(|_| SignatureCheck::BadPublicKey)?;
    let bytes: [u8; 32] = raw.as_slice().try_into().map_err(|_| SignatureCheck::BadPublicKey)?;
    VerifyingKey::from_bytes(&bytes).map_err(|_| SignatureCheck::BadPublicKey)
}

/// Verifies a base64 Ed25519 signature over `message` (strict: rejects
/// non-canonical and small-order forms).
pub fn verify_signature(public_key: &str, message: &[u8], signature_b64: &str) -> Result<(), SignatureCheck> {
    let key = parse_public_key(public_key)?;
    let raw = STANDARD.decode(signature_b64).map_err(|_| SignatureCheck::BadSignature)?;
    let sig = Signature::from_slice(&raw).map_err(|_| SignatureCheck::BadSignature)?;
    key.verify_strict(message, &sig).map_err(|_| SignatureCheck::Mismatch)
}

/// The PEM form of a base64 public key (for tools that want PEM).
pub fn public_key_pem(public_key_b64: &str) -> Result<String, SignatureCheck> {
    use ed25519_dalek::pkcs8::{EncodePublicKey, spki::der::pem::LineEnding};
    parse_public_key(public_key_b64)?.to_public_key_pem(LineEnding::LF).map_err(|_| SignatureCheck::BadPublicKey)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn signatures_verify_and_tampering_fails() {
        let (signer, seed) = EvidenceSigner::generate();
        let again = EvidenceSigner::from_opened(&seed).unwrap();
        assert_eq!(signer.public_key_base64(), again.public_key_base64());
        let sig = signer.sign_base64(b"manifest");
        let pk = signer.public_key_base64();
        assert_eq!(verify_signature(&pk, b"manifest", &sig), Ok(()));
        assert_eq!(verify_signature(&pk, b"manifesT", &sig), Err(SignatureCheck::Mismatch));
        let (other, _) = EvidenceSigner::generate();
        assert_eq!(verify_signature(&other.public_key_base64(), b"manifest", &sig), Err(SignatureCheck::Mismatch));
        assert_eq!(verify_signature("not base64!", b"manifest", &sig), Err(SignatureCheck::BadPublicKey));
        assert_eq!(verify_signature(&pk, b"manifest", "AAAA"), Err(SignatureCheck::BadSignature));
        let pem = public_key_pem(&pk).unwrap();
        assert!(pem.starts_with("-----BEGIN PUBLIC KEY-----"));
        assert_eq!(verify_signature(&pem, b"manifest", &sig), Ok(()));
        assert!(!format!("{signer:?}").contains(&STANDARD.encode(seed.as_slice())));
    }

    /// RFC 8032 §7.1, test 1: the empty message.
    #[test]
    fn rfc8032_vector() {
        let seed = hex::decode("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60").unwrap();
        let signer = EvidenceSigner::from_opened(&seed).unwrap();
        let pk = STANDARD.decode(signer.public_key_base64()).unwrap();
        assert_eq!(hex::encode(pk), "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a");
        let sig = STANDARD.decode(signer.sign_base64(b"")).unwrap();
        assert_eq!(
            hex::encode(sig),
            concat!(
                "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065",
                "224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
            )
        );
    }

    #[test]
    fn mac_keys_round_trip_and_verify() {
        let (k, bytes) = MacKey::generate();
        let k2 = MacKey::from_opened(&bytes).unwrap();
        let mac = k.mac_hex(b"entry");
        assert!(k2.verify_hex(b"entry", &mac));
        assert!(!k2.verify_hex(b"entrY", &mac));
        assert!(MacKey::from_opened(&[0u8; 31]).is_err());
        assert!(!format!("{k:?}").contains(&hex::encode(bytes.as_slice())));
    }
}
