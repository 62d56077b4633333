//! AES-256-GCM sealing under a versioned key ring.
//!
//! Ciphertext layout (format 1):
//!
//! ```text
//! [0]      format version (1)
//! [1..5]   KEK version, big-endian u32 (0 = the master key itself)
//! [5..17]  random 96-bit nonce
//! [17..]   AES-256-GCM ciphertext followed by its 16-byte tag
//! ```
//!
//! The GCM associated data is the 5-byte header followed by the caller's
//! [`Aad`], so neither the header nor the row binding can be altered.

use aes_gcm::{
    Aes256Gcm, Nonce,
    aead::{Aead, KeyInit, Payload},
};
use base64::{Engine, engine::general_purpose::STANDARD};
use rand::RngCore;
use std::collections::BTreeMap;
use zeroize::{Zeroize, ZeroizeOnDrop, Zeroizing};

use super::CryptoError;

/// The only ciphertext format this build writes.
pub const CIPHERTEXT_FORMAT_V1: u8 = 1;
const HEADER_LEN: usize = 5;
const NONCE_LEN: usize = 12;
const TAG_LEN: usize = 16;
const MIN_LEN: usize = HEADER_LEN + NONCE_LEN + TAG_LEN;
/// KEK version slot used when the master key wraps a KEK.
const MASTER_VERSION: u32 = 0;

/// 32 bytes of AES-256 key material. Never cloned, printed or serialised.
#[derive(Zeroize, ZeroizeOnDrop)]
struct KeyBytes([u8; 32]);

impl KeyBytes {
    fn random() -> Self {
        let mut k = KeyBytes([0u8; 32]);
        rand::rngs::OsRng.fill_bytes(&mut k.0);
        k
    }
    fn cipher(&self) -> Aes256Gcm {
        Aes256Gcm::new(&self.0.into())
    }
}

/// The operator's root key (from `SIGNET_MASTER_KEY[_FILE]`). It only wraps
/// KEKs; it never seals row data directly.
pub struct MasterKey(KeyBytes);

/// One key-encryption key version.
pub struct Kek(KeyBytes);

impl std::fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MasterKey(<redacted>)")
    }
}
impl std::fmt::Debug for Kek {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Kek(<redacted>)")
    }
}

impl MasterKey {
    /// Parses base64 of exactly 32 bytes (surrounding whitespace allowed, as
    /// in a key file with a trailing newline).
    pub fn from_base64(encoded: &str) -> Result<Self, CryptoError> {
        let raw = Zeroizing::new(STANDARD.decode(encoded.trim()).map_err(|_| CryptoError::BadMasterKey)?);
        let bytes: [u8; 32] = raw.as_slice().try_into().map_err(|_| CryptoError::BadMasterKey)?;
        Ok(MasterKey(KeyBytes(bytes)))
    }

    /// A new random master key and its base64 encoding (to write to the key
    /// file once).
    pub fn generate() -> (Self, Zeroizing<String>) {
        let key = KeyBytes::random();
        let encoded = Zeroizing::new(STANDARD.encode(key.0));
        (MasterKey(key), encoded)
    }

    /// Seals a KEK for storage in the `kek_versions` table.
    pub fn wrap_kek(&self, version: u32, kek: &Kek) -> Result<Vec<u8>, CryptoError> {
        seal_raw(&self.0, MASTER_VERSION, &Aad::kek(version), &kek.0.0)
    }

    /// Opens a stored KEK. Fails with [`CryptoError::Unauthentic`] when this
    /// is not the master key the ring was created with.
    pub fn unwrap_kek(&self, version: u32, wrapped: &[u8]) -> Result<Kek, CryptoError> {
        let (header_version, _) = parse(wrapped)?;
        if header_version != MASTER_VERSION {
            return Err(CryptoError::Malformed);
        }
        let plain = open_raw(&self.0, &Aad::kek(version), wrapped)?;
        let bytes: [u8; 32] = plain.as_slice().try_into().map_err(|_| CryptoError::Malformed)?;
        Ok(Kek(KeyBytes(bytes)))
    }
}

impl Kek {
    /// A new random KEK.
    pub fn generate() -> Self {
        Kek(KeyBytes::random())
    }
}

/// Associated data binding a ciphertext to its purpose and row. Fields are
/// length-prefixed so `("ab","c")` and `("a","bc")` differ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Aad(Vec<u8>);

