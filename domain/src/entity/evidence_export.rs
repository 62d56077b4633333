//! `evidence_exports` rows: every bundle exported, byte for byte, so a
//! sign-off names exactly what the reviewer read.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "evidence_exports")]
pub struct Model {
    /// Hex SHA-256 of `manifest.json`.
    #[sea_orm(primary_key, auto_increment = false)]
    pub digest: String,
    /// The tenant the bundle is limited to, if any.
    pub tenant_id: Option<String>,
    pub actor: String,
    pub actor_kind: String,
    /// `cli`, `api` or `console`.
    pub via: String,
    pub created_at: i64,
    pub manifest: String,
    /// Base64 Ed25519 signature over `manifest`.
    pub signature: String,
    pub evidence_json: String,
    pub evidence_html: String,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
