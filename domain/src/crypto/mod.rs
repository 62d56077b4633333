//! The only module that touches key bytes.
//!
//! Threat model notes:
//! - Signing secrets are stored sealed with AES-256-GCM under a versioned
//!   key-encryption key (KEK). The associated data binds every ciphertext to
//!   the row it belongs to (tenant, endpoint, key id), so a ciphertext copied
//!   into another row does not open.
//! - KEKs are themselves sealed under the operator's master key and kept in
//!   the database (`kek_versions`), so every instance of a multi-instance
//!   deployment sees the same ring and `signet kek rotate` needs no file
//!   shuffling. The master key never touches the database.
//! - Standard Webhooks `v1a` credentials are Ed25519 public keys, stored in
//!   clear: they cannot sign, so there is nothing to seal ([`asymmetric`]).
//! - Types that hold key material have no `Clone`/`Serialize`, a redacting
//!   `Debug`, and zeroize on drop. Bad input is an error, never a panic.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

pub mod asymmetric;
mod digest;
mod password;
pub mod profile;
mod seal;
mod secret;
pub mod service;
pub mod signature;

pub use digest::{RandomToken, constant_time_eq, random_token, sha256_hex};
pub use password::{Password, hash_password, verify_password, verify_password_dummy};
pub use seal::{Aad, CIPHERTEXT_FORMAT_V1, Kek, Keyring, MasterKey, kek_version_of};
pub use secret::SigningSecret;

/// Errors from sealing and opening. They deliberately carry no key bytes
/// and no plaintext.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CryptoError {
    #[error("ciphertext is truncated or not in a known format")]
    Malformed,
    #[error("ciphertext was sealed under KEK version {0}, which this keyring does not hold")]
    UnknownKekVersion(u32),
    #[error("ciphertext does not open under this key and associated data")]
    Unauthentic,
    #[error("the key ring is empty")]
    EmptyKeyring,
    #[error("master key must be base64 of exactly 32 bytes")]
    BadMasterKey,
    #[error("password hashing failed")]
    PasswordHash,
    #[error("Signet's {0} key is missing or not loaded")]
    MissingServiceKey(&'static str),
    /// Sealing needs its count raised in the database first
    /// (`Vault::reserve_seals`), and this process has no seals left.
    #[error("no seals are counted ahead under the current KEK version; nothing was sealed")]
    SealsNotReserved,
}
