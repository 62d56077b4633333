//! The process's view of the KEK ring stored in `kek_versions`.
//!
//! KEKs live in the database sealed under the master key, so all instances
//! share one ring. Instances refresh the ring periodically and whenever they
//! meet a version they do not hold, which is what lets `signet kek rotate`
//! run online.
//!
//! Seals are counted per KEK version (`kek_versions.seals`): AES-GCM with
//! random 96-bit nonces must stay well below 2^32 encryptions under one
//! key. The count is raised *before* sealing, a block at a time, outside
//! any write transaction ([`Vault::reserve_seals`]; inside one, an SQLite
//! writer would wait on itself), and a process seals only while its block
//! lasts ([`CryptoError::SealsNotReserved`] otherwise). So the stored count
//! is never below the seals made; it is above by what processes reserved
//! and did not use (what each had left when it stopped: under two blocks of
//! at most [`MAX_SEAL_BLOCK`]) and by seals whose transaction rolled back.

use std::sync::{Arc, Mutex, RwLock};

use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder, Set};
use zeroize::Zeroizing;

use crate::{
    clock,
    crypto::{Aad, CryptoError, Kek, Keyring, MasterKey},
    entity::kek_version,
    error::{DomainError, DomainResult},
};

/// Seals under one version at which the evidence warns and the log says
/// to rotate: a quarter of the way to 2^32.
pub const SEALS_WARN_AT: i64 = 1 << 30;
/// The smallest and largest number of seals reserved at a time.
pub const MIN_SEAL_BLOCK: u64 = 1024;
pub const MAX_SEAL_BLOCK: u64 = 65_536;

/// The master key plus the current KEK ring.
pub struct Vault {
    master: MasterKey,
    ring: RwLock<Arc<Keyring>>,
    seals: Mutex<Option<Allowance>>,
    /// One refill at a time per process.
    refill: tokio::sync::Mutex<()>,
    /// Where the master key and data live (evidence reads their modes).
    files: crate::evidence::files::DeploymentFiles,
}

/// Seals this process may still make under `version`: already counted.
#[derive(Debug, Clone, Copy)]
struct Allowance {
    version: u32,
    left: u64,
    /// The last block reserved (the next one doubles it, up to the most).
    block: u64,
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
                ..Default::default()
            })
            .on_conflict_do_nothing_on([kek_version::Column::Version])
            .exec(db)
            .await?;
        }
        let ring = load_ring(db, &master).await?;
        Ok(Vault {
            master,
            ring: RwLock::new(Arc::new(ring)),
            seals: Mutex::new(None),
            refill: tokio::sync::Mutex::new(()),
            files: Default::default(),
        })
    }

    /// Records where the master key and the data live (the server's
    /// config knows; evidence bundles show their modes and owners).
    pub fn with_files(mut self, files: crate::evidence::files::DeploymentFiles) -> Vault {
        self.files = files;
        self
    }

    pub fn files(&self) -> &crate::evidence::files::DeploymentFiles {
        &self.files
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

    /// Seals under the version this process reserved seals for (the newest
    /// it knew at its last [`Vault::reserve_seals`]), taking one of them.
    pub fn seal(&self, aad: &Aad, plaintext: &[u8]) -> Result<(Vec<u8>, u32), CryptoError> {
        let version = {
            let mut seals = self.seals.lock().unwrap_or_else(|p| p.into_inner());
            let a = seals.as_mut().filter(|a| a.left > 0).ok_or(CryptoError::SealsNotReserved)?;
            a.left -= 1;
            a.version
        };
        Ok((self.ring().seal_under(version, aad, plaintext)?, version))
    }

    /// Re-seals under the version [`Vault::seal`] uses; `None` when the
    /// ciphertext is already under it.
    pub fn rewrap(&self, aad: &Aad, ciphertext: &[u8]) -> Result<Option<Vec<u8>>, CryptoError> {
        if Some(crate::crypto::kek_version_of(ciphertext)?) == self.sealing_version() {
            return Ok(None);
        }
        let plain = self.ring().open(aad, ciphertext)?;
        self.seal(aad, &plain).map(|(sealed, _)| Some(sealed))
    }

    /// The version seals are made under now, if any are reserved.
    pub fn sealing_version(&self) -> Option<u32> {
        self.seals.lock().unwrap_or_else(|p| p.into_inner()).map(|a| a.version)
    }

    fn has_left(&self, version: u32, want: u64) -> bool {
        let seals = self.seals.lock().unwrap_or_else(|p| p.into_inner());
        seals.is_some_and(|a| a.version == version && a.left >= want)
    }

    fn has_seals(&self, version: u32, want: u64) -> bool {
        let seals = self.seals.lock().unwrap_or_else(|p| p.into_inner());
        // A quarter of the block kept in hand: others seal between this
        // check and the caller's own seals.
        seals.is_some_and(|a| a.version == version && a.left >= Ord::max(want, a.block / 4))
    }

    /// Makes sure this process may seal at least `want` values under the
    /// newest KEK version, first raising that version's stored count by a
    /// block when it may not. Call it outside any write transaction, before
    /// one that seals. The block grows with use, so a process that seals
    /// once (a CLI command) counts little it does not use.
    pub async fn reserve_seals(&self, db: &DatabaseConnection, want: u64) -> DomainResult<()> {
        let version = self.ring().newest_version().ok_or(CryptoError::EmptyKeyring)?;
        if self.has_seals(version, want) {
            return Ok(());
        }
        let _turn = match self.refill.try_lock() {
            Ok(turn) => turn,
            // Another task is counting the next block: what is in hand will
            // do meanwhile, if there is enough.
            Err(_) if self.has_left(version, want) => return Ok(()),
            Err(_) => self.refill.lock().await,
        };
        if self.has_seals(version, want) {
            return Ok(());
        }
        let last = self.seals.lock().unwrap_or_else(|p| p.into_inner()).filter(|a| a.version == version);
        let block = last.map_or(0, |a| a.block * 2).clamp(MIN_SEAL_BLOCK, MAX_SEAL_BLOCK).max(want.saturating_mul(2));
        count_ahead(db, version, block).await?;
        {
            let mut seals = self.seals.lock().unwrap_or_else(|p| p.into_inner());
            let left = seals.filter(|a| a.version == version).map_or(0, |a| a.left);
            *seals = Some(Allowance { version, left: left + block, block });
        }
        let total = kek_version::Entity::find_by_id(version as i32).one(db).await?.map_or(0, |v| v.seals);
        if total >= SEALS_WARN_AT {
            tracing::warn!(
                kek_version = version,
                seals = total,
                "KEK version {version} has sealed over 2^30 values (counted ahead); rotate it (signet kek rotate) \
                 well before 2^32"
            );
        }
        Ok(())
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

/// Raises `version`'s stored seal count by `block`, on its own (never in a
/// caller's transaction).
async fn count_ahead(db: &DatabaseConnection, version: u32, block: u64) -> DomainResult<()> {
    use sea_orm::sea_query::{Expr, ExprTrait};
    let counted = kek_version::Entity::update_many()
        .col_expr(kek_version::Column::Seals, Expr::col(kek_version::Column::Seals).add(block as i64))
        .filter(kek_version::Column::Version.eq(version as i32))
        .exec(db)
        .await?;
    if counted.rows_affected == 0 {
        return Err(CryptoError::UnknownKekVersion(version).into());
    }
    Ok(())
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
