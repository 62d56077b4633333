//! Opening what a process needs before it serves or runs a command.

use crate::{
    audit,
    crypto::MasterKey,
    error::DomainError,
    vault::{Vault, VaultOpenError},
};

/// Opens the vault (the KEK ring, creating version 1 on an empty database)
/// and loads the audit chain's MAC key, which every audit append in this
/// process needs. Fails, changing nothing, when the master key does not
/// match.
pub async fn open_vault(db: &sea_orm::DatabaseConnection, master: MasterKey) -> Result<Vault, VaultOpenError> {
    let vault = Vault::load_ring_only(db, master).await?;
    audit::key::load(db, &vault).await.map_err(|e| match e {
        DomainError::Db(d) => VaultOpenError::Db(d),
        DomainError::Crypto(c) => VaultOpenError::Crypto(c),
        other => VaultOpenError::AuditKey(other.public_message()),
    })?;
    Ok(vault)
}
