//! The process's view of the KEK ring stored in `kek_versions`.
//!
//! KEKs live in the database sealed under the master key, so all instances
//! share one ring. Instances refresh the ring periodically and whenever they
//! meet a version they do not hold, which is what lets `signet kek rotate`
//! run online.

use std::sync::{Arc, RwLock};

use sea_orm::{
    ColumnTrait, DatabaseConnection, EntityTrait, PaginatorTrait, QueryFilter,
    QueryOrder, QuerySelect, Set,
};
use serde::Serialize;
use serde_json::json;
use zeroize::Zeroizing;

use crate::{
    audit::{self, Change},
    auth::{Permission, Principal, Scope},
    clock,
    crypto::{Aad, CryptoError, Kek, Keyring, MasterKey},
    db,
    entity::{kek_version, signing_key},
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
    pub async fn load(db: &DatabaseConnection, master: MasterKey) -> Result<Vault, VaultOpenError> {
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
        let vault = Vault { master, ring: RwLock::new(Arc::new(ring)) };
        // Audit appends in this process need the chain's key (`audit::key`).
        audit::key::load(db, &vault).await.map_err(|e| match e {
            DomainError::Db(d) => VaultOpenError::Db(d),
            DomainError::Crypto(c) => VaultOpenError::Crypto(c),
            other => VaultOpenError::AuditKey(other.public_message()),
        })?;
        Ok(vault)
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

    /// Seals under the newest KEK this process knows.
    pub fn seal(&self, aad: &Aad, plaintext: &[u8]) -> Result<(Vec<u8>, u32), CryptoError> {
        let ring = self.ring();
        let version = ring.newest_version().ok_or(CryptoError::EmptyKeyring)?;
        Ok((ring.seal(aad, plaintext)?, version))
    }

    /// Opens, refreshing the ring once if the ciphertext names a KEK version
    /// another instance added since.
    pub async fn open(&self, db: &DatabaseConnection, aad: &Aad, ciphertext: &[u8]) -> DomainResult<Zeroizing<Vec<u8>>> {
        match self.ring().open(aad, ciphertext) {
            Err(CryptoError::UnknownKekVersion(_)) => {
                self.refresh(db).await.map_err(|e| match e {
                    VaultOpenError::Db(d) => DomainError::Db(d),
                    VaultOpenError::Crypto(c) => DomainError::Crypto(c),
                    VaultOpenError::WrongMasterKey(_) | VaultOpenError::AuditKey(_) => DomainError::Crypto(CryptoError::Unauthentic),
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

/// Progress of a rewrap pass, for the CLI.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct RewrapProgress {
    pub rewrapped: u64,
    pub remaining: u64,
}

/// What `signet kek rotate` did.
#[derive(Debug, Clone, Serialize)]
pub struct RotateReport {
    /// The version everything is now sealed under.
    pub kek_version: u32,
    /// Whether this run added that version (false: resumed an earlier run).
    pub added_version: bool,
    pub rewrapped: u64,
}

const REWRAP_BATCH: u64 = 200;

/// Adds a KEK version and rewraps every stored secret under it, in batches,
/// while the server keeps running. Idempotent: if secrets remain under an
/// older version (an interrupted run), it resumes instead of adding yet
/// another version.
pub async fn rotate_kek(
    db: &DatabaseConnection,
    vault: &Vault,
    principal: &Principal,
    mut progress: impl FnMut(RewrapProgress),
) -> DomainResult<RotateReport> {
    let auth = principal.authorize(Permission::ManageUsers, Scope::Global)?;
    let open_err = |e: VaultOpenError| match e {
        VaultOpenError::Db(d) => DomainError::Db(d),
        VaultOpenError::Crypto(c) => DomainError::Crypto(c),
        VaultOpenError::WrongMasterKey(_) | VaultOpenError::AuditKey(_) => DomainError::Crypto(CryptoError::Unauthentic),
    };
    vault.refresh(db).await.map_err(open_err)?;
    let newest = vault.ring().newest_version().ok_or(CryptoError::EmptyKeyring)?;
    let stale = count_stale(db, newest).await?;
    let added_version = stale == 0;
    let target = if added_version {
        let next = newest + 1;
        let wrapped = vault.master.wrap_kek(next, &Kek::generate())?;
        let txn = db::begin_write(db).await?;
        kek_version::Entity::insert(kek_version::ActiveModel {
            version: Set(next as i32),
            wrapped_key: Set(wrapped),
            created_at: Set(clock::now_ms()),
        })
        .exec(&txn)
        .await
        .map_err(db::conflict_if_unique("rotation_in_progress", "another KEK rotation added a version at the same time; run it again"))?;
        audit::record(
            &txn,
            auth.actor(),
            Change {
                action: "kek.rotate",
                target_kind: "kek",
                target_id: &next.to_string(),
                tenant_id: None,
                before: Some(json!({"kek_version": newest})),
                after: Some(json!({"kek_version": next})),
            },
        )
        .await?;
        txn.commit().await?;
        vault.refresh(db).await.map_err(open_err)?;
        next
    } else {
        newest
    };
    let rewrapped = rewrap_all(db, vault, target, &mut progress).await?;
    let txn = db::begin_write(db).await?;
    audit::record(
        &txn,
        auth.actor(),
        Change {
            action: "kek.rewrap",
            target_kind: "kek",
            target_id: &target.to_string(),
            tenant_id: None,
            before: None,
            after: Some(json!({"rewrapped": rewrapped, "resumed": !added_version})),
        },
    )
    .await?;
    txn.commit().await?;
    Ok(RotateReport { kek_version: target, added_version, rewrapped })
}

async fn count_stale(db: &DatabaseConnection, newest: u32) -> DomainResult<u64> {
    Ok(signing_key::Entity::find()
        .filter(signing_key::Column::KekVersion.ne(newest as i32))
        .count(db)
        .await?)
}

/// Rewraps until no secret is left under another version. Each row is
/// updated only if it still holds the ciphertext that was read, so a
/// concurrent change is never overwritten.
async fn rewrap_all(
    db: &DatabaseConnection,
    vault: &Vault,
    target: u32,
    progress: &mut impl FnMut(RewrapProgress),
) -> DomainResult<u64> {
    let mut done = 0u64;
    loop {
        let batch = signing_key::Entity::find()
            .filter(signing_key::Column::KekVersion.ne(target as i32))
            .order_by_asc(signing_key::Column::Id)
            .limit(REWRAP_BATCH)
            .all(db)
            .await?;
        if batch.is_empty() {
            break;
        }
        let ring = vault.ring();
        let txn = db::begin_write(db).await?;
        for k in &batch {
            let aad = Aad::signing_key(&k.tenant_id, &k.endpoint_id, &k.id);
            let Some(sealed) = ring.rewrap(&aad, &k.secret_ciphertext)? else { continue };
            signing_key::Entity::update_many()
                .col_expr(signing_key::Column::SecretCiphertext, sea_orm::sea_query::Expr::value(sealed))
                .col_expr(signing_key::Column::KekVersion, sea_orm::sea_query::Expr::value(target as i32))
                .filter(signing_key::Column::Id.eq(&k.id))
                .filter(signing_key::Column::KekVersion.eq(k.kek_version))
                .exec(&txn)
                .await?;
            done += 1;
        }
        txn.commit().await?;
        let remaining = count_stale(db, target).await?;
        progress(RewrapProgress { rewrapped: done, remaining });
    }
    Ok(done)
}
