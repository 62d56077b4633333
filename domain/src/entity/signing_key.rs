//! `signing_keys` rows.

use sea_orm::entity::prelude::*;
use views::keys::KeyStatus;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "signing_keys")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub tenant_id: String,
    pub endpoint_id: String,
    pub status: KeyStatus,
    /// JSON array: the key's scope, the endpoint's types or a subset.
    pub event_types: String,
    /// Hash of the current scope; must equal `approved_scope_hash` to verify.
    pub scope_hash: String,
    pub approved_scope_hash: Option<String>,
    /// Sealed by the vault with `Aad::signing_key(tenant, endpoint, id)`;
    /// empty for an `ed25519` key, which holds nothing secret.
    pub secret_ciphertext: Vec<u8>,
    /// 0 (no ring version) for an `ed25519` key.
    pub kek_version: i32,
    pub owner: String,
    pub rotation_owner: String,
    pub replaces_key_id: Option<String>,
    /// Overlap to give the replaced key once this one is activated.
    pub overlap_secs: Option<i64>,
    pub created_by: String,
    pub created_at: i64,
    pub activated_at: Option<i64>,
    pub expires_at: Option<i64>,
    pub revoked_at: Option<i64>,
    pub revoked_reason: Option<String>,
    pub last_verified_at: Option<i64>,
    pub verified_count: i64,
    /// Verification failures attributed to this key (named by
    /// `signet-key-id`, or the endpoint's last key to verify).
    pub failure_count: i64,
    pub last_failure_at: Option<i64>,
    pub last_failure_reason: Option<String>,
    /// Who last changed the key's event types: like its creator, they
    /// cannot approve it (four eyes).
    pub scope_changed_by: Option<String>,
    /// `hmac` (a sealed `whsec_…` secret) or `ed25519` (a `v1a` public key).
    pub credential_kind: String,
    /// The `whpk_…` public key of an `ed25519` key, in clear.
    pub public_key: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