impl Aad {
    fn new(purpose: &str, fields: &[&str]) -> Self {
        let mut out = Vec::with_capacity(64);
        for part in std::iter::once(purpose).chain(fields.iter().copied()) {
            out.extend_from_slice(&(part.len() as u32).to_be_bytes());
            out.extend_from_slice(part.as_bytes());
        }
        Aad(out)
    }

    /// A signing key's secret, bound to its tenant, endpoint and key id.
    pub fn signing_key(tenant_id: &str, endpoint_id: &str, key_id: &str) -> Self {
        Self::new("signet/signing-key", &[tenant_id, endpoint_id, key_id])
    }

    /// A received event body, bound to its claim.
    pub fn event_body(tenant_id: &str, endpoint_id: &str, event_id: &str) -> Self {
        Self::new("signet/event-body", &[tenant_id, endpoint_id, event_id])
    }

    /// An outbox intent's payload, bound to its tenant and intent id.
    pub fn outbox_payload(tenant_id: &str, intent_id: &str) -> Self {
        Self::new("signet/outbox-payload", &[tenant_id, intent_id])
    }

    /// One of Signet's own keys (`service_keys`), bound to its purpose, id
    /// and the facts sealed with it.
    pub fn service_key(purpose: &str, key_id: &str, binding: &str) -> Self {
        Self::new("signet/service-key", &[purpose, key_id, binding])
    }

    fn kek(version: u32) -> Self {
        Self::new("signet/kek", &[&version.to_string()])
    }
}

/// All KEK versions this process can use: it opens any of them and seals
/// with the newest.
#[derive(Default)]
pub struct Keyring {
    keks: BTreeMap<u32, Kek>,
}

impl std::fmt::Debug for Keyring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyring").field("versions", &self.keks.keys().collect::<Vec<_>>()).finish()
    }
}

impl Keyring {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) one version.
    pub fn insert(&mut self, version: u32, kek: Kek) {
        self.keks.insert(version, kek);
    }

    /// The version new ciphertexts are sealed under.
    pub fn newest_version(&self) -> Option<u32> {
        self.keks.keys().next_back().copied()
    }

    /// Seals `plaintext` under the newest KEK.
    pub fn seal(&self, aad: &Aad, plaintext: &[u8]) -> Result<Vec<u8>, CryptoError> {
        let (version, kek) = self.keks.iter().next_back().ok_or(CryptoError::EmptyKeyring)?;
        seal_raw(&kek.0, *version, aad, plaintext)
    }

    /// Seals `plaintext` under KEK `version`.
    pub fn seal_under(&self, version: u32, aad: &Aad, plaintext: &[u8]) -> Result<Vec<u8>, CryptoError> {
        let kek = self.keks.get(&version).ok_or(CryptoError::UnknownKekVersion(version))?;
        seal_raw(&kek.0, version, aad, plaintext)
    }

    /// Opens a ciphertext sealed under any version in the ring.
    pub fn open(&self, aad: &Aad, ciphertext: &[u8]) -> Result<Zeroizing<Vec<u8>>, CryptoError> {
        let (version, _) = parse(ciphertext)?;
        let kek = self.keks.get(&version).ok_or(CryptoError::UnknownKekVersion(version))?;
        open_raw(&kek.0, aad, ciphertext)
    }

    /// Re-seals under the newest KEK. `None` when it already is.
    pub fn rewrap(&self, aad: &Aad, ciphertext: &[u8]) -> Result<Option<Vec<u8>>, CryptoError> {
        let newest = self.newest_version().ok_or(CryptoError::EmptyKeyring)?;
        if kek_version_of(ciphertext)? == newest {
            return Ok(None);
        }
        let plain = self.open(aad, ciphertext)?;
        self.seal(aad, &plain).map(Some)
    }
}

/// The KEK version recorded in a ciphertext's header.
pub fn kek_version_of(ciphertext: &[u8]) -> Result<u32, CryptoError> {
    parse(ciphertext).map(|(v, _)| v)
}

/// Validates the header and returns (KEK version, nonce).
fn parse(ciphertext: &[u8]) -> Result<(u32, &[u8]), CryptoError> {
    if ciphertext.len() < MIN_LEN {
        return Err(CryptoError::Malformed);
    }
    let (header, rest) = ciphertext.split_at(HEADER_LEN);
    let (format, version) = header.split_first().ok_or(CryptoError::Malformed)?;
    if *format != CIPHERTEXT_FORMAT_V1 {
        return Err(CryptoError::Malformed);
    }
    let version = u32::from_be_bytes(version.try_into().map_err(|_| CryptoError::Malformed)?);
    let (nonce, _) = rest.split_at(NONCE_LEN);
    Ok((version, nonce))
}

