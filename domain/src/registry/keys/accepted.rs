//! What the receiver verifies with: an endpoint's accepted key set and a
//! key's opened secret.

use sea_orm::{ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter};

use super::effective_status;
use crate::{
    crypto::{Aad, SigningSecret},
    entity::signing_key,
    error::{DomainError, DomainResult},
    vault::Vault,
};
use views::keys::KeyStatus;

/// The accepted key set of an endpoint at `now`: active keys plus retiring
/// keys inside their overlap, each only while its scope is the approved one.
pub async fn accepted_key_rows<C: ConnectionTrait>(
    conn: &C,
    endpoint_id: &str,
    now: i64,
) -> DomainResult<Vec<signing_key::Model>> {
    let rows = signing_key::Entity::find()
        .filter(signing_key::Column::EndpointId.eq(endpoint_id))
        .filter(signing_key::Column::Status.is_in([KeyStatus::Active, KeyStatus::Retiring]))
        .all(conn)
        .await?;
    Ok(rows
        .into_iter()
        .filter(|k| match effective_status(k, now) {
            KeyStatus::Active | KeyStatus::Retiring => k.approved_scope_hash.as_deref() == Some(k.scope_hash.as_str()),
            _ => false,
        })
        .collect())
}

/// Opens a key's sealed secret (for the receiver's verifier only).
pub async fn open_secret(
    db: &DatabaseConnection,
    vault: &Vault,
    key: &signing_key::Model,
) -> DomainResult<SigningSecret> {
    let plain =
        vault.open(db, &Aad::signing_key(&key.tenant_id, &key.endpoint_id, &key.id), &key.secret_ciphertext).await?;
    SigningSecret::from_opened(plain).ok_or(DomainError::Crypto(crate::crypto::CryptoError::Malformed))
}
