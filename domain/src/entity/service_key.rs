//! `service_keys` rows: Signet's own keys (the evidence-signing key, the
//! audit MAC key), sealed in the vault like every other secret.

use sea_orm::entity::prelude::*;

#[derive(Clone, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "service_keys")]
pub struct Model {
    /// `evidence-signing` or `audit-mac`: one key per purpose.
    #[sea_orm(primary_key, auto_increment = false)]
    pub purpose: String,
    pub key_id: String,
    /// Sealed with `Aad::service_key(purpose, key_id, binding)`.
    pub ciphertext: Vec<u8>,
    pub kek_version: i32,
    /// The public half, for asymmetric keys (base64).
    pub public_key: Option<String>,
    /// Facts sealed together with the key (e.g. the first audit sequence
    /// number it keys), so they cannot be changed without the master key.
    pub binding: String,
    pub created_at: i64,
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("service_key::Model")
            .field("purpose", &self.purpose)
            .field("key_id", &self.key_id)
            .finish_non_exhaustive()
    }
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