fn gcm_aad(header: &[u8], aad: &Aad) -> Vec<u8> {
    let mut full = Vec::with_capacity(header.len() + aad.0.len());
    full.extend_from_slice(header);
    full.extend_from_slice(&aad.0);
    full
}

fn seal_raw(key: &KeyBytes, version: u32, aad: &Aad, plaintext: &[u8]) -> Result<Vec<u8>, CryptoError> {
    let mut nonce = [0u8; NONCE_LEN];
    rand::rngs::OsRng.fill_bytes(&mut nonce);
    seal_with_nonce(key, version, &nonce, aad, plaintext)
}

fn seal_with_nonce(
    key: &KeyBytes,
    version: u32,
    nonce: &[u8; NONCE_LEN],
    aad: &Aad,
    plaintext: &[u8],
) -> Result<Vec<u8>, CryptoError> {
    let mut out = Vec::with_capacity(MIN_LEN + plaintext.len());
    out.push(CIPHERTEXT_FORMAT_V1);
    out.extend_from_slice(&version.to_be_bytes());
    let full_aad = gcm_aad(&out, aad);
    let sealed = key
        .cipher()
        .encrypt(Nonce::from_slice(nonce), Payload { msg: plaintext, aad: &full_aad })
        .map_err(|_| CryptoError::Malformed)?;
    out.extend_from_slice(nonce);
    out.extend_from_slice(&sealed);
    Ok(out)
}

