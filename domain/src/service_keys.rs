//! Storage for Signet's own keys (`service_keys`): sealed by the vault with
//! `Aad::service_key(purpose, key_id, binding)`, one row per purpose, created
//! on first use. Two processes creating the same purpose at once: one insert
//! wins and both use the winner.

use sea_orm::{ConnectionTrait, DatabaseConnection, EntityTrait, Set};
use zeroize::Zeroizing;

use crate::{clock, crypto::Aad, entity::service_key, error::DomainResult, ids, vault::Vault};

/// The Ed25519 key that signs evidence manifests and audit checkpoints.
pub const EVIDENCE_SIGNING: &str = "evidence-signing";
/// The HMAC key that chains the audit log.
pub const AUDIT_MAC: &str = "audit-mac";

/// The row for `purpose`, if one exists.
pub async fn find<C: ConnectionTrait>(conn: &C, purpose: &str) -> DomainResult<Option<service_key::Model>> {
    Ok(service_key::Entity::find_by_id(purpose.to_owned()).one(conn).await?)
}

/// The associated data a row's ciphertext is sealed with.
pub fn aad(row: &service_key::Model) -> Aad {
    Aad::service_key(&row.purpose, &row.key_id, &row.binding)
}

/// The row's key material, opened.
pub async fn open(
    db: &DatabaseConnection,
    vault: &Vault,
    row: &service_key::Model,
) -> DomainResult<Zeroizing<Vec<u8>>> {
    vault.open(db, &aad(row), &row.ciphertext).await
}

/// Seals and stores a new key for `purpose` unless one exists; returns
/// whether this call stored it. The caller reserves the seal first
/// (`Vault::reserve_seals`), before any transaction `conn` is in.
pub async fn insert<C: ConnectionTrait>(
    conn: &C,
    vault: &Vault,
    purpose: &str,
    secret: &[u8],
    public_key: Option<String>,
    binding: String,
) -> DomainResult<bool> {
    let key_id = ids::new_id();
    let (ciphertext, kek) = vault.seal(&Aad::service_key(purpose, &key_id, &binding), secret)?;
    let res = service_key::Entity::insert(service_key::ActiveModel {
        purpose: Set(purpose.to_owned()),
        key_id: Set(key_id),
        ciphertext: Set(ciphertext),
        kek_version: Set(kek as i32),
        public_key: Set(public_key),
        binding: Set(binding),
        created_at: Set(clock::now_ms()),
    })
    .on_conflict_do_nothing_on([service_key::Column::Purpose])
    .exec_without_returning(conn)
    .await?;
    Ok(matches!(res, sea_orm::TryInsertResult::Inserted(n) if n > 0))
}

/// The deployment's evidence-signing key, generated on first use. The
/// stored public key must match the sealed seed: a row whose public half was
/// swapped is refused.
pub async fn evidence_signer(
    db: &DatabaseConnection,
    vault: &Vault,
) -> DomainResult<crate::crypto::service::EvidenceSigner> {
    use crate::crypto::{CryptoError, service::EvidenceSigner};
    if find(db, EVIDENCE_SIGNING).await?.is_none() {
        let (signer, seed) = EvidenceSigner::generate();
        vault.reserve_seals(db, 1).await?;
        if insert(db, vault, EVIDENCE_SIGNING, &seed, Some(signer.public_key_base64()), String::new()).await? {
            tracing::info!(public_key = %signer.public_key_base64(), "generated the evidence-signing key");
        }
    }
    let row = find(db, EVIDENCE_SIGNING).await?.ok_or(CryptoError::MissingServiceKey("evidence-signing"))?;
    let signer = EvidenceSigner::from_opened(&open(db, vault, &row).await?)?;
    if row.public_key.as_deref() != Some(signer.public_key_base64().as_str()) {
        return Err(CryptoError::Unauthentic.into());
    }
    Ok(signer)
}

/// The evidence-signing public key (base64), if the key exists yet. Reading
/// it needs no vault, but it is only trustworthy as published by
/// `signet evidence public-key` on a deployment whose vault opens it.
pub async fn evidence_public_key<C: ConnectionTrait>(conn: &C) -> DomainResult<Option<String>> {
    Ok(find(conn, EVIDENCE_SIGNING).await?.and_then(|r| r.public_key))
}
