//! The audit chain's MAC key.
//!
//! Threat model: someone with write access to the database but not the master
//! key edits an entry and recomputes every later link. With plain SHA-256 links
//! that goes unnoticed; with HMAC-SHA256 links under a key sealed in the vault,
//! they cannot produce valid links. The key's sealed binding names the first
//! sequence number it keys, so entries cannot be moved back to the unkeyed form
//! either. What remains (docs/security.md#users-sessions-tokens-audit): such an
//! attacker can delete the key row and the whole keyed chain and start over;
//! signed checkpoints exported outside the database catch that.
//!
//! Appends happen inside callers' transactions that carry no vault, so each
//! process keeps the opened key here, by key id, once `startup::open_vault` has
//! opened it. The head row names the key id; an append whose key is not
//! loaded fails rather than writing an unkeyed link.

use std::{
    collections::HashMap,
    sync::{Arc, OnceLock, RwLock},
};

use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, PaginatorTrait, QueryFilter, sea_query::Expr};

use crate::{
    crypto::{CryptoError, service::MacKey},
    db,
    entity::{audit_entry, audit_head},
    error::{DomainError, DomainResult},
    service_keys::{self, AUDIT_MAC},
    vault::Vault,
};

/// The link algorithm of entries keyed with the MAC key.
pub const KEYED: &str = "hmac-sha256";
/// The link algorithm of entries written before the chain was keyed.
pub const PLAIN: &str = "sha256";

/// An opened audit MAC key and the first sequence number it keys.
pub struct ChainKey {
    pub key_id: String,
    pub since_seq: i64,
    pub created_at: i64,
    mac: MacKey,
}

impl std::fmt::Debug for ChainKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChainKey")
            .field("key_id", &self.key_id)
            .field("since_seq", &self.since_seq)
            .finish_non_exhaustive()
    }
}

impl ChainKey {
    pub(crate) fn mac_hex(&self, data: &[u8]) -> String {
        self.mac.mac_hex(data)
    }
    pub(crate) fn verify_hex(&self, data: &[u8], mac: &str) -> bool {
        self.mac.verify_hex(data, mac)
    }
}

fn loaded() -> &'static RwLock<HashMap<String, Arc<ChainKey>>> {
    static KEYS: OnceLock<RwLock<HashMap<String, Arc<ChainKey>>>> = OnceLock::new();
    KEYS.get_or_init(Default::default)
}

/// The opened key with this id, if this process loaded it.
pub(crate) fn get(key_id: &str) -> Option<Arc<ChainKey>> {
    loaded().read().unwrap_or_else(|p| p.into_inner()).get(key_id).cloned()
}

fn binding(since_seq: i64) -> String {
    format!("since_seq={since_seq}")
}

fn parse_binding(text: &str) -> Option<i64> {
    text.strip_prefix("since_seq=")?.parse().ok()
}

/// Opens the database's audit MAC key for this process, creating it when
/// the database has none. Called by `startup::open_vault`.
pub async fn load(db: &DatabaseConnection, vault: &Vault) -> DomainResult<Arc<ChainKey>> {
    if service_keys::find(db, AUDIT_MAC).await?.is_none() {
        create(db, vault).await?;
    }
    let row = service_keys::find(db, AUDIT_MAC).await?.ok_or(CryptoError::MissingServiceKey("audit MAC"))?;
    let since_seq = parse_binding(&row.binding).ok_or(CryptoError::Malformed)?;
    let opened = service_keys::open(db, vault, &row).await?;
    let key = Arc::new(ChainKey {
        key_id: row.key_id.clone(),
        since_seq,
        created_at: row.created_at,
        mac: MacKey::from_opened(&opened)?,
    });
    loaded().write().unwrap_or_else(|p| p.into_inner()).insert(row.key_id, key.clone());
    Ok(key)
}

/// Creates the key under the head row's lock, so its first keyed sequence
/// number is exact even while others append.
async fn create(db: &DatabaseConnection, vault: &Vault) -> DomainResult<()> {
    vault.reserve_seals(db, 1).await?;
    let txn = db::begin_write(db).await?;
    audit_head::Entity::update_many()
        .col_expr(audit_head::Column::Seq, Expr::col(audit_head::Column::Seq))
        .filter(audit_head::Column::Id.eq(1))
        .exec(&txn)
        .await?;
    if service_keys::find(&txn, AUDIT_MAC).await?.is_some() {
        txn.rollback().await?;
        return Ok(());
    }
    // Keyed entries without a key: the key row was removed. Making a new key
    // now would bless whatever the chain says; refuse instead.
    let keyed = audit_entry::Entity::find().filter(audit_entry::Column::Alg.ne(PLAIN)).count(&txn).await?;
    if keyed > 0 {
        return Err(DomainError::conflict(
            "audit_key_missing",
            format!(
                "the audit log has {keyed} keyed entries but its MAC key is gone from the database; \
                 restore the database from a backup"
            ),
        ));
    }
    let head =
        audit_head::Entity::find_by_id(1).one(&txn).await?.ok_or(CryptoError::MissingServiceKey("audit head"))?;
    let (_, bytes) = MacKey::generate();
    if !service_keys::insert(&txn, vault, AUDIT_MAC, &bytes, None, binding(head.seq + 1)).await? {
        txn.rollback().await?;
        return Ok(());
    }
    let row = service_keys::find(&txn, AUDIT_MAC).await?.ok_or(CryptoError::MissingServiceKey("audit MAC"))?;
    audit_head::Entity::update_many()
        .col_expr(audit_head::Column::KeyId, Expr::value(row.key_id))
        .filter(audit_head::Column::Id.eq(1))
        .exec(&txn)
        .await?;
    txn.commit().await?;
    if head.seq > 0 {
        tracing::warn!(
            since_seq = head.seq + 1,
            "the audit chain is keyed from this entry on; the {} entries before it keep plain SHA-256 links",
            head.seq
        );
    }
    Ok(())
}