fn open_raw(key: &KeyBytes, aad: &Aad, ciphertext: &[u8]) -> Result<Zeroizing<Vec<u8>>, CryptoError> {
    let (_, nonce) = parse(ciphertext)?;
    let (header, rest) = ciphertext.split_at(HEADER_LEN);
    let (_, body) = rest.split_at(NONCE_LEN);
    let full_aad = gcm_aad(header, aad);
    key.cipher()
        .decrypt(Nonce::from_slice(nonce), Payload { msg: body, aad: &full_aad })
        .map(Zeroizing::new)
        .map_err(|_| CryptoError::Unauthentic)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn ring_with(versions: &[u32]) -> Keyring {
        let mut ring = Keyring::new();
        for v in versions {
            ring.insert(*v, Kek::generate());
        }
        ring
    }

    fn aad() -> Aad {
        Aad::signing_key("tenant-1", "endpoint-1", "key_1")
    }

    /// The primitive itself: AES-256-GCM test cases 13 and 14 from McGrew &
    /// Viega, "The Galois/Counter Mode of Operation" (the NIST GCM spec).
    #[test]
    fn aes256gcm_known_answers() {
        let cipher = Aes256Gcm::new(&[0u8; 32].into());
        let nonce = Nonce::from_slice(&[0u8; 12]);
        let t13 = cipher.encrypt(nonce, &b""[..]).unwrap();
        assert_eq!(hex::encode(t13), "530f8afbc74536b9a963b4f1c4cb738b");
        let t14 = cipher.encrypt(nonce, &[0u8; 16][..]).unwrap();
        assert_eq!(hex::encode(t14), "cea7403d4d606b6e074ec5d3baf39d18d0d1c8a799996bf0265b98b5d48ab919");
    }

    /// Signet's format with a fixed key and nonce: pins the layout and the
    /// associated-data encoding so a change to either is caught.
    #[test]
    fn format_v1_known_answer() {
        let key = KeyBytes([0x42; 32]);
        let sealed = seal_with_nonce(&key, 7, &[0x24; 12], &aad(), b"whsec_example").unwrap();
        assert_eq!(&sealed[..5], &[1, 0, 0, 0, 7]);
        assert_eq!(&sealed[5..17], &[0x24; 12]);
        assert_eq!(hex::encode(&sealed[17..]), FORMAT_V1_VECTOR);
        assert_eq!(&*open_raw(&key, &aad(), &sealed).unwrap(), b"whsec_example");
    }
    /// Computed independently with Python's `cryptography` AESGCM over the
    /// same header, nonce and length-prefixed associated data.
    const FORMAT_V1_VECTOR: &str = "62f9b7248a99a346478552c6d848aa00983da4be286dce3414c6d07029";

    #[test]
    fn round_trip_and_fresh_nonces() {
        let ring = ring_with(&[1]);
        let a = ring.seal(&aad(), b"secret").unwrap();
        let b = ring.seal(&aad(), b"secret").unwrap();
        assert_ne!(a, b, "each seal uses a fresh nonce");
        assert_eq!(&*ring.open(&aad(), &a).unwrap(), b"secret");
        assert_eq!(kek_version_of(&a).unwrap(), 1);
    }

    #[test]
    fn ciphertext_moved_to_another_row_fails() {
        let ring = ring_with(&[1]);
        let sealed = ring.seal(&aad(), b"secret").unwrap();
        for other in [
            Aad::signing_key("tenant-2", "endpoint-1", "key_1"),
            Aad::signing_key("tenant-1", "endpoint-2", "key_1"),
            Aad::signing_key("tenant-1", "endpoint-1", "key_2"),
            Aad::event_body("tenant-1", "endpoint-1", "key_1"),
            Aad::signing_key("tenant-1endpoint-1", "", "key_1"),
        ] {
            assert_eq!(ring.open(&other, &sealed), Err(CryptoError::Unauthentic));
        }
    }

    #[test]
    fn tampering_anywhere_fails() {
        let ring = ring_with(&[1]);
        let sealed = ring.seal(&aad(), b"secret").unwrap();
        for i in 0..sealed.len() {
            let mut bad = sealed.clone();
            bad[i] ^= 0x01;
            assert!(ring.open(&aad(), &bad).is_err(), "flip at byte {i} was accepted");
        }
    }

    #[test]
    fn truncated_and_garbage_input_is_an_error_not_a_panic() {
        let ring = ring_with(&[1]);
        let sealed = ring.seal(&aad(), b"secret").unwrap();
        for len in 0..sealed.len() {
            assert!(ring.open(&aad(), &sealed[..len]).is_err());
        }
        assert_eq!(ring.open(&aad(), b""), Err(CryptoError::Malformed));
        assert_eq!(ring.open(&aad(), &[9u8; 64]), Err(CryptoError::Malformed));
        assert_eq!(kek_version_of(&[1, 0]), Err(CryptoError::Malformed));
    }

    #[test]
    fn keyring_opens_old_versions_and_seals_with_newest() {
        let mut ring = ring_with(&[1]);
        let old = ring.seal(&aad(), b"secret").unwrap();
        ring.insert(2, Kek::generate());
        let new = ring.seal(&aad(), b"secret").unwrap();
        assert_eq!(kek_version_of(&new).unwrap(), 2);
        assert_eq!(&*ring.open(&aad(), &old).unwrap(), b"secret");
        let rewrapped = ring.rewrap(&aad(), &old).unwrap().unwrap();
        assert_eq!(kek_version_of(&rewrapped).unwrap(), 2);
        assert_eq!(&*ring.open(&aad(), &rewrapped).unwrap(), b"secret");
        assert!(ring.rewrap(&aad(), &rewrapped).unwrap().is_none());
    }

    #[test]
    fn unknown_version_is_reported() {
        let ring = ring_with(&[1]);
        let other = ring_with(&[5]);
        let sealed = other.seal(&aad(), b"x").unwrap();
        assert_eq!(ring.open(&aad(), &sealed), Err(CryptoError::UnknownKekVersion(5)));
        assert_eq!(Keyring::new().seal(&aad(), b"x"), Err(CryptoError::EmptyKeyring));
    }

    #[test]
    fn kek_wrapping_needs_the_right_master_key_and_version() {
        let (master, encoded) = MasterKey::generate();
        let again = MasterKey::from_base64(&format!("{}\n", encoded.as_str())).unwrap();
        let kek = Kek::generate();
        let wrapped = master.wrap_kek(3, &kek).unwrap();
        let opened = again.unwrap_kek(3, &wrapped).unwrap();
        assert_eq!(opened.0.0, kek.0.0);
        assert_eq!(master.unwrap_kek(4, &wrapped).err(), Some(CryptoError::Unauthentic));
        let (other, _) = MasterKey::generate();
        assert_eq!(other.unwrap_kek(3, &wrapped).err(), Some(CryptoError::Unauthentic));
    }

    #[test]
    fn master_key_parsing_rejects_bad_input() {
        assert!(MasterKey::from_base64("not base64!").is_err());
        assert!(MasterKey::from_base64(&STANDARD.encode([0u8; 31])).is_err());
        assert!(MasterKey::from_base64(&STANDARD.encode([0u8; 33])).is_err());
        assert!(MasterKey::from_base64(&STANDARD.encode([0u8; 32])).is_ok());
    }

    #[test]
    fn debug_output_is_redacted() {
        let (master, encoded) = MasterKey::generate();
        let text = format!("{master:?} {:?} {:?}", Kek::generate(), ring_with(&[1, 2]));
        assert!(!text.contains(encoded.as_str()));
        assert!(text.contains("redacted"));
    }
}
