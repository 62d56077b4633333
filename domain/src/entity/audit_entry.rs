//! `audit_log` rows.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "audit_log")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub seq: i64,
    pub at: i64,
    pub actor: String,
    pub actor_kind: String,
    pub action: String,
    pub target_kind: String,
    pub target_id: String,
    pub tenant_id: Option<String>,
    pub before: Option<String>,
    pub after: Option<String>,
    pub prev_hash: String,
    pub hash: String,
    /// How `hash` was computed: `sha256` (entries from before the chain was
    /// keyed) or `hmac-sha256` (keyed with the audit MAC key).
    pub alg: String,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
