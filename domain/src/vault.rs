//! The process's view of the KEK ring stored in `kek_versions`.
//!
//! KEKs live in the database sealed under the master key, so all instances
//! share one ring. Instances refresh the ring periodically and whenever they
//! meet a version they do not hold, which is what lets `signet kek rotate`
//! run online.

use std::sync::{Arc, RwLock};

use sea_orm::{DatabaseConnection, EntityTrait, PaginatorTrait, QueryOrder, Set};
use zeroize::Zeroizing;

use crate::{
    clock,
    crypto::{Aad, CryptoError, Kek, Keyring, MasterKey},
    entity::kek_version,
    error::{DomainError, DomainResult},
};

/// The master key plus the current KEK ring.
pub struct Vault {
    master: MasterKey,
    ring: RwLock<Arc<Keyring>>,
}

impl std::fmt::Debug for Vault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vault").field("ring", &self.ring()).finish()
    }
}

/// Why the vault could not open.
#[derive(Debug, thiserror::Error)]
pub enum VaultOpenError {
    #[error(
        "the master key does not open KEK version {0} stored in the database: this is not the key \
         this database was created with. Supply the original SIGNET_MASTER_KEY or \
         SIGNET_MASTER_KEY_FILE; nothing was changed"
    )]
    WrongMasterKey(u32),
    #[error("database error while loading the key ring")]
    Db(#[from] sea_orm::DbErr),
    #[error("vault error: {0}")]
    Crypto(#[from] CryptoError),
    /// The audit MAC key could not be opened or created (the message says why).
    #[error("audit log key: {0}")]
    AuditKey(String),
}

impl Vault {
    /// Loads every KEK version, creating version 1 on an empty database.
    /// Fails (and changes nothing) when the master key does not match.
    /// Audit appends need more: use [`crate::startup::open_vault`].
    pub(crate) async fn load_ring_only(db: &DatabaseConnection, master: MasterKey) -> Result<Vault, VaultOpenError> {
        if kek_version::Entity::find().count(db).await? == 0 {
            let wrapped = master.wrap_kek(1, &Kek::generate())?;
            // Two instances starting together: one insert wins, both load it.
            kek_version::Entity::insert(kek_version::ActiveModel {
                version: Set(1),
                wrapped_key: Set(wrapped),
                created_at: Set(clock::now_ms()),
            })
            .on_conflict_do_nothing_on([kek_version::Column::Version])
            .exec(db)
            .await?;
        }
        let ring = load_ring(db, &master).await?;
        Ok(Vault { master, ring: RwLock::new(Arc::new(ring)) })
    }

    /// The current ring (cheap clone of an `Arc`).
    pub fn ring(&self) -> Arc<Keyring> {
        match self.ring.read() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Reloads the ring from the database.
    pub async fn refresh(&self, db: &DatabaseConnection) -> Result<(), VaultOpenError> {
        let ring = Arc::new(load_ring(db, &self.master).await?);
        match self.ring.write() {
            Ok(mut g) => *g = ring,
            Err(poisoned) => *poisoned.into_inner() = ring,
        }
        Ok(())
    }

    /// A fresh KEK for `version`, wrapped under the master key (for
    /// `kek::rotate` to store).
    pub fn wrap_new_kek(&self, version: u32) -> Result<Vec<u8>, CryptoError> {
        self.master.wrap_kek(version, &Kek::generate())
    }

    /// Seals under the newest KEK this process knows.
    pub fn seal(&self, aad: &Aad, plaintext: &[u8]) -> Result<(Vec<u8>, u32), CryptoError> {
        let ring = self.ring();
        let version = ring.newest_version().ok_or(CryptoError::EmptyKeyring)?;
        Ok((ring.seal(aad, plaintext)?, version))
    }

    /// Opens, refreshing the ring once if the ciphertext names a KEK version
    /// another instance added since.
    pub async fn open(
        &self,
        db: &DatabaseConnection,
        aad: &Aad,
        ciphertext: &[u8],
    ) -> DomainResult<Zeroizing<Vec<u8>>> {
        match self.ring().open(aad, ciphertext) {
            Err(CryptoError::UnknownKekVersion(_)) => {
                self.refresh(db).await.map_err(|e| match e {
                    VaultOpenError::Db(d) => DomainError::Db(d),
                    VaultOpenError::Crypto(c) => DomainError::Crypto(c),
                    VaultOpenError::WrongMasterKey(_) | VaultOpenError::AuditKey(_) => {
                        DomainError::Crypto(CryptoError::Unauthentic)
                    }
                })?;
                Ok(self.ring().open(aad, ciphertext)?)
            }
            other => Ok(other?),
        }
    }
}

async fn load_ring(db: &DatabaseConnection, master: &MasterKey) -> Result<Keyring, VaultOpenError> {
    let rows = kek_version::Entity::find().order_by_asc(kek_version::Column::Version).all(db).await?;
    let mut ring = Keyring::new();
    for row in rows {
        let version = u32::try_from(row.version).map_err(|_| CryptoError::Malformed)?;
        let kek = master.unwrap_kek(version, &row.wrapped_key).map_err(|e| match e {
            CryptoError::Unauthentic => VaultOpenError::WrongMasterKey(version),
            other => VaultOpenError::Crypto(other),
        })?;
        ring.insert(version, kek);
    }
    Ok(ring)
}
